//! Virtual homes: a trained table's replicas split into K homes each, so the table serves
//! other replica counts (`balancer::virtual_homes` maps the homes onto the replicas).
//!
//! A home's work is what it brings to its replica, in the units of the load bound the table
//! is served with (`SimLoad`: queries, or missed flash bytes plus a per-query cost). The
//! trained table is replayed through the cache simulator as the refinement replays it. A
//! term's missed bytes at a replica it votes for are its own work there; the rest of a
//! query's work (its per-query cost, the misses of its terms without a vote there) belongs
//! to the term that pulled it to the replica it went to: its heaviest vote there. A query
//! none of whose terms votes for that replica (an overflow) is nobody's work. (Crediting a
//! query's work to its first choice instead, before the load bound, served 3–4% more miss
//! bytes on 10 to 16 replicas: docs/learner.md, "Virtual homes".)
//!
//! Each replica's votes are then split with METIS: the terms voting for replica r, joined to
//! the train queries that hold them (the term–query graph of [`crate::graph`] restricted to
//! those terms), partitioned into K parts balanced in query load, cached bytes and work.
//! Terms asked for together land in one home, so a home that moves to another replica takes
//! its queries' lists with it, and the homes weigh about the same, so they can be balanced
//! over any replica count. A vote for r becomes a vote for one of r's homes with the same
//! weight, so mapping every home back to its trained replica gives back the trained table.

use std::sync::Arc;

use balancer::policy::table::TablePolicy;
use balancer::policy::{Decision, PolicyParams, RoutingPolicy};
use balancer::virtual_homes::{compile, rebalance};
use cache_sim::sim::{replay, Observer, SimConfig, SimLoad, SimResult, Trace};
use data::hash::term_hash;
use data::table::VirtualHomes;
use data::table::VotingTable;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::aggregate::{Aggregate, DistinctQuery, PruneStats};
use crate::graph::{build_graph, GraphError, CONSTRAINTS, WEIGHT_BUDGET};
use crate::partition::{partition, PartitionError};
use crate::votes::TermVotes;

/// METIS imbalance tolerance of the split (thousandths), as for the R-way partition.
const SPLIT_UFACTOR: i32 = 30;

/// Why a split failed.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// A replica's graph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// METIS failed.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// The replay that measures the homes' work failed.
    #[error("replaying the trained table: {0}")]
    Replay(String),
    /// Too many homes for the table format.
    #[error("{replicas} replicas of {per_replica} homes each exceed {max} homes")]
    TooMany {
        /// Replicas.
        replicas: u16,
        /// Homes per replica.
        per_replica: u16,
        /// The most homes.
        max: usize,
    },
}

/// The most homes a table may have (its home index is a `u16` replica column).
pub const MAX_HOMES: usize = u16::MAX as usize;

/// How the homes' work is measured: the trained table replayed over `trace` as the
/// refinement replays it.
pub struct WorkReplay<'a> {
    /// The replayed queries (sharing the dictionary of the split's trace).
    pub trace: &'a Trace,
    /// The simulated cluster, its load bound included.
    pub sim: &'a SimConfig,
    /// The table policy's parameters.
    pub params: &'a PolicyParams,
}

