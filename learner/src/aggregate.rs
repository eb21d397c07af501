//! Aggregation of the train part: distinct queries (by their normalized form) with counts,
//! and per-term query frequency. Terms seen in fewer than `min_term_freq` train queries are
//! pruned: a term fetched once is a miss wherever it goes, so its vote would only add noise,
//! and a query with no kept term cannot be placed by the table.

use cache_sim::sim::Trace;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// A distinct train query over kept terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistinctQuery {
    /// Kept term ids (trace dictionary ids), in query order.
    pub terms: Vec<u32>,
    /// How many times the query occurs in the aggregated part.
    pub count: u32,
}

/// What pruning removed, for the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PruneStats {
    /// Distinct terms seen in the aggregated part.
    pub terms_seen: u64,
    /// Terms kept (frequency at least `min_term_freq`).
    pub terms_kept: u64,
    /// Distinct queries seen.
    pub queries_seen: u64,
    /// Distinct queries kept (at least one kept term).
    pub queries_kept: u64,
    /// Share of term occurrences that belong to kept terms.
    pub kept_occurrence_share: f64,
}

/// The aggregated train part.
#[derive(Clone, Debug)]
pub struct Aggregate {
    /// Queries containing each term (by trace term id), over the aggregated part.
    pub term_freq: Vec<u32>,
    /// Whether each term id is kept.
    pub kept: Vec<bool>,
    /// Distinct queries over kept terms, in order of first appearance.
    pub queries: Vec<DistinctQuery>,
    /// Pruning summary.
    pub prune: PruneStats,
}

/// Aggregates queries `0..len` of `trace`, each record counted once.
pub fn aggregate(trace: &Trace, len: usize, min_term_freq: u32) -> Aggregate {
    aggregate_weighted(trace, len, |_| 1, min_term_freq)
}

/// Aggregates queries `0..len` of `trace`, query `q` standing for `weight(q)` records: how
/// a log aggregated elsewhere (distinct texts with their counts, `ballot train --engine`)
/// enters training. With every weight 1 this is [`aggregate`].
pub fn aggregate_weighted(
    trace: &Trace,
    len: usize,
    weight: impl Fn(usize) -> u32,
    min_term_freq: u32,
) -> Aggregate {
    let n_terms = trace.dict.len();
    let mut term_freq = vec![0u32; n_terms];
    let mut by_hash: FxHashMap<u64, (usize, u32)> = FxHashMap::default();
    let mut first: Vec<usize> = Vec::new();
    for q in 0..len {
        let w = weight(q);
        for &t in trace.terms(q) {
            let f = &mut term_freq[t as usize];
            *f = f.saturating_add(w);
        }
        let slot = by_hash.entry(trace.query_hashes[q]).or_insert_with(|| {
            first.push(q);
            (first.len() - 1, 0)
        });
        slot.1 = slot.1.saturating_add(w);
    }
    let kept: Vec<bool> = term_freq
        .iter()
        .map(|&f| f >= min_term_freq.max(1))
        .collect();
    let mut counts = vec![0u32; first.len()];
    for &(i, c) in by_hash.values() {
        counts[i] = c;
    }
    let mut queries = Vec::new();
    for (i, &q) in first.iter().enumerate() {
        let terms: Vec<u32> = trace
            .terms(q)
            .iter()
            .copied()
            .filter(|&t| kept[t as usize])
            .collect();
        if !terms.is_empty() {
            queries.push(DistinctQuery {
                terms,
                count: counts[i],
            });
        }
    }
    let seen = term_freq.iter().filter(|&&f| f > 0).count() as u64;
    let occ_all: u64 = term_freq.iter().map(|&f| u64::from(f)).sum();
    let occ_kept: u64 = term_freq
        .iter()
        .zip(&kept)
        .filter(|(_, &k)| k)
        .map(|(&f, _)| u64::from(f))
        .sum();
    let prune = PruneStats {
        terms_seen: seen,
        terms_kept: kept
            .iter()
            .zip(&term_freq)
            .filter(|(&k, &f)| k && f > 0)
            .count() as u64,
        queries_seen: first.len() as u64,
        queries_kept: queries.len() as u64,
        kept_occurrence_share: if occ_all == 0 {
            0.0
        } else {
            occ_kept as f64 / occ_all as f64
        },
    };
    Aggregate {
        term_freq,
        kept,
        queries,
        prune,
    }
}
