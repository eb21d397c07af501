//! The balancer's typed statistics: each replica's counters that the operator's surfaces
//! read ([`ReplicaStats`]: answers by reason, flash bytes reported and estimated, upstream
//! latency in fixed buckets), kept as atomics the request path adds to, and one snapshot of
//! them with the replica set's state and the table ([`Stats`]), which the status page, the
//! admin API, routing explained and `/metrics` all read. Nothing reads the Prometheus text
//! back.
//!
//! `/metrics` publishes these counters at scrape time and renders the latency buckets in
//! the exposition format itself ([`ReplicaCounters::write_latency`]): the `metrics`
//! exporter takes observations, not buckets counted elsewhere, and recording each
//! observation twice would make two sources of one number.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics::{RequestReason, UPSTREAM_SECONDS};

/// Upper bounds of the upstream latency buckets, seconds: 100 us to 10 s in 1-2.5-5 steps
/// (the status page's p99 is a bucket bound, so no step is wider than 2.5x).
pub const LATENCY_BUCKETS: [f64; 16] = [
    100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,
    2.5, 5.0, 10.0,
];

/// One replica's counters, added to on the request path (relaxed atomics, no lock).
#[derive(Debug, Default)]
pub struct ReplicaStats {
    requests: [AtomicU64; RequestReason::ALL.len()],
    reported_miss: AtomicU64,
    shadow_miss: AtomicU64,
    /// Answers per latency bucket (not cumulative), the last past every bound.
    latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_sum_ns: AtomicU64,
}

impl ReplicaStats {
    /// An answer that came back for a request routed for `why`, `seconds` after it was sent.
    pub fn answered(&self, why: RequestReason, seconds: f64) {
        self.requests[why.index()].fetch_add(1, Ordering::Relaxed);
        let bucket = LATENCY_BUCKETS.partition_point(|&b| b < seconds);
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_ns
            .fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }

    /// Flash bytes the replica reported for an answer.
    pub fn add_reported_miss(&self, bytes: u64) {
        self.reported_miss.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Flash bytes its shadow cache estimated for a query sent to it.
    pub fn add_shadow_miss(&self, bytes: u64) {
        self.shadow_miss.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The counters now, under the replica's `name`.
    pub fn read(&self, name: &str) -> ReplicaCounters {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut cumulative = 0;
        let buckets = LATENCY_BUCKETS
            .iter()
            .chain([&f64::INFINITY])
            .zip(&self.latency)
            .map(|(&le, n)| {
                cumulative += load(n);
                (le, cumulative)
            })
            .collect();
        ReplicaCounters {
            name: name.to_owned(),
            by_reason: self.requests.each_ref().map(load),
            reported_miss: load(&self.reported_miss),
            shadow_miss: load(&self.shadow_miss),
            buckets,
            latency_sum: load(&self.latency_sum_ns) as f64 / 1e9,
        }
    }
}

/// One replica's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplicaCounters {
    /// The replica's name.
    pub name: String,
    /// Answers by [`RequestReason`], in [`RequestReason::ALL`] order.
    pub by_reason: [u64; RequestReason::ALL.len()],
    /// Flash bytes it reported (header or ORCA report).
    pub reported_miss: u64,
    /// Flash bytes its shadow cache estimated.
    pub shadow_miss: u64,
    /// Upstream latency: `(upper bound in seconds, cumulative count)`, the last `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    /// Upstream latency summed, seconds.
    pub latency_sum: f64,
}

impl ReplicaCounters {
    /// Answers, every reason.
    pub fn requests(&self) -> u64 {
        self.by_reason.iter().sum()
    }

