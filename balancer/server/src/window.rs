//! A trailing window of routing decisions, shared by every worker: how many of the last
//! `len` queries went to each replica. With `load = "window"` it is the load the bounded-load
//! rule compares, as in the simulator ([`balancer::load`]; `cache_sim`'s `WindowLoad`), so the
//! learned table is served under the bound it was trained and evaluated with.
//!
//! Why it exists: the in-flight bound compares a few requests per replica, so its slack of
//! `eps` rounds to about one request above the mean and ordinary queueing jitter pushes
//! queries off their voted replica (measured with `ballot demo`: the table's miss bytes
//! ratio over HTTP came out 0.17 above the simulator's). Averaged over thousands of queries,
//! the window bound only overflows what is really unbalanced.
//!
//! Lock-free: one atomic ticket per decision picks the ring slot; the slot's previous
//! occupant is swapped out and its count decremented. Concurrent decisions may see a count
//! off by the few decisions in progress, which the bound tolerates; counts never drift.
//!
//! The window counts first attempts only (a retry after a failure is not a new query), and
//! is indexed by replica slot: a replica added into the slot of a removed one inherits its
//! recent count, so it looks busier than it is until the window rolls over.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use balancer::load::MAX_REPLICAS;

/// The most decisions a window may hold.
pub const MAX_WINDOW: usize = 10_000_000;

/// Counts of the last `len` routing decisions per replica.
pub struct RecentRoutes {
    /// Replica index + 1 of each decision in the ring; 0 for an empty slot.
    ring: Box<[AtomicU8]>,
    tickets: AtomicU64,
    counts: [AtomicU64; MAX_REPLICAS],
}

impl std::fmt::Debug for RecentRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentRoutes")
            .field("len", &self.ring.len())
            .finish_non_exhaustive()
    }
}

impl RecentRoutes {
    /// An empty window of `len` decisions (clamped to `1..=MAX_WINDOW`).
    pub fn new(len: usize) -> Self {
        let len = len.clamp(1, MAX_WINDOW);
        RecentRoutes {
            ring: (0..len).map(|_| AtomicU8::new(0)).collect(),
            tickets: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Records that a query went to `replica`, evicting the oldest decision.
    #[inline]
    pub fn record(&self, replica: usize) {
        if replica >= MAX_REPLICAS {
            return;
        }
        // Count first, then publish in the ring (release): whoever swaps this entry out
        // later acquires it, so its decrement is ordered after this increment and a count
        // never goes below the entries the ring holds for it.
        self.counts[replica].fetch_add(1, Ordering::Relaxed);
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let slot = (ticket % self.ring.len() as u64) as usize;
        // `replica < 64`, so `replica + 1` fits in a byte.
        let old = self.ring[slot].swap(replica as u8 + 1, Ordering::AcqRel);
        if old != 0 {
            self.counts[usize::from(old - 1)].fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Decisions for `replica` in the window.
    #[inline]
    pub fn count(&self, replica: usize) -> u64 {
        self.counts
            .get(replica)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Decisions in the window (at most its length).
    #[inline]
    pub fn total(&self) -> u64 {
        self.tickets
            .load(Ordering::Relaxed)
            .min(self.ring.len() as u64)
    }

    /// The window's length in decisions.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Always false: a window holds at least one slot.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_last_len_decisions() {
        let w = RecentRoutes::new(4);
        for r in [0, 1, 1, 2] {
            w.record(r);
        }
        assert_eq!(
            (w.count(0), w.count(1), w.count(2), w.total()),
            (1, 2, 1, 4)
        );
        // Two more evict the oldest two (0 and the first 1).
        w.record(3);
        w.record(3);
        assert_eq!(
            (w.count(0), w.count(1), w.count(2), w.count(3), w.total()),
            (0, 1, 1, 2, 4)
        );
        assert_eq!(w.count(99), 0);
    }

    #[test]
    fn concurrent_records_keep_counts_summing_to_the_window() {
        let w = std::sync::Arc::new(RecentRoutes::new(1000));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        w.record((i + t) % 8);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let sum: u64 = (0..8).map(|r| w.count(r)).sum();
        assert_eq!(sum, 1000);
        assert_eq!(w.total(), 1000);
    }
}
