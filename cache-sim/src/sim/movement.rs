//! What a change of voting table moves: the share of a stretch of a trace's requested
//! postings bytes whose term's top vote changes. A term whose top vote moves has its lists
//! cached at the old home and requested at the new one, so this share bounds the cold misses
//! a switch costs before the caches settle (`ballot retrain --max-move` caps it).
//!
//! A term counts as moved when the old table votes for it and the new table's top vote is
//! another replica or none (its queries then go where their other terms send them). A term
//! the old table leaves out moves nothing: its lists were requested wherever its queries
//! went.
//!
//! Queries go where the sum of their terms' votes is highest, so a table that keeps every
//! top vote can still send a query elsewhere by changing weights. [`query_movement`]
//! counts that: the requested bytes of the queries whose first choice (the top-ranked
//! replica before the load bound) changes.

use std::ops::Range;

use balancer::policy::vote::top_ranked;
use balancer::policy::PolicyError;
use balancer::ring::Ring;
use data::table::VotingTable;
use data::tokenizer::MAX_TERMS;
use serde::Serialize;

use super::replay::ratio;
use super::switch::compile_table;
use super::table_terms::TableTerms;
use super::trace::Trace;

/// Requested bytes whose top vote moved, out of all requested bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Movement {
    /// Requested postings bytes of the terms whose top vote moved.
    pub moved_bytes: u64,
    /// Requested postings bytes of every term.
    pub requested_bytes: u64,
}

/// The most of `requested` bytes a budget of `max_move` (a share, clamped to [0, 1]) lets
/// move: what the learner keeps within and the retrain rule checks, in whole bytes.
pub fn allowance(requested: u64, max_move: f64) -> u64 {
    (requested as f64 * max_move.clamp(0.0, 1.0)) as u64
}

impl Movement {
    /// Whether this movement keeps within a budget of `max_move` ([`allowance`]).
    pub fn within(&self, max_move: f64) -> bool {
        self.moved_bytes <= allowance(self.requested_bytes, max_move)
    }

    /// `moved_bytes / requested_bytes` (0 when nothing was requested).
    pub fn share(&self) -> f64 {
        ratio(self.moved_bytes, self.requested_bytes)
    }
}

/// Per term id of `trace`, the postings bytes its queries `queries` request (a term's bytes
/// once per query holding it).
pub fn requested_by_term(trace: &Trace, queries: Range<usize>) -> Vec<u64> {
    let mut requested = vec![0u64; trace.dict.len()];
    for q in queries {
        for &t in trace.terms(q) {
            requested[t as usize] += trace.term_bytes[t as usize];
        }
    }
    requested
}

/// Per term id of `trace`, the replica of `table`'s top vote (of equal weights the lowest
/// replica), `None` where the table has no row for the term.
pub fn top_votes(trace: &Trace, table: &VotingTable) -> Vec<Option<u16>> {
    TableTerms::new(trace, table)
        .top
        .into_iter()
        .map(|top| top.map(|(replica, _)| replica))
        .collect()
}

/// Per term id of `trace`, `table`'s votes for the term, its top vote first (of equal
/// weights the lowest replica), then the others in table order; empty without a row.
pub fn votes_by_term(trace: &Trace, table: &VotingTable) -> Vec<Vec<(u16, f32)>> {
    let terms = TableTerms::new(trace, table);
    let mut votes: Vec<Vec<(u16, f32)>> = vec![Vec::new(); trace.dict.len()];
    for (t, top) in terms.top.iter().enumerate() {
        if let Some(top) = top {
            votes[t].push(*top);
        }
    }
    for &(t, r, w) in &terms.rows {
        if terms.top[t].is_some_and(|(top, _)| top != r) {
            votes[t].push((r, w));
        }
    }
    votes
}

/// The movement from top votes `old` to `new` (both per term id) over `requested` bytes per
/// term id.
pub fn movement(old: &[Option<u16>], new: &[Option<u16>], requested: &[u64]) -> Movement {
    let mut m = Movement::default();
    for (t, &bytes) in requested.iter().enumerate() {
        m.requested_bytes += bytes;
        let from = old.get(t).copied().flatten();
        if from.is_some() && new.get(t).copied().flatten() != from {
            m.moved_bytes += bytes;
        }
    }
    m
}

