//! The replica's counters, kept twice on purpose: as plain atomics for `GET /stats` (JSON,
//! read by `ballot replay` to compare with the simulator) and through the `metrics` facade
//! for `GET /metrics` (Prometheus text, rendered by the binary's recorder). Without an
//! installed recorder (library tests) the facade calls are no-ops.
//!
//! Prometheus names: `replica_queries_total`, `replica_term_lookups_total`,
//! `replica_cache_{hits,misses,coalesced}_total`, `replica_cache_{hit,miss}_bytes_total`,
//! `replica_flash_bytes_read_total`, `replica_flash_read_seconds` and
//! `replica_query_seconds` (histograms), `replica_cache_bytes`, `replica_inflight_queries`,
//! `replica_inflight_bytes`, `replica_inflight_bytes_peak` (gauges),
//! `replica_corrupt_lists_total`, `replica_cache_uncached_reads_total` (misses the
//! balancer's hint kept out of the cache), `replica_cache_hints_ignored_total` (searches
//! whose hint this cache is larger than the table's trained size to follow), `replica_errors_total{kind}` (`kind`: `bad_request`,
//! `unavailable`, `shed` for the concurrency limit, `over_budget` for the in-flight byte
//! budget, `internal`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use crate::cache::Outcome;

/// Histogram buckets of flash reads and queries, in seconds.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];

/// Monotonic counters (and two gauges) of one replica.
#[derive(Debug, Default)]
pub struct Stats {
    queries: AtomicU64,
    lookups: AtomicU64,
    unknown_terms: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    coalesced: AtomicU64,
    hit_bytes: AtomicU64,
    miss_bytes: AtomicU64,
    flash_bytes: AtomicU64,
    inflight: AtomicU64,
    errors: AtomicU64,
    shed: AtomicU64,
    shed_over_budget: AtomicU64,
    corrupt: AtomicU64,
    uncached: AtomicU64,
    hints_ignored: AtomicU64,
}

/// A snapshot, as served by `GET /stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    /// Queries answered (200 or not), excluding those shed.
    pub queries: u64,
    /// Term lookups of known terms (hits + misses + coalesced).
    pub lookups: u64,
    /// Query terms the index does not have.
    pub unknown_terms: u64,
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups read from flash.
    pub misses: u64,
    /// Lookups that waited for another request's read.
    pub coalesced: u64,
    /// Stored bytes of the hits (coalesced lookups count here too: no flash read).
    pub hit_bytes: u64,
    /// Stored bytes of the misses.
    pub miss_bytes: u64,
    /// Bytes read from flash (stored bytes of the lists read).
    pub flash_bytes: u64,
    /// Stored bytes in the cache now.
    pub cache_bytes: u64,
    /// Cache capacity.
    pub cache_capacity: u64,
    /// Queries in progress now.
    pub inflight: u64,
    /// Queries answered with an error (4xx or 5xx), excluding those shed.
    pub errors: u64,
    /// Queries refused by the concurrency limit.
    pub shed: u64,
    /// Queries refused by the in-flight byte budget (not counted in `queries`).
    pub shed_over_budget: u64,
    /// Bytes reserved by queries in flight now ([`crate::budget`]).
    pub inflight_bytes: u64,
    /// The most bytes reserved at once since start.
    pub inflight_bytes_peak: u64,
    /// The in-flight byte budget (`--inflight-bytes`).
    pub inflight_bytes_limit: u64,
    /// Lists that failed verification on read.
    pub corrupt_lists: u64,
    /// Misses read without caching, as the balancer's hint asked (`data::query::CacheHint`).
    #[serde(default)]
    pub uncached_reads: u64,
    /// Searches whose cache hint was not followed: this cache is larger than the size the
    /// hint holds for (`data::query::CacheHint::ignored`).
    #[serde(default)]
    pub hints_ignored: u64,
}

/// Makes every counter and gauge appear (at zero) in `/metrics` before its first event.
pub fn register_metrics() {
    for name in [
        "replica_queries_total",
        "replica_term_lookups_total",
        "replica_unknown_terms_total",
        "replica_cache_hits_total",
        "replica_cache_misses_total",
        "replica_cache_coalesced_total",
        "replica_cache_hit_bytes_total",
        "replica_cache_miss_bytes_total",
        "replica_flash_bytes_read_total",
        "replica_corrupt_lists_total",
        "replica_cache_uncached_reads_total",
        "replica_cache_hints_ignored_total",
    ] {
        metrics::counter!(name).increment(0);
    }
    for kind in [
        "bad_request",
        "unavailable",
        "shed",
        "over_budget",
        "internal",
    ] {
        metrics::counter!("replica_errors_total", "kind" => kind).increment(0);
    }
    metrics::gauge!("replica_cache_bytes").set(0.0);
    metrics::gauge!("replica_inflight_queries").set(0.0);
    metrics::gauge!("replica_inflight_bytes").set(0.0);
    metrics::gauge!("replica_inflight_bytes_peak").set(0.0);
}

impl Stats {
    /// Counts a query that got past admission.
    pub fn query(&self) {
        self.queries.fetch_add(1, Relaxed);
        metrics::counter!("replica_queries_total").increment(1);
    }

    /// Counts a lookup of a term missing from the index.
    pub fn unknown_term(&self) {
        self.unknown_terms.fetch_add(1, Relaxed);
        metrics::counter!("replica_unknown_terms_total").increment(1);
    }

