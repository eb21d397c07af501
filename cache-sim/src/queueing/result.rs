//! What one phase of a queueing simulation measured, in the units `ballot replay` and
//! `ballot demo` report (queries/s, milliseconds), plus the simulator's own speed.

use serde::Serialize;

/// Latency percentiles (nearest rank), milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyMs {
    /// Answered queries.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl LatencyMs {
    /// The summary of `seconds` (reordered in place).
    pub fn from_seconds(seconds: &mut [f64]) -> Self {
        let n = seconds.len();
        if n == 0 {
            return LatencyMs::default();
        }
        let mean = seconds.iter().sum::<f64>() / n as f64;
        // Ascending ranks: each selection only searches above the previous one.
        let mut from = 0;
        let mut at = |p: f64| {
            let rank = ((p * n as f64).ceil() as usize).clamp(from + 1, n);
            let v = *seconds[from..]
                .select_nth_unstable_by(rank - 1 - from, f64::total_cmp)
                .1;
            from = rank - 1;
            v * 1e3
        };
        LatencyMs {
            count: n as u64,
            mean: mean * 1e3,
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: at(1.0),
        }
    }
}

/// One phase's measurements. Per-query figures count the phase's measured queries
/// ([`Simulator::run_measured`](super::Simulator::run_measured); all of them by default);
/// server figures (flash, tasks, utilisation, queues) cover the whole phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PhaseResult {
    /// The router (`round-robin`, `table`, `pod-d2`, ...).
    pub router: String,
    /// How queries arrived.
    pub arrivals: String,
    /// Queries sent.
    pub sent: u64,
    /// Queries answered.
    pub ok: u64,
    /// Queries refused by a replica at its `max_inflight` (HTTP 503; with shards, any
    /// shard refusing fails the query).
    pub shed: u64,
    /// `shed / sent`.
    pub error_share: f64,
    /// Simulated seconds from the first measured query's send to the last one's answer
    /// (the phase's start to its last answer when every query is measured).
    pub seconds: f64,
    /// Answers per simulated second.
    pub throughput_qps: f64,
    /// Open loop: queries offered per second (sent over the arrival span).
    pub offered_qps: Option<f64>,
    /// Latency of the answers; open loop from the intended send time.
    pub latency_ms: LatencyMs,
    /// Share of routing decisions the policy made by overflow (first choice over its load
    /// bound).
    pub overflow_share: f64,
    /// Share of the measured queries the balancer sent to another replica than the one
    /// routed to, after they waited `steal_after` (late binding; 0 without it).
    pub stolen_share: f64,
    /// Flash bytes / requested bytes (coalesced lookups count as hits, as the replica
    /// counts them).
    pub miss_bytes_ratio: f64,
    /// Flash bytes per query sent.
    pub flash_bytes_per_query: f64,
    /// Each server's share of the flash bytes (servers are shard-major: shard `s`,
    /// replica `r` is `s * replicas + r`).
    pub flash_shares: Vec<f64>,
    /// The busiest server's flash share.
    pub flash_share_max: f64,
    /// Each server's share of the tasks admitted.
    pub task_shares: Vec<f64>,
    /// Each server's share of time with at least one task in flight.
    pub utilisation: Vec<f64>,
    /// Each server's flash bytes / (bandwidth × phase time): the share of time its flash
    /// was busy (empty when bandwidth is unlimited).
    pub flash_utilisation: Vec<f64>,
    /// Each server's time-averaged tasks in flight (admitted: waiting or running).
    pub queue_mean: Vec<f64>,
    /// Each server's most tasks in flight.
    pub queue_max: Vec<u32>,
    /// Mean over servers of `queue_mean`.
    pub queue_mean_all: f64,
    /// Max over servers of `queue_max`.
    pub queue_max_all: u32,
    /// Events processed.
    pub events: u64,
    /// Wall seconds the phase took to simulate (one thread).
    pub wall_seconds: f64,
    /// Queries (measured or not) simulated per wall second.
    pub sim_queries_per_sec: f64,
}

impl PhaseResult {
    /// The servers' mean flash use ([`PhaseResult::flash_utilisation`]; 0 with unlimited
    /// bandwidth).
    pub fn flash_use_mean(&self) -> f64 {
        ratio(
            self.flash_utilisation.iter().sum(),
            self.flash_utilisation.len() as f64,
        )
    }
}

/// `a / b`, 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Each count's share of their sum.
pub(crate) fn shares(counts: &[u64]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts
        .iter()
        .map(|&c| ratio(c as f64, total as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_in_ms() {
        let mut v: Vec<f64> = (1..=1000).rev().map(|i| f64::from(i) / 1e3).collect();
        let l = LatencyMs::from_seconds(&mut v);
        assert_eq!(l.count, 1000);
        assert!((l.mean - 500.5).abs() < 1e-9);
        for (got, want) in [
            (l.p50, 500.0),
            (l.p99, 990.0),
            (l.p999, 999.0),
            (l.max, 1000.0),
        ] {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
        assert_eq!(LatencyMs::from_seconds(&mut []), LatencyMs::default());
    }
}
