//! The simulator's load view: how many of the last `window` queries each replica received.
//!
//! Bounded-load routing (Mirrokni et al., "Consistent hashing with bounded loads", SODA
//! 2018) needs a notion of current load; in a trace replay there is no wall clock, so load is
//! counted over a trailing window of queries (10,000 in the standard evaluation), which is
//! what a server's in-flight count looks like at a steady arrival rate.

use balancer::load::LoadView;

/// Per-replica query counts over a trailing window.
#[derive(Clone, Debug)]
pub struct WindowLoad {
    counts: Vec<u64>,
    ring: Vec<u16>,
    next: usize,
    filled: usize,
}

impl WindowLoad {
    /// An empty window of `window` queries over `replicas` replicas.
    pub fn new(replicas: usize, window: usize) -> Self {
        WindowLoad {
            counts: vec![0; replicas],
            ring: vec![0; window.max(1)],
            next: 0,
            filled: 0,
        }
    }

    /// Records that a query went to `replica`, forgetting the oldest one if the window is
    /// full.
    #[inline]
    pub fn push(&mut self, replica: u16) {
        if self.filled == self.ring.len() {
            self.counts[self.ring[self.next] as usize] -= 1;
        } else {
            self.filled += 1;
        }
        self.ring[self.next] = replica;
        self.counts[replica as usize] += 1;
        self.next += 1;
        if self.next == self.ring.len() {
            self.next = 0;
        }
    }
}

impl LoadView for WindowLoad {
    fn replicas(&self) -> usize {
        self.counts.len()
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.counts[replica]
    }

    #[inline]
    fn total(&self) -> u64 {
        self.filled as u64
    }

    #[inline]
    fn live_count(&self) -> usize {
        self.counts.len()
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        let n = self.counts.len();
        if n >= 64 {
            u64::MAX
        } else {
            (1u64 << n) - 1
        }
    }

    #[inline]
    fn below_cap_bits(&self, mask: u64, cap: u64) -> u64 {
        let mut under = 0u64;
        for (r, &c) in self.counts.iter().enumerate().take(64) {
            under |= u64::from(c < cap) << r;
        }
        under & mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest_query() {
        let mut w = WindowLoad::new(3, 3);
        for r in [0, 1, 1] {
            w.push(r);
        }
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (1, 2, 0, 3));
        w.push(2); // drops the 0
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (0, 2, 1, 3));
        w.push(2); // drops a 1
        assert_eq!((w.load(0), w.load(1), w.load(2), w.total()), (0, 1, 2, 3));
    }
}
