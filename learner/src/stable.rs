//! Stable retraining: a new table that keeps the served table's homes and moves one only
//! where the move pays, within a movement budget (`ballot retrain --max-move`).
//!
//! A fresh table is trained from scratch: METIS numbers its parts arbitrarily, so even the
//! same partition under other labels would move every term, and every promotion starts the
//! replicas' caches over. Repartitioners that pay for migration (Zoltan's, Catalyurek et
//! al., "A repartitioning hypergraph model for dynamic load balancing", JPDC 2009;
//! Mt-KaHyPar's fixed vertices) start from the current assignment. Here, for each
//! candidate partition:
//!
//! 1. **Match the parts to the homes.** Part `p` is relabelled with the served home it
//!    shares the most requested bytes with (the Hungarian method on the R × R overlap,
//!    `pathfinding::kuhn_munkres`): a pure renaming, the partition's quality unchanged.
//! 2. **Keep the moves that pay, within the budget.** A term whose part still differs from
//!    its served home is a move. Its gain is what keeping it saves in the partition's own
//!    terms: the weight of its edges to queries of its new part less those to queries of
//!    its served home (the Fiduccia–Mattheyses gain of moving it back). Moves are kept in
//!    order of gain per requested byte while the budget lasts; a move with no gain, or past
//!    the budget, goes back to the served home. A term that stays keeps the served table's
//!    votes as they are (queries go where the sum of their terms' votes is highest, so new
//!    weights alone would move queries); a moved term takes its top vote's weight along; a
//!    term the served table leaves out votes for its part.
//! 3. **Refine within the budget** ([`crate::refine`] with a [`Budget`]): a term leaves its
//!    served home only while the budget lasts (moves back are free), a term at its served
//!    home keeps its served votes, and a moved term's home stays its top vote, so the
//!    budget the learner honours is the movement ([`cache_sim::sim::movement`]) the served
//!    and new tables show.
//!
//! The movement is counted over the train queries' requested bytes (the traffic the caches
//! hold when the table is promoted).

use cache_sim::sim::movement::{allowance, requested_by_term, top_votes, votes_by_term};
use cache_sim::sim::Trace;
use data::table::VotingTable;
use pathfinding::prelude::{kuhn_munkres, Matrix};

use crate::graph::TermQueryGraph;
use crate::partition::Partition;
use crate::votes::TermVotes;

/// The served table's homes and what moving away from them may cost, over one trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    /// Per trace term id: the served table's top vote (None: it leaves the term out).
    pub homes: Vec<Option<u16>>,
    /// Per trace term id: the served table's votes, the top vote first.
    pub served: Vec<Vec<(u16, f32)>>,
    /// Per trace term id: the requested bytes a move of the term costs.
    pub cost: Vec<u64>,
    /// The most requested bytes whose top vote may move.
    pub bytes: u64,
}

impl Budget {
    /// The budget of moving at most `max_move` of the requested bytes of every query of
    /// `trace` away from `served`'s top votes.
    pub fn new(trace: &Trace, served: &VotingTable, max_move: f64) -> Budget {
        let cost = requested_by_term(trace, 0..trace.len());
        let total: u64 = cost.iter().sum();
        Budget {
            homes: top_votes(trace, served),
            served: votes_by_term(trace, served),
            bytes: allowance(total, max_move),
            cost,
        }
    }

    /// Which of `moves` (a score and a term id each; a term moving away from its served
    /// home) keep within the budget with `spent` bytes already moved: best score first (of
    /// equal scores the lower term id), each admitted while its cost still fits; a move
    /// scored NaN or infinite is never admitted. Returns each move's term with `true` when
    /// admitted.
    pub fn admit(&self, mut moves: Vec<(f64, usize)>, mut spent: u64) -> Vec<(usize, bool)> {
        moves.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        moves
            .into_iter()
            .map(|(score, t)| {
                let fits = score.is_finite() && spent + self.cost[t] <= self.bytes;
                if fits {
                    spent += self.cost[t];
                }
                (t, fits)
            })
            .collect()
    }
}