    /// Counts a lookup of a known term.
    pub fn lookup(&self, outcome: Outcome, bytes: u64, read_secs: f64) {
        self.lookups.fetch_add(1, Relaxed);
        metrics::counter!("replica_term_lookups_total").increment(1);
        match outcome {
            Outcome::Hit | Outcome::Coalesced => {
                if outcome == Outcome::Hit {
                    self.hits.fetch_add(1, Relaxed);
                    metrics::counter!("replica_cache_hits_total").increment(1);
                } else {
                    self.coalesced.fetch_add(1, Relaxed);
                    metrics::counter!("replica_cache_coalesced_total").increment(1);
                }
                self.hit_bytes.fetch_add(bytes, Relaxed);
                metrics::counter!("replica_cache_hit_bytes_total").increment(bytes);
            }
            Outcome::Miss => {
                self.misses.fetch_add(1, Relaxed);
                self.miss_bytes.fetch_add(bytes, Relaxed);
                self.flash_bytes.fetch_add(bytes, Relaxed);
                metrics::counter!("replica_cache_misses_total").increment(1);
                metrics::counter!("replica_cache_miss_bytes_total").increment(bytes);
                metrics::counter!("replica_flash_bytes_read_total").increment(bytes);
                metrics::histogram!("replica_flash_read_seconds").record(read_secs);
            }
        }
    }

    /// Counts a miss read without caching, as the balancer's hint asked.
    pub fn uncached_read(&self) {
        self.uncached.fetch_add(1, Relaxed);
        metrics::counter!("replica_cache_uncached_reads_total").increment(1);
    }

    /// Counts a search whose cache hint this cache is too large to follow.
    pub fn hint_ignored(&self) {
        self.hints_ignored.fetch_add(1, Relaxed);
        metrics::counter!("replica_cache_hints_ignored_total").increment(1);
    }

    /// Counts a list that failed verification on read.
    pub fn corrupt(&self) {
        self.corrupt.fetch_add(1, Relaxed);
        metrics::counter!("replica_corrupt_lists_total").increment(1);
    }

    /// Counts a query answered with an error of `kind` (`bad_request`, `unavailable`).
    pub fn error(&self, kind: &'static str) {
        self.errors.fetch_add(1, Relaxed);
        metrics::counter!("replica_errors_total", "kind" => kind).increment(1);
    }

    /// Counts a query refused by the concurrency limit.
    pub fn shed(&self) {
        self.shed.fetch_add(1, Relaxed);
        metrics::counter!("replica_errors_total", "kind" => "shed").increment(1);
    }

    /// Counts a query refused by the in-flight byte budget.
    pub fn shed_over_budget(&self) {
        self.shed_over_budget.fetch_add(1, Relaxed);
        metrics::counter!("replica_errors_total", "kind" => "over_budget").increment(1);
    }

    /// Publishes the in-flight byte gauges.
    pub fn inflight_bytes(&self, held: u64, peak: u64) {
        metrics::gauge!("replica_inflight_bytes").set(held as f64);
        metrics::gauge!("replica_inflight_bytes_peak").set(peak as f64);
    }

    /// Records a query's latency.
    pub fn query_latency(&self, secs: f64) {
        metrics::histogram!("replica_query_seconds").record(secs);
    }

    /// Tries to admit a query under `limit` in-flight queries; false means shed.
    pub fn enter(&self, limit: u64) -> bool {
        let now = self.inflight.fetch_add(1, Relaxed) + 1;
        if now > limit {
            self.inflight.fetch_sub(1, Relaxed);
            return false;
        }
        metrics::gauge!("replica_inflight_queries").increment(1.0);
        true
    }

    /// Searches admitted and not finished now (the replica's backlog, reported to the
    /// balancers in every answer's load report).
    pub fn inflight_now(&self) -> u64 {
        self.inflight.load(Relaxed)
    }

    /// Ends an admitted query.
    pub fn leave(&self) {
        self.inflight.fetch_sub(1, Relaxed);
        metrics::gauge!("replica_inflight_queries").decrement(1.0);
    }

    /// Publishes the cache's size gauge.
    pub fn cache_bytes(&self, used: u64) {
        metrics::gauge!("replica_cache_bytes").set(used as f64);
    }

    /// The current values (cache and budget figures supplied by the caller, or left 0).
    pub fn snapshot(&self, cache_bytes: u64, cache_capacity: u64) -> StatsSnapshot {
        StatsSnapshot {
            queries: self.queries.load(Relaxed),
            lookups: self.lookups.load(Relaxed),
            unknown_terms: self.unknown_terms.load(Relaxed),
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            coalesced: self.coalesced.load(Relaxed),
            hit_bytes: self.hit_bytes.load(Relaxed),
            miss_bytes: self.miss_bytes.load(Relaxed),
            flash_bytes: self.flash_bytes.load(Relaxed),
            cache_bytes,
            cache_capacity,
            inflight: self.inflight.load(Relaxed),
            errors: self.errors.load(Relaxed),
            shed: self.shed.load(Relaxed),
            shed_over_budget: self.shed_over_budget.load(Relaxed),
            inflight_bytes: 0,
            inflight_bytes_peak: 0,
            inflight_bytes_limit: 0,
            corrupt_lists: self.corrupt.load(Relaxed),
            uncached_reads: self.uncached.load(Relaxed),
            hints_ignored: self.hints_ignored.load(Relaxed),
        }
    }
}