/// `votes` (over `votes.replicas` replicas) split into `per_replica` homes per replica:
/// votes over the homes, and the homes' trained replicas and work. `agg` is the aggregate
/// of `trace` the votes were partitioned from.
pub fn split(
    trace: &Trace,
    agg: &Aggregate,
    votes: &TermVotes,
    per_replica: u16,
    seed: u64,
    work_replay: &WorkReplay<'_>,
) -> Result<(TermVotes, VirtualHomes), SplitError> {
    let (replicas, k) = (votes.replicas, per_replica.max(1));
    let homes = usize::from(replicas) * usize::from(k);
    if homes > MAX_HOMES {
        return Err(SplitError::TooMany {
            replicas,
            per_replica: k,
            max: MAX_HOMES,
        });
    }
    let policy = crate::refine::table_policy(work_replay.trace, votes, work_replay.params)
        .map_err(SplitError::Replay)?;
    let (vote_work, _) = vote_work(votes, &policy, work_replay);
    let mut home_of: FxHashMap<(u32, u16), u16> = FxHashMap::default();
    for r in 0..replicas {
        let votes_r = |t: u32| votes.votes[t as usize].iter().any(|&(x, _)| x == r);
        let queries: Vec<DistinctQuery> = agg
            .queries
            .iter()
            .filter_map(|q| {
                let terms: Vec<u32> = q.terms.iter().copied().filter(|&t| votes_r(t)).collect();
                (!terms.is_empty()).then_some(DistinctQuery {
                    terms,
                    count: q.count,
                })
            })
            .collect();
        if queries.is_empty() {
            continue;
        }
        let sub = Aggregate {
            term_freq: Vec::new(),
            kept: vec![true; agg.kept.len()],
            queries,
            prune: PruneStats::default(),
        };
        let mut graph = build_graph(trace, &sub)?;
        // Fewer terms than homes: METIS would leave parts empty anyway; hash them instead.
        if graph.term_ids.len() < usize::from(k) {
            continue;
        }
        // The third constraint becomes the terms' work here, so the homes weigh alike.
        let work_of = |t: u32| vote_work.get(&(t, r)).copied().unwrap_or(0) as f64;
        let total: f64 = graph.term_ids.iter().map(|&t| work_of(t)).sum();
        if total > 0.0 {
            for (v, &t) in graph.term_ids.iter().enumerate() {
                let w = work_of(t);
                graph.vwgt[CONSTRAINTS * v + 2] = if w > 0.0 {
                    ((w / total * WEIGHT_BUDGET).round() as i32).max(1)
                } else {
                    0
                };
            }
        }
        let parts = partition(&graph, usize::from(k), SPLIT_UFACTOR, seed)?;
        for (v, &t) in graph.term_ids.iter().enumerate() {
            home_of.insert((t, r), r * k + parts.part[v]);
        }
    }
    // A vote outside every train query (or of a replica with few terms) goes to a home of
    // its replica by the term's hash.
    let home = |t: u32, r: u16| {
        home_of
            .get(&(t, r))
            .copied()
            .unwrap_or_else(|| r * k + (term_hash(trace.dict.term(t)) % u64::from(k)) as u16)
    };
    let split_votes = TermVotes {
        replicas: homes as u16,
        votes: (0..votes.votes.len())
            .map(|t| {
                votes.votes[t]
                    .iter()
                    .map(|&(r, w)| (home(t as u32, r), w))
                    .collect()
            })
            .collect(),
    };
    let mut work = vec![0u64; homes];
    for (&(t, r), &w) in &vote_work {
        work[usize::from(home(t, r))] += w;
    }
    let trained = (0..homes).map(|h| (h / usize::from(k)) as u16).collect();
    Ok((
        split_votes,
        VirtualHomes {
            replicas,
            trained,
            work,
            work_at: Default::default(),
        },
    ))
}

/// Each vote's `(term, replica)` work in a replay of `policy`, credited by `votes` (module
/// docs), and the replay's result.
fn vote_work(
    votes: &TermVotes,
    policy: &dyn RoutingPolicy,
    run: &WorkReplay<'_>,
) -> (FxHashMap<(u32, u16), u64>, SimResult) {
    let mut watch = WorkWatch {
        votes,
        bytes: &run.trace.term_bytes,
        own_misses: run.sim.load != SimLoad::Queries,
        replica: vec![None; run.trace.len()],
        missed: vec![0; run.trace.len()],
        attributed: vec![0; run.trace.len()],
        work: FxHashMap::default(),
    };
    let result = replay(run.trace, policy, run.sim, &mut watch);
    let WorkWatch {
        replica,
        missed,
        attributed,
        mut work,
        ..
    } = watch;
    for (q, r) in replica.iter().enumerate() {
        let Some(r) = *r else { continue };
        if let Some(t) = puller(votes, run.trace.terms(q), r) {
            let rest = run.sim.load.cost(missed[q]) - attributed[q];
            *work.entry((t, r)).or_insert(0) += rest;
        }
    }
    (work, result)
}

/// How many times [`measure_counts`] maps the homes with the work it measured.
const COUNT_ROUNDS: usize = 3;

/// The homes' work measured on each of `counts` replicas: for each count, the homes of
/// `table` (over homes, with `homes_votes` its votes by trace term id) are mapped with the
/// trained work, replayed as `run` replays, their work measured there and mapped again,
/// three times; the work whose mapping scored lowest by `score` is kept, in
/// `homes.work_at`. Returns each count's best score. The work trained on R0 replicas
/// balances other counts badly: a home's misses depend on what shares its cache.
pub fn measure_counts(
    table: &VotingTable,
    homes_votes: &TermVotes,
    homes: &mut VirtualHomes,
    run: &WorkReplay<'_>,
    counts: &[usize],
    score: &(dyn Fn(&SimResult) -> f64 + Sync),
) -> Result<Vec<(u16, f64)>, SplitError> {
    let trained: &VirtualHomes = homes;
    let measured = counts
        .par_iter()
        .map(|&n| measure_count(n, table, homes_votes, trained, run, score))
        .collect::<Result<Vec<_>, SplitError>>()?;
    let mut scores = Vec::new();
    for (&n, (work, s)) in counts.iter().zip(measured) {
        homes.work_at.insert(n as u16, work);
        scores.push((n as u16, s));
    }
    Ok(scores)
}