/// The initial votes of a stable candidate: `partition` of `graph` relabelled to match the
/// served homes, with only the moves that pay within `budget` kept (steps 1 and 2 of the
/// module docs).
pub fn stable_start(
    trace: &Trace,
    graph: &TermQueryGraph,
    partition: &Partition,
    replicas: u16,
    budget: &Budget,
) -> TermVotes {
    let relabel = match_parts(graph, partition, replicas, budget);
    let part: Vec<u16> = partition
        .part
        .iter()
        .map(|&p| relabel[p as usize])
        .collect();
    // Every move with its gain: edge weight to queries of the new part less edge weight to
    // queries of the served home.
    let mut moves: Vec<(f64, usize)> = Vec::new();
    let mut vertex = vec![usize::MAX; trace.dict.len()];
    for (v, &t) in graph.term_ids.iter().enumerate() {
        let t = t as usize;
        let Some(home) = budget.homes[t] else {
            continue;
        };
        let new = part[v];
        if new == home {
            continue;
        }
        let (from, to) = (graph.xadj[v] as usize, graph.xadj[v + 1] as usize);
        let gain: i64 = (from..to)
            .map(|e| {
                let q = part[graph.adjncy[e] as usize];
                let w = i64::from(graph.adjwgt[e]);
                if q == new {
                    w
                } else if q == home {
                    -w
                } else {
                    0
                }
            })
            .sum();
        let density = if gain > 0 {
            gain as f64 / budget.cost[t].max(1) as f64
        } else {
            f64::NEG_INFINITY
        };
        vertex[t] = v;
        moves.push((density, t));
    }
    let mut part = part;
    for (t, admitted) in budget.admit(moves, 0) {
        if !admitted {
            part[vertex[t]] = budget.homes[t].unwrap_or(part[vertex[t]]);
        }
    }
    // A term the served table votes for keeps its votes, or moves with the weight of its
    // top vote; a new term votes with its bytes scaled as the served weights are.
    let (weights, bytes) = budget
        .served
        .iter()
        .enumerate()
        .filter_map(|(t, v)| Some((f64::from(v.first()?.1), trace.term_bytes[t] as f64)))
        .fold((0.0, 0.0), |(w, b), (tw, tb)| (w + tw, b + tb));
    let scale = if bytes > 0.0 { weights / bytes } else { 1.0 };
    let mut votes = budget.served.clone();
    for (v, &t) in graph.term_ids.iter().enumerate() {
        let t = t as usize;
        match votes[t].first() {
            Some(&(home, _)) if home == part[v] => {}
            Some(&(_, weight)) => votes[t] = vec![(part[v], weight)],
            None => votes[t] = vec![(part[v], (trace.term_bytes[t] as f64 * scale) as f32)],
        }
    }
    TermVotes { replicas, votes }
}

/// For each part of `partition`, the served home it shares the most requested bytes with,
/// each home taken once (a maximum-weight perfect matching).
fn match_parts(
    graph: &TermQueryGraph,
    partition: &Partition,
    replicas: u16,
    budget: &Budget,
) -> Vec<u16> {
    let r = usize::from(replicas);
    let mut overlap = vec![0i64; r * r];
    for (v, &t) in graph.term_ids.iter().enumerate() {
        if let Some(home) = budget.homes[t as usize] {
            let (p, h) = (partition.part[v] as usize, usize::from(home));
            if p < r && h < r {
                overlap[p * r + h] += i64::try_from(budget.cost[t as usize]).unwrap_or(i64::MAX);
            }
        }
    }
    let weights = Matrix::from_fn(r, r, |(p, h)| overlap[p * r + h]);
    let (_, assignment) = kuhn_munkres(&weights);
    assignment.into_iter().map(|h| h as u16).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use data::sizes::{SizeTable, Sizes};
    use data::table::TableRow;

    fn sizes() -> Sizes {
        Sizes::Table(SizeTable::from_pairs(
            ["a", "b", "c", "d"].map(|t| (t.to_owned(), 1000)),
        ))
    }

    /// Two topics of two terms each, every query within one topic.
    fn trace() -> Trace {
        let qs = ["a b", "a b", "a", "b", "c d", "c d", "c", "d"];
        Trace::build(qs.iter().copied(), qs.len(), &sizes())
    }

    fn served(rows: &[(&str, u16)]) -> VotingTable {
        let rows = rows
            .iter()
            .map(|&(t, r)| TableRow::new(t, r, 1.0))
            .collect();
        VotingTable::new(2, rows, Default::default()).unwrap()
    }

    #[test]
    fn a_partition_under_swapped_labels_moves_nothing() {
        let trace = trace();
        let agg = crate::aggregate::aggregate(&trace, trace.len(), 1);
        let graph = crate::graph::build_graph(&trace, &agg).unwrap();
        // The served table homes topic {a, b} on 1 and {c, d} on 0; the partition puts them
        // the other way round.
        let table = served(&[("a", 1), ("b", 1), ("c", 0), ("d", 0)]);
        let budget = Budget::new(&trace, &table, 0.0);
        let part: Vec<u16> = (0..graph.vertices())
            .map(|v| {
                let topic_ab = v < graph.term_ids.len()
                    && matches!(trace.dict.term(graph.term_ids[v]), "a" | "b");
                u16::from(!topic_ab)
            })
            .collect();
        let partition = Partition { part, edge_cut: 0 };
        let votes = stable_start(&trace, &graph, &partition, 2, &budget);
        let homes: Vec<Option<u16>> = votes.votes.iter().map(|v| Some(v.first()?.0)).collect();
        let m = cache_sim::sim::movement::movement(&budget.homes, &homes, &budget.cost);
        assert_eq!(m.moved_bytes, 0);
        assert_eq!(votes.votes[trace.dict.get("a").unwrap() as usize][0].0, 1);
        assert_eq!(votes.votes[trace.dict.get("c").unwrap() as usize][0].0, 0);
    }
}
