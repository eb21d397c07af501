//! A trailing window of routing decisions and their costs: how much of the recent load each
//! replica took. It is the load the bounded-load rule compares in the trace simulator, in
//! the queueing simulator and in the HTTP balancer (`load = "window"` counts each query as
//! 1; `load = "work"` counts each query's cost at the replica it went to), so a table is
//! served under the bound it was trained and evaluated with.
//!
//! Why a window and not requests in flight: with a few requests in flight per replica the
//! in-flight cap `ceil((1+eps)·(n+1)/live)` sits about one request above the mean, so
//! ordinary queueing jitter pushes queries off their voted replica, where the window, averaged
//! over thousands of queries, only overflows what is really unbalanced (docs/results.md, "Why
//! a table is bounded by work", has the overflow of each).
//!
//! Why work: balancing query counts leaves the replica that is home to the heaviest lists
//! reading far more than its share of the flash bytes, and with flash the bottleneck
//! throughput follows the busiest replica. Counting each query's flash bytes (plus a fixed
//! CPU part) makes the same rule balance the bottleneck instead; the newest cache-affinity
//! routers made the same move (llm-d's `balanceBy: tokens`, Dynamo's cost in work units).
//!
//! One implementation for every caller: [`Window::record`] is lock-free for concurrent
//! callers (one atomic ticket picks the ring slot; the slot's previous entry is swapped out
//! and its cost subtracted; a reader may see a sum off by the few decisions in progress,
//! which the bound tolerates, but sums never drift), and [`Window::record_mut`] is the same
//! update through `&mut self` with plain loads and stores, for the single-threaded
//! simulators.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{LoadView, MAX_REPLICAS};

/// The most decisions a window may hold.
pub const MAX_WINDOW: usize = 10_000_000;
/// The largest cost one decision may carry (costs are clamped to it): 2^56 − 1.
pub const MAX_COST: u64 = (1 << 56) - 1;

/// A ring entry: `cost << 8 | (replica + 1)`, 0 for an empty slot.
#[inline]
fn pack(replica: usize, cost: u64) -> u64 {
    cost.min(MAX_COST) << 8 | (replica as u64 + 1)
}

/// `(replica, cost)` of a non-empty ring entry.
#[inline]
fn unpack(entry: u64) -> (usize, u64) {
    ((entry & 0xff) as usize - 1, entry >> 8)
}

/// Summed costs of the last `len` routing decisions, per replica.
pub struct Window {
    replicas: usize,
    ring: Box<[AtomicU64]>,
    tickets: AtomicU64,
    sums: [AtomicU64; MAX_REPLICAS],
    total: AtomicU64,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("replicas", &self.replicas)
            .field("len", &self.ring.len())
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

impl Window {
    /// An empty window of `len` decisions (clamped to `1..=MAX_WINDOW`) over `replicas`
    /// replicas (clamped to [`MAX_REPLICAS`]).
    pub fn new(replicas: usize, len: usize) -> Self {
        let len = len.clamp(1, MAX_WINDOW);
        Window {
            replicas: replicas.min(MAX_REPLICAS),
            ring: (0..len).map(|_| AtomicU64::new(0)).collect(),
            tickets: AtomicU64::new(0),
            sums: std::array::from_fn(|_| AtomicU64::new(0)),
            total: AtomicU64::new(0),
        }
    }

    /// Records that a decision of `cost` went to `replica`, evicting the oldest decision.
    /// Safe to call from many threads at once. Replicas at or above [`MAX_REPLICAS`] are
    /// ignored.
    #[inline]
    pub fn record(&self, replica: usize, cost: u64) {
        if replica >= MAX_REPLICAS {
            return;
        }
        let entry = pack(replica, cost);
        let cost = entry >> 8;
        // Add first, then publish in the ring (release): whoever swaps this entry out later
        // acquires it, so its subtraction is ordered after this addition and no sum ever
        // goes below the entries the ring holds for it.
        self.sums[replica].fetch_add(cost, Ordering::Relaxed);
        self.total.fetch_add(cost, Ordering::Relaxed);
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let slot = (ticket % self.ring.len() as u64) as usize;
        let old = self.ring[slot].swap(entry, Ordering::AcqRel);
        if old != 0 {
            let (r, c) = unpack(old);
            self.sums[r].fetch_sub(c, Ordering::Relaxed);
            self.total.fetch_sub(c, Ordering::Relaxed);
        }
    }

    /// [`record`](Window::record) for a single owner: the same update with plain loads and
    /// stores (no atomic read-modify-write), for the simulators' hot loops.
    #[inline]
    pub fn record_mut(&mut self, replica: usize, cost: u64) {
        if replica >= MAX_REPLICAS {
            return;
        }
        let entry = pack(replica, cost);
        let cost = entry >> 8;
        let ticket = self.tickets.get_mut();
        let slot = (*ticket % self.ring.len() as u64) as usize;
        *ticket += 1;
        let old = std::mem::replace(self.ring[slot].get_mut(), entry);
        *self.sums[replica].get_mut() += cost;
        *self.total.get_mut() += cost;
        if old != 0 {
            let (r, c) = unpack(old);
            *self.sums[r].get_mut() -= c;
            *self.total.get_mut() -= c;
        }
    }

    /// Summed cost of the decisions for `replica` in the window.
    #[inline]
    pub fn sum(&self, replica: usize) -> u64 {
        self.sums
            .get(replica)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Summed cost of every decision in the window.
    #[inline]
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Decisions recorded so far (not only those still in the window).
    pub fn decisions(&self) -> u64 {
        self.tickets.load(Ordering::Relaxed)
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

/// Every replica is live; the load of a replica is its summed cost in the window.
impl LoadView for Window {
    fn replicas(&self) -> usize {
        self.replicas
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.sum(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        Window::total(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_follow_the_last_len_decisions() {
        let mut w = Window::new(4, 3);
        for r in [0, 1, 1] {
            w.record_mut(r, 1);
        }
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (1, 2, 0, 3));
        w.record_mut(2, 1); // drops the 0
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (0, 2, 1, 3));
        w.record(2, 1); // drops a 1, through the shared path
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (0, 1, 2, 3));
        assert_eq!((w.sum(99), w.decisions(), w.len()), (0, 5, 3));
        w.record(99, 1); // ignored
        assert_eq!(w.decisions(), 5);
    }

    #[test]
    fn costs_are_summed_and_clamped() {
        let mut w = Window::new(2, 2);
        w.record_mut(0, 100);
        w.record_mut(1, 7);
        assert_eq!((w.load(0), w.load(1), w.total()), (100, 7, 107));
        w.record_mut(1, 5); // drops the 100 on replica 0
        assert_eq!((w.load(0), w.load(1), w.total()), (0, 12, 12));
        w.record(0, u64::MAX);
        assert_eq!(w.load(0), MAX_COST);
        assert_eq!(w.total(), MAX_COST + 5);
    }

    #[test]
    fn concurrent_records_keep_sums_equal_to_the_ring() {
        let w = std::sync::Arc::new(Window::new(8, 1000));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        w.record(((i + t) % 8) as usize, 1 + i % 3);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let ring: u64 = w
            .ring
            .iter()
            .map(|e| unpack(e.load(Ordering::Relaxed)).1)
            .sum();
        let sums: u64 = (0..8).map(|r| w.sum(r)).sum();
        assert_eq!(sums, ring);
        assert_eq!(w.total(), ring);
        assert_eq!(w.decisions(), 80_000);
    }
}