/// The movement of `queries` of `trace` from `old`'s first choices to `new`'s: a query
/// moves when `old` places it and `new` places it elsewhere or not at all; it weighs the
/// postings bytes it requests. Each table routes over its own replica count, so this also
/// measures a table served on more or fewer replicas (`balancer::virtual_homes`).
pub fn query_movement(
    trace: &Trace,
    queries: Range<usize>,
    old: &VotingTable,
    new: &VotingTable,
) -> Result<Movement, PolicyError> {
    let (r_old, r_new) = (usize::from(old.replicas), usize::from(new.replicas));
    let (old, new) = (
        compile_table(trace, old, r_old)?,
        compile_table(trace, new, r_new)?,
    );
    // The first choice: the top-ranked replica before the load bound, as the balancer ranks.
    let mut hashes = [0u64; MAX_TERMS];
    Ok(moved_queries(trace, queries, |q| {
        let n = trace.fill_term_hashes(q, &mut hashes);
        let from = top_ranked(&old.score(&hashes[..n]), r_old);
        (from, top_ranked(&new.score(&hashes[..n]), r_new))
    }))
}

/// The movement of `queries` of `trace` when consistent hashing's ring `old` becomes `new`
/// (each query placed at the owner of its hash, as `ch-bl` and `query-hash` place it
/// before their load bounds): what a table's movement on a change of replica count
/// compares with.
pub fn ring_movement(trace: &Trace, queries: Range<usize>, old: &Ring, new: &Ring) -> Movement {
    moved_queries(trace, queries, |q| {
        let key = trace.query_hashes[q];
        (Some(old.owner(key)), Some(new.owner(key)))
    })
}

/// Sums the requested bytes of `queries`, and of those whose placement `(before, after)`
/// changed from a placed one.
fn moved_queries(
    trace: &Trace,
    queries: Range<usize>,
    mut place: impl FnMut(usize) -> (Option<usize>, Option<usize>),
) -> Movement {
    let mut m = Movement::default();
    for q in queries {
        let bytes: u64 = trace
            .terms(q)
            .iter()
            .map(|&t| trace.term_bytes[t as usize])
            .sum();
        m.requested_bytes += bytes;
        let (from, to) = place(q);
        if from.is_some() && to != from {
            m.moved_bytes += bytes;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_moves_when_its_old_top_vote_changes_or_disappears_and_new_terms_move_nothing() {
        let old = [Some(0), Some(1), None, Some(2)];
        let new = [Some(0), Some(3), Some(1), None];
        let m = movement(&old, &new, &[10, 20, 40, 30]);
        // term 1 moved (20), term 3 lost its vote (30); term 2 is new, term 0 stayed
        assert_eq!(m.moved_bytes, 50);
        assert_eq!(m.requested_bytes, 100);
        assert!((m.share() - 0.5).abs() < 1e-12);
        assert!(m.within(0.5) && !m.within(0.49));
    }

    #[test]
    fn a_query_moves_when_new_weights_change_its_first_choice_though_no_top_vote_moves() {
        use data::sizes::{SizeTable, Sizes};
        use data::table::TableRow;
        let sizes = Sizes::Table(SizeTable::from_pairs(
            [("a", 100u64), ("b", 300)].map(|(t, b)| (t.to_owned(), b)),
        ));
        let trace = Trace::build(["a b", "a", "b"], 3, &sizes);
        let table = |wa: f32, wb: f32| {
            VotingTable::new(
                2,
                vec![TableRow::new("a", 0, wa), TableRow::new("b", 1, wb)],
                Default::default(),
            )
            .unwrap()
        };
        let (old, new) = (table(2.0, 1.0), table(1.0, 2.0));
        let terms = movement(
            &top_votes(&trace, &old),
            &top_votes(&trace, &new),
            &requested_by_term(&trace, 0..3),
        );
        assert_eq!(terms.moved_bytes, 0);
        // "a b" (400 bytes) goes to 0 under the old weights, to 1 under the new ones.
        let queries = query_movement(&trace, 0..3, &old, &new).unwrap();
        assert_eq!((queries.moved_bytes, queries.requested_bytes), (400, 800));
    }

    #[test]
    fn nothing_requested_moves_nothing() {
        assert_eq!(movement(&[Some(1)], &[Some(2)], &[0]).share(), 0.0);
    }
}
