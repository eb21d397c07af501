//! The stall guard: a base load seen through each replica's backlog, shared by the HTTP
//! balancer (`balancer-server`'s view) and the queueing simulator.
//!
//! The `window` and `work` loads count what was routed over a trailing window of decisions,
//! so they cannot see a replica that has fallen behind: its window share looks normal while
//! its queue grows. The guard compares each replica's *backlog* (requests in flight there,
//! plus those waiting in its queue where the balancer has one) with the bounded-load cap of
//! the backlogs, `load_cap(stall_eps, backlog total, live) + stall_slack`; a replica at or
//! over it counts as full (load `u64::MAX`) whatever its window says, so its queries
//! overflow. The `in-flight` load is the backlog itself and has no guard.
//!
//! [`Guarded`] is the whole view: liveness as a bit mask, the base load, the backlog (which
//! the `table` policy reads to choose among a query's homes, [`LoadView::in_flight`]) and
//! the guard. The server adds slow start on top of it; the simulator uses it as it is.

use super::{first_n_bits, load_cap, LoadView, MAX_REPLICAS};

/// Default slack of the stall guard on the mean backlog (see [`Stall`]).
pub const DEFAULT_STALL_EPS: f64 = 1.0;
/// Default extra requests of the stall guard (see [`Stall`]). Chosen with the queueing
/// simulator on the demo setup (docs/results.md, "Stall guard").
pub const DEFAULT_STALL_SLACK: u64 = 2;

/// The stall guard's parameters: a replica whose backlog reaches
/// `ceil((1 + eps) · (backlog total + 1) / live) + slack` counts as full.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stall {
    /// Slack on the mean backlog.
    pub eps: f64,
    /// Extra requests on top of the cap.
    pub slack: u64,
}

impl Default for Stall {
    fn default() -> Self {
        Stall {
            eps: DEFAULT_STALL_EPS,
            slack: DEFAULT_STALL_SLACK,
        }
    }
}

/// One routing decision's view: `base` for the loads, `backlog` (its [`LoadView::load`]
/// and [`LoadView::total`] are the backlogs) for the guard and the homes, `live` for
/// liveness.
pub struct Guarded<'a> {
    base: &'a dyn LoadView,
    backlog: &'a dyn LoadView,
    replicas: usize,
    live: u64,
    /// Replicas with at least this backlog count as full.
    stall_cap: u64,
}

impl<'a> Guarded<'a> {
    /// A view of `replicas` replicas (at most [`MAX_REPLICAS`]) of which those in `live`
    /// may take queries, with the guard when `stall` is set (`None` for the `in-flight`
    /// load, whose base is the backlog itself).
    #[inline]
    pub fn new(
        base: &'a dyn LoadView,
        backlog: &'a dyn LoadView,
        replicas: usize,
        live: u64,
        stall: Option<Stall>,
    ) -> Self {
        let replicas = replicas.min(MAX_REPLICAS);
        let live = live & first_n_bits(replicas);
        let stall_cap = match stall {
            Some(s) => {
                load_cap(s.eps, backlog.total(), live.count_ones() as usize).saturating_add(s.slack)
            }
            None => u64::MAX,
        };
        Guarded {
            base,
            backlog,
            replicas,
            live,
            stall_cap,
        }
    }

    /// Whether the guard counts `replica` as full.
    #[inline]
    pub fn is_stalled(&self, replica: usize) -> bool {
        self.backlog.load(replica) >= self.stall_cap
    }
}

impl LoadView for Guarded<'_> {
    fn replicas(&self) -> usize {
        self.replicas
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        if self.is_stalled(replica) {
            return u64::MAX;
        }
        self.base.load(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        self.base.total()
    }

    #[inline]
    fn in_flight(&self, replica: usize) -> Option<u64> {
        Some(self.backlog.load(replica))
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{InFlight, Window};

    #[test]
    fn the_stall_guard_fills_a_replica_that_falls_behind() {
        // 4 replicas, window loads 3, 1, 1, 0; replica 3 holds the backlog.
        let mut w = Window::new(4, 100);
        for r in [0, 0, 0, 1, 2] {
            w.record_mut(r, 1);
        }
        let f = InFlight::new(4);
        let stall = Some(Stall { eps: 1.0, slack: 8 });
        // Backlog 11: cap ceil(2 * 12 / 4) + 8 = 14 > 11, so the window load counts.
        for _ in 0..11 {
            f.start(3);
        }
        let v = Guarded::new(&w, &f, 4, 0b1111, stall);
        assert_eq!((v.load(0), v.load(1), v.load(3), v.total()), (3, 1, 0, 5));
        // Backlog 20: cap ceil(2 * 21 / 4) + 8 = 19 <= 20, so it is full.
        for _ in 0..9 {
            f.start(3);
        }
        let v = Guarded::new(&w, &f, 4, 0b1111, stall);
        assert_eq!(v.load(3), u64::MAX);
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b0110);
        // The in-flight load has no guard; both report the backlog to the homes' choice.
        let v = Guarded::new(&f, &f, 4, 0b1111, None);
        assert_eq!((v.load(3), v.total()), (20, 20));
        assert_eq!((v.in_flight(3), v.in_flight(0)), (Some(20), Some(0)));
    }

    #[test]
    fn the_cap_counts_live_replicas_only() {
        let w = Window::new(4, 100);
        let f = InFlight::new(4);
        for _ in 0..6 {
            f.start(0);
        }
        let stall = Some(Stall { eps: 0.0, slack: 0 });
        // Four live: cap ceil(7 / 4) = 2, replica 0 is full. Two live (0 and 1): cap
        // ceil(7 / 2) = 4, still full. Replica 0 alone: cap 7, not full.
        assert!(Guarded::new(&w, &f, 4, 0b1111, stall).is_stalled(0));
        assert!(Guarded::new(&w, &f, 4, 0b0011, stall).is_stalled(0));
        let alone = Guarded::new(&w, &f, 4, 0b0001, stall);
        assert!(!alone.is_stalled(0));
        assert_eq!((alone.live_count(), alone.is_live(1)), (1, false));
        // Bits beyond the replica count are never live.
        assert_eq!(Guarded::new(&w, &f, 2, u64::MAX, None).live_bits(), 0b11);
    }
}