/// [`measure_counts`] on `n` replicas: the work kept and its mapping's score.
fn measure_count(
    n: usize,
    table: &VotingTable,
    homes_votes: &TermVotes,
    homes: &VirtualHomes,
    run: &WorkReplay<'_>,
    score: &(dyn Fn(&SimResult) -> f64 + Sync),
) -> Result<(Vec<u64>, f64), SplitError> {
    let slots: Vec<u16> = (0..n as u16).collect();
    let mut work = homes.work.clone();
    let mut best: Option<(f64, Vec<u64>)> = None;
    for _ in 0..COUNT_ROUNDS {
        let mapping = VirtualHomes {
            work: work.clone(),
            work_at: Default::default(),
            ..homes.clone()
        };
        let compiled =
            compile(table, &mapping, &slots).map_err(|e| SplitError::Replay(e.to_string()))?;
        let slot_of = rebalance(&work, &homes.trained, &slots);
        // Each term's vote per replica: its heaviest home there.
        let mut home_at: FxHashMap<(u32, u16), (u16, f32)> = FxHashMap::default();
        for (t, list) in homes_votes.votes.iter().enumerate() {
            for &(h, w) in list {
                let e = home_at
                    .entry((t as u32, slot_of[usize::from(h)]))
                    .or_insert((h, w));
                if w > e.1 {
                    *e = (h, w);
                }
            }
        }
        let mut slot_votes = TermVotes {
            replicas: n as u16,
            votes: vec![Vec::new(); homes_votes.votes.len()],
        };
        for (&(t, s), &(_, w)) in &home_at {
            slot_votes.votes[t as usize].push((s, w));
        }
        let params = PolicyParams {
            table: Some(Arc::new(compiled)),
            replicas: n,
            ..run.params.clone()
        };
        let policy = TablePolicy::new(&params).map_err(|e| SplitError::Replay(e.to_string()))?;
        let sim = SimConfig {
            replicas: n,
            ..run.sim.clone()
        };
        let at_n = WorkReplay { sim: &sim, ..*run };
        let (vote_work, result) = vote_work(&slot_votes, &policy, &at_n);
        let s = score(&result);
        if best.as_ref().is_none_or(|(b, _)| s < *b) {
            best = Some((s, work.clone()));
        }
        let mut next = vec![0u64; work.len()];
        for (&(t, s), &w) in &vote_work {
            if let Some(&(h, _)) = home_at.get(&(t, s)) {
                next[usize::from(h)] += w;
            }
        }
        work = next;
    }
    let (s, work) = best.ok_or_else(|| SplitError::Replay("no mapping was measured".into()))?;
    Ok((work, s))
}

/// The term of `terms` with the heaviest vote for `replica` (ties: the earlier term).
fn puller(votes: &TermVotes, terms: &[u32], replica: u16) -> Option<u32> {
    let mut best: Option<(u32, f32)> = None;
    for &t in terms {
        for &(r, w) in &votes.votes[t as usize] {
            if r == replica && best.is_none_or(|(_, b)| w > b) {
                best = Some((t, w));
            }
        }
    }
    best.map(|(t, _)| t)
}

/// Watches a replay for [`vote_work`]: where each query went, the bytes it missed there,
/// and the misses already credited to the votes of the terms that missed.
struct WorkWatch<'a> {
    votes: &'a TermVotes,
    bytes: &'a [u64],
    /// Whether misses are work (a `Work` load); under a `Queries` load only queries are.
    own_misses: bool,
    replica: Vec<Option<u16>>,
    missed: Vec<u64>,
    attributed: Vec<u64>,
    work: FxHashMap<(u32, u16), u64>,
}

impl Observer for WorkWatch<'_> {
    fn on_route(&mut self, query: usize, _counted: bool, decision: Decision) {
        self.replica[query] = Some(decision.replica);
    }

    fn on_lookup(&mut self, query: usize, _counted: bool, replica: u16, term: u32, hit: bool) {
        if hit {
            return;
        }
        let bytes = self.bytes[term as usize];
        self.missed[query] += bytes;
        let votes_here = self.votes.votes[term as usize]
            .iter()
            .any(|&(r, _)| r == replica);
        if self.own_misses && votes_here {
            self.attributed[query] += bytes;
            *self.work.entry((term, replica)).or_insert(0) += bytes;
        }
    }
}
