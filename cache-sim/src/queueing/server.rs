//! One simulated server (a replica of one shard): the replica binary's flash emulation, its
//! RAM cache with single-flight misses, admission and worker limits, and the time-weighted
//! counters a phase reports.
//!
//! Flash ([`Bucket`]) mirrors `replica/src/store.rs`: a token bucket in bytes shared by
//! every read of the replica, reservation style (a read takes its bytes at once, possibly
//! into debt, and waits until the debt is paid, so reads are served in issue order at the
//! rate), with a burst of 10 ms of bandwidth (at least 4 KiB) and the fixed latency added
//! to the wait. The bucket starts empty, as the replica's does when it opens. Because a
//! read's completion time is fixed when it is issued, a read in flight is just its end time
//! ([`Server::flights`]): a request missing on a term being read waits until then and reads
//! nothing (`replica/src/cache.rs`: coalesced, counted as a hit).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::config::ReplicaModel;

/// Alignment the replica's burst is at least (`ALIGN` in the store).
const MIN_BURST: f64 = 4096.0;

/// The emulated flash device of one replica.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    /// Bytes per second (`INFINITY`: unlimited).
    rate: f64,
    burst: f64,
    tokens: f64,
    last: f64,
    /// Seconds added to every read.
    latency: f64,
}

impl Bucket {
    pub(crate) fn new(m: &ReplicaModel) -> Self {
        let rate = m.flash_read_mbps.map_or(f64::INFINITY, |mbps| mbps * 1e6);
        Bucket {
            rate,
            burst: (rate * 0.01).max(MIN_BURST),
            tokens: 0.0,
            last: 0.0,
            latency: m.flash_latency_us * 1e-6,
        }
    }

    /// Whether bandwidth is limited.
    pub(crate) fn limited(&self) -> bool {
        self.rate.is_finite()
    }

    /// Bytes per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Issues a read of `bytes` at `now`; returns when it completes (the replica's
    /// `FlashStore::emulate`).
    #[inline]
    pub(crate) fn read(&mut self, now: f64, bytes: u64) -> f64 {
        let mut wait = self.latency;
        if self.rate.is_finite() {
            let refill = (now - self.last) * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
            self.last = now;
            self.tokens -= bytes as f64;
            if self.tokens < 0.0 {
                wait += -self.tokens / self.rate;
            }
        }
        now + wait
    }
}

/// What one server counted during the current phase.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerStats {
    /// Tasks admitted.
    pub(crate) tasks: u64,
    /// Tasks shed (admission full).
    pub(crate) shed: u64,
    /// Bytes found in the cache (coalesced lookups included, as the replica counts).
    pub(crate) hit_bytes: u64,
    /// Bytes read from flash.
    pub(crate) miss_bytes: u64,
    /// ∫ tasks in flight dt.
    pub(crate) queue_area: f64,
    /// Time with at least one task in flight.
    pub(crate) busy_time: f64,
    /// Most tasks in flight at once.
    pub(crate) queue_max: u32,
    /// When `in_flight` last changed (or the phase started).
    pub(crate) last: f64,
}

/// One server.
#[derive(Debug)]
pub(crate) struct Server<C> {
    /// The RAM cache.
    pub(crate) cache: C,
    /// The flash device.
    pub(crate) bucket: Bucket,
    /// Reads in flight: term → completion time.
    pub(crate) flights: FxHashMap<u32, f64>,
    /// Admitted tasks (waiting for a worker or running).
    pub(crate) in_flight: u32,
    /// Workers busy.
    pub(crate) busy: u32,
    /// Admitted tasks waiting for a worker, oldest first.
    pub(crate) waiting: VecDeque<u32>,
    /// This phase's counters.
    pub(crate) stats: ServerStats,
}

impl<C> Server<C> {
    pub(crate) fn new(cache: C, m: &ReplicaModel) -> Self {
        Server {
            cache,
            bucket: Bucket::new(m),
            flights: FxHashMap::default(),
            in_flight: 0,
            busy: 0,
            waiting: VecDeque::new(),
            stats: ServerStats::default(),
        }
    }

    /// Accumulates the time-weighted counters up to `now`.
    #[inline]
    fn advance_clock(&mut self, now: f64) {
        let dt = now - self.stats.last;
        if self.in_flight > 0 {
            self.stats.queue_area += f64::from(self.in_flight) * dt;
            self.stats.busy_time += dt;
        }
        self.stats.last = now;
    }

    /// A task is admitted at `now`.
    #[inline]
    pub(crate) fn enter(&mut self, now: f64) {
        self.advance_clock(now);
        self.in_flight += 1;
        self.stats.tasks += 1;
        self.stats.queue_max = self.stats.queue_max.max(self.in_flight);
    }

    /// A task leaves at `now`.
    #[inline]
    pub(crate) fn leave(&mut self, now: f64) {
        self.advance_clock(now);
        self.in_flight -= 1;
    }

    /// Starts a phase's counters at `now`.
    pub(crate) fn reset_stats(&mut self, now: f64) {
        self.stats = ServerStats {
            last: now,
            queue_max: self.in_flight,
            ..ServerStats::default()
        };
    }

    /// Closes the phase's counters at `now`.
    pub(crate) fn close_stats(&mut self, now: f64) {
        self.advance_clock(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_serves_reads_in_order_at_the_rate() {
        let m = ReplicaModel {
            flash_read_mbps: Some(1.0),
            flash_latency_us: 100.0,
            ..ReplicaModel::default()
        };
        let mut b = Bucket::new(&m);
        // Empty at 0: 1000 bytes at 1 MB/s take 1 ms, plus 0.1 ms latency.
        assert!((b.read(0.0, 1000) - 0.0011).abs() < 1e-12);
        // Issued at once after it: queued behind the first (debt 3000 bytes).
        assert!((b.read(0.0, 2000) - 0.0031).abs() < 1e-12);
        // Long after: the bucket refilled to its burst of 10,000 bytes (10 ms at 1 MB/s).
        assert!((b.read(10.0, 4000) - 10.0001).abs() < 1e-12);
        assert!((b.read(10.0, 7000) - 10.0011).abs() < 1e-12);
        let mut unlimited = Bucket::new(&ReplicaModel::default());
        assert!(!unlimited.limited());
        assert_eq!(unlimited.read(5.0, 1 << 30), 5.0);
    }
}
