//! The training report: configuration, pruning, graph and partition sizes, per-stage wall
//! times and every refinement iteration, written as JSON by `ballot train --report` and
//! summarized in the table's metadata.

use cache_sim::sim::movement::Movement;
use serde::Serialize;

use crate::aggregate::PruneStats;
use crate::refine::IterationRecord;

/// Wall time of one stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageTime {
    /// Stage name.
    pub stage: String,
    /// Seconds.
    pub seconds: f64,
}

/// Sizes of the graph METIS partitioned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphStats {
    /// Term vertices.
    pub term_vertices: u64,
    /// Query vertices.
    pub query_vertices: u64,
    /// Undirected edges.
    pub edges: u64,
    /// Weighted edge cut METIS reported (scaled units).
    pub edge_cut: i64,
    /// Share of query load (constraint 0) in each part.
    pub part_load_share: Vec<f64>,
}

/// One candidate (a pruning threshold and a METIS imbalance tolerance) and how far
/// refinement took it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateRecord {
    /// Minimum train-query frequency of a voting term.
    pub min_term_freq: u32,
    /// METIS imbalance tolerance in thousandths.
    pub ufactor: i32,
    /// Weighted edge cut of its partition (scaled units).
    pub edge_cut: i64,
    /// Its best refinement iteration.
    pub best_iteration: usize,
    /// Its best validation miss bytes ratio.
    pub validation_miss_bytes_ratio: f64,
}

/// Everything a training run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainReport {
    /// Replica count.
    pub replicas: usize,
    /// Per-replica cache size as a fraction of the log's distinct postings bytes.
    pub cache_frac: f64,
    /// Per-replica cache capacity in bytes.
    pub capacity_bytes: u64,
    /// Eviction policy name.
    pub eviction: String,
    /// Load-bound slack.
    pub eps: f64,
    /// Seed.
    pub seed: u64,
    /// Train queries used for the graph and the fit replay.
    pub fit_queries: u64,
    /// Fit queries each refinement iteration replays (the most recent `replay_fit_max`,
    /// or all of them).
    pub replayed_fit_queries: u64,
    /// Train queries held out for validation.
    pub validation_queries: u64,
    /// Pruning summary (of the chosen candidate).
    pub prune: PruneStats,
    /// Graph and partition sizes (of the chosen candidate's partition).
    pub graph: GraphStats,
    /// Per-stage wall times.
    pub timings: Vec<StageTime>,
    /// Every candidate partition tried.
    pub candidates: Vec<CandidateRecord>,
    /// The pruning threshold of the chosen candidate.
    pub chosen_min_term_freq: u32,
    /// The imbalance tolerance of the chosen candidate.
    pub chosen_ufactor: i32,
    /// Every refinement iteration of the chosen candidate (iteration 0 is its METIS table).
    pub iterations: Vec<IterationRecord>,
    /// The iteration whose table was kept.
    pub best_iteration: usize,
    /// Validation miss bytes ratio of the kept table.
    pub validation_miss_bytes_ratio: f64,
    /// Validation imbalance of the kept table.
    pub validation_imbalance: f64,
    /// Voting terms in the kept table.
    pub voting_terms: u64,
    /// Digest of the train queries (stable hash), to tie a table to its log.
    pub log_digest: String,
    /// Stable retraining: the train queries' requested bytes whose top vote moved from the
    /// served table's (None: trained from scratch).
    pub movement: Option<Movement>,
    /// The virtual homes the replicas were split into (None: a plain table).
    pub virtual_homes: Option<VirtualHomesReport>,
}

/// The virtual homes of a table trained to serve other replica counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtualHomesReport {
    /// Homes per replica.
    pub per_replica: u16,
    /// Homes in all.
    pub homes: usize,
    /// The heaviest home's share of the work: how finely the homes can balance.
    pub heaviest_work_share: f64,
    /// The replica counts the work was measured on, each with the validation objective of
    /// the mapping kept there (the miss bytes ratio, or with a flash price the busiest
    /// replica's flash bytes per query).
    pub measured: Vec<(u16, f64)>,
}
