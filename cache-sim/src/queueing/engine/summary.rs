//! The engine's phase summary: per-query figures over the measured queries, server
//! figures (flash, tasks, utilisation, queues) over the whole phase.

use std::time::Instant;

use super::Engine;
use crate::queueing::config::Arrivals;
use crate::queueing::result::{ratio, shares, LatencyMs, PhaseResult};
use eviction::Cache;

impl<C: Cache> Engine<'_, C> {
    /// The phase's measurements.
    pub(super) fn result(&mut self, arrivals: &Arrivals, wall: Instant) -> PhaseResult {
        let ph = &mut self.ph;
        let end = ph.end_time.max(ph.start);
        let phase_secs = end - ph.start;
        // Per-query figures span the counted queries: first sent to last answered (the
        // phase's start to its end when every query counts, as `ballot replay` times).
        let secs = (ph.last_done - ph.first_arrival).max(0.0);
        for s in &mut self.servers {
            s.close_stats(end);
        }
        let flash: Vec<u64> = self.servers.iter().map(|s| s.stats.miss_bytes).collect();
        let tasks: Vec<u64> = self.servers.iter().map(|s| s.stats.tasks).collect();
        let miss: u64 = flash.iter().sum();
        let hit: u64 = self.servers.iter().map(|s| s.stats.hit_bytes).sum();
        let flash_shares = shares(&flash);
        let queue_mean: Vec<f64> = self
            .servers
            .iter()
            .map(|s| ratio(s.stats.queue_area, phase_secs))
            .collect();
        let queue_max: Vec<u32> = self.servers.iter().map(|s| s.stats.queue_max).collect();
        let flash_utilisation = if self.servers.first().is_some_and(|s| s.bucket.limited()) {
            self.servers
                .iter()
                .map(|s| ratio(s.stats.miss_bytes as f64, s.bucket.rate() * phase_secs))
                .collect()
        } else {
            Vec::new()
        };
        let open = matches!(
            arrivals,
            Arrivals::Poisson { .. } | Arrivals::Fixed { .. } | Arrivals::Schedule(_)
        );
        let span = ph.last_arrival - ph.first_arrival;
        let wall_seconds = wall.elapsed().as_secs_f64();
        PhaseResult {
            router: self.router.name(),
            arrivals: arrivals.describe(),
            sent: ph.sent,
            ok: ph.ok,
            shed: ph.failed,
            error_share: ratio(ph.failed as f64, ph.sent as f64),
            seconds: secs,
            throughput_qps: ratio(ph.ok as f64, secs),
            offered_qps: (open && ph.sent > 1 && span > 0.0).then(|| (ph.sent - 1) as f64 / span),
            latency_ms: LatencyMs::from_seconds(&mut ph.latencies),
            overflow_share: ratio(ph.overflow as f64, ph.decisions as f64),
            stolen_share: ratio(ph.stolen as f64, ph.sent as f64),
            miss_bytes_ratio: ratio(miss as f64, (miss + hit) as f64),
            flash_bytes_per_query: ratio(miss as f64, ph.all_sent as f64),
            flash_share_max: flash_shares.iter().copied().fold(0.0, f64::max),
            flash_shares,
            task_shares: shares(&tasks),
            utilisation: self
                .servers
                .iter()
                .map(|s| ratio(s.stats.busy_time, phase_secs))
                .collect(),
            flash_utilisation,
            queue_mean_all: ratio(queue_mean.iter().sum(), queue_mean.len() as f64),
            queue_max_all: queue_max.iter().copied().max().unwrap_or(0),
            queue_mean,
            queue_max,
            events: ph.events,
            wall_seconds,
            sim_queries_per_sec: ratio(ph.all_sent as f64, wall_seconds),
        }
    }
}
