//! Requests in flight per replica: HAProxy's and Envoy's load for bounded-load hashing
//! (`hash-balance-factor`: a server takes a request while its in-flight count is below
//! `ceil((1+eps)·(n+1)/live)`), used by the queueing simulator, which has time and so can
//! count requests in flight like the server does, and by the HTTP balancer, whose
//! `in-flight` load and stall guard add the requests queued for each replica to these
//! counts (its `admit::Slots`).
//!
//! Lock-free counters, one per replica slot; [`InFlight::start`] and
//! [`InFlight::finish`] must pair up on the same slot.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{LoadView, MAX_REPLICAS};

/// Requests in flight per replica slot.
pub struct InFlight {
    replicas: usize,
    counts: [AtomicU64; MAX_REPLICAS],
    total: AtomicU64,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("replicas", &self.replicas)
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

impl InFlight {
    /// No requests in flight on `replicas` slots (clamped to [`MAX_REPLICAS`]).
    pub fn new(replicas: usize) -> Self {
        InFlight {
            replicas: replicas.min(MAX_REPLICAS),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            total: AtomicU64::new(0),
        }
    }

    /// A request to `replica` starts (slots at or above [`MAX_REPLICAS`] are ignored).
    #[inline]
    pub fn start(&self, replica: usize) {
        if let Some(c) = self.counts.get(replica) {
            c.fetch_add(1, Ordering::Relaxed);
            self.total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request to `replica` starts if fewer than `cap` are in flight there; `false`
    /// (and nothing counted) otherwise. Pairs with [`InFlight::finish`] like `start`.
    #[inline]
    pub fn try_start(&self, replica: usize, cap: u64) -> bool {
        let Some(c) = self.counts.get(replica) else {
            return false;
        };
        let started = c
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok();
        if started {
            self.total.fetch_add(1, Ordering::Relaxed);
        }
        started
    }

    /// A request to `replica` ended. A `finish` without its `start` saturates at 0.
    #[inline]
    pub fn finish(&self, replica: usize) {
        if let Some(c) = self.counts.get(replica) {
            if c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                self.total.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Requests in flight on `replica`.
    #[inline]
    pub fn count(&self, replica: usize) -> u64 {
        self.counts
            .get(replica)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Requests in flight on every replica.
    #[inline]
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Grows (or shrinks) the number of slots the view reports, up to [`MAX_REPLICAS`].
    pub fn set_replicas(&mut self, replicas: usize) {
        self.replicas = replicas.min(MAX_REPLICAS);
    }
}

/// Every replica is live; the load of a replica is its requests in flight.
impl LoadView for InFlight {
    fn replicas(&self) -> usize {
        self.replicas
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.count(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        InFlight::total(self)
    }

    #[inline]
    fn in_flight(&self, replica: usize) -> Option<u64> {
        Some(self.count(replica))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_finishes_pair_up() {
        let f = InFlight::new(3);
        f.start(0);
        f.start(0);
        f.start(2);
        assert_eq!((f.load(0), f.load(1), f.load(2), f.total()), (2, 0, 1, 3));
        f.finish(0);
        f.finish(1); // no start: ignored
        f.finish(70); // out of range: ignored
        assert_eq!((f.load(0), f.load(1), f.total()), (1, 0, 2));
        assert_eq!(f.live_bits(), 0b111);
        // As a view it reports its counts as requests in flight too.
        assert_eq!((f.in_flight(0), f.in_flight(1)), (Some(1), Some(0)));
    }

    #[test]
    fn try_start_holds_the_cap_under_contention() {
        let f = std::sync::Arc::new(InFlight::new(2));
        let started: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..100).filter(|_| f.try_start(1, 50)).count() as u64))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!((started, f.load(1), f.total()), (50, 50, 50));
        assert!(!f.try_start(70, 1), "out of range: refused");
        f.finish(1);
        assert!(f.try_start(1, 50), "a freed place is taken again");
        assert_eq!(f.total(), 50);
    }
}