    /// Appends the latency histogram in the Prometheus text format (a replica's name is
    /// `[A-Za-z0-9._-]`: no label escaping).
    pub fn write_latency(&self, out: &mut String) {
        let name = &self.name;
        for &(le, count) in &self.buckets {
            let le = if le.is_infinite() {
                "+Inf".to_owned()
            } else {
                le.to_string()
            };
            let _ = writeln!(
                out,
                "{UPSTREAM_SECONDS}_bucket{{replica=\"{name}\",le=\"{le}\"}} {count}"
            );
        }
        let count = self.buckets.last().map_or(0, |b| b.1);
        let _ = writeln!(
            out,
            "{UPSTREAM_SECONDS}_sum{{replica=\"{name}\"}} {}",
            self.latency_sum
        );
        let _ = writeln!(
            out,
            "{UPSTREAM_SECONDS}_count{{replica=\"{name}\"}} {count}"
        );
    }
}

/// One member replica, as the operator's surfaces show it.
#[derive(Clone, Debug)]
pub struct ReplicaStat {
    /// Its shard (0 without `[shards]`).
    pub shard: usize,
    /// Its slot: the table column.
    pub index: usize,
    /// `host:port`.
    pub address: String,
    /// Passed its health checks (or not ejected).
    pub healthy: bool,
    /// Drained by the admin API.
    pub drained: bool,
    /// Active health checks recorded.
    pub checks: u64,
    /// The check at which health last changed.
    pub health_changed_at_check: u64,
    /// Requests in flight there now.
    pub in_flight: u64,
    /// Requests waiting for a place there now.
    pub queued: u64,
    /// Other balancers' requests there, by its last report still counting.
    pub others_backlog: u64,
    /// Postings bytes its shadow cache holds (`None`: no shadow caches).
    pub shadow_cached_bytes: Option<u64>,
    /// Its counters (its name among them).
    pub counters: ReplicaCounters,
}

/// The voting table, as the operator's surfaces show it.
#[derive(Clone, Debug)]
pub struct TableStat {
    /// 1 at start, +1 per accepted reload.
    pub version: u64,
    /// Its content hash, hex.
    pub content_hash: String,
    /// Its columns: the replica count, or for a table over virtual homes one past the
    /// highest slot it serves.
    pub replicas: usize,
    /// For a table over virtual homes: how many homes it has (it follows the replicas).
    pub virtual_homes: Option<usize>,
    /// Terms in it.
    pub terms: usize,
    /// Positive votes in it.
    pub votes: usize,
    /// The ramp's progress (1 when none runs).
    pub ramp_progress: f64,
    /// Routed queries the ramp lasts (0: none runs).
    pub ramp_queries: u64,
    /// The cache size it was trained for.
    pub trained_cache_bytes: Option<u64>,
    /// Unix time it was loaded.
    pub loaded_at: f64,
}

/// The balancer at one moment.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Unix time of the snapshot.
    pub at: f64,
    /// The routing policy.
    pub policy: &'static str,
    /// The load the bound compares.
    pub load: &'static str,
    /// Where the work load's bytes come from.
    pub work_source: &'static str,
    /// `[policy] cache_admission`'s share.
    pub cache_admission: Option<f32>,
    /// Shards of the backend.
    pub shards: usize,
    /// Replica slots of shard 0 (members and empty ones).
    pub slots: usize,
    /// Every member of every shard, shard by shard, in slot order.
    pub replicas: Vec<ReplicaStat>,
    /// The table, for `table`.
    pub table: Option<TableStat>,
}

impl ReplicaStat {
    /// Whether it takes queries: healthy and not drained.
    pub fn is_up(&self) -> bool {
        self.healthy && !self.drained
    }

    /// `drained`, `up` or `ejected`, as the status page shows it.
    pub fn state(&self) -> &'static str {
        match (self.drained, self.healthy) {
            (true, _) => "drained",
            (false, true) => "up",
            (false, false) => "ejected",
        }
    }
}

impl Stats {
    /// Client requests waiting in the replicas' queues.
    pub fn queued(&self) -> u64 {
        self.replicas.iter().map(|r| r.queued).sum()
    }
}

/// Unix time now, seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use balancer::policy::Reason;

    #[test]
    fn answers_fall_in_their_latency_buckets() {
        let s = ReplicaStats::default();
        s.answered(RequestReason::of(Reason::Vote), 0.0001);
        s.answered(RequestReason::of(Reason::Vote), 0.003);
        s.answered(RequestReason::Failover, 20.0);
        s.add_shadow_miss(7);
        let c = s.read("r0");
        assert_eq!(c.requests(), 3);
        assert_eq!(c.by_reason[RequestReason::Failover.index()], 1);
        assert_eq!(c.buckets[0], (100e-6, 1), "a bound is inclusive");
        assert_eq!(c.buckets[5], (5e-3, 2));
        assert_eq!(c.buckets[15], (10.0, 2));
        assert_eq!(c.buckets[16], (f64::INFINITY, 3));
        assert_eq!((c.shadow_miss, c.reported_miss), (7, 0));
        let mut text = String::new();
        c.write_latency(&mut text);
        assert!(text.contains("ballot_upstream_seconds_bucket{replica=\"r0\",le=\"0.0001\"} 1\n"));
        assert!(text.contains("ballot_upstream_seconds_bucket{replica=\"r0\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("ballot_upstream_seconds_count{replica=\"r0\"} 3\n"));
    }
}
