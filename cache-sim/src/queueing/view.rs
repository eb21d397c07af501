//! The simulated balancer's [`LoadView`]: a base load of [`balancer::load`] (the trailing
//! [`Window`](balancer::load::Window) of queries or work, or requests [`InFlight`]) with
//! the stall guard of the window loads.
//!
//! It mirrors `balancer-server`'s `View` (`balancer/server/src/view.rs`) for a cluster in
//! which every replica is live and none is in slow start: with `window` and `work` a
//! replica holding at least `load_cap(stall_eps, in-flight total, R) + stall_slack`
//! requests in flight counts as full (load `u64::MAX`) whatever its window says; with
//! `in-flight` the base is the in-flight count itself and there is no guard. Like the
//! server's, it reports each replica's requests in flight ([`LoadView::in_flight`]), by
//! which the `table` policy chooses among a query's homes. Keep the two in step.

use balancer::load::{first_n_bits, load_cap, InFlight, LoadView};

/// One routing decision's view of the replicas.
pub(crate) struct SimView<'a> {
    base: &'a dyn LoadView,
    in_flight: &'a InFlight,
    replicas: usize,
    stall_cap: u64,
}

impl<'a> SimView<'a> {
    /// A view over `base` for `replicas` live replicas; `stall` is `Some((stall_eps,
    /// stall_slack))` for the window loads, `None` for `in-flight`.
    #[inline]
    pub(crate) fn new(
        base: &'a dyn LoadView,
        in_flight: &'a InFlight,
        replicas: usize,
        stall: Option<(f64, u64)>,
    ) -> Self {
        let stall_cap = match stall {
            Some((eps, slack)) => load_cap(eps, in_flight.total(), replicas).saturating_add(slack),
            None => u64::MAX,
        };
        SimView {
            base,
            in_flight,
            replicas,
            stall_cap,
        }
    }
}

impl LoadView for SimView<'_> {
    fn replicas(&self) -> usize {
        self.replicas
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        if self.in_flight.count(replica) >= self.stall_cap {
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
        Some(self.in_flight.count(replica))
    }

    #[inline]
    fn is_live(&self, replica: usize) -> bool {
        replica < self.replicas
    }

    #[inline]
    fn live_count(&self) -> usize {
        self.replicas
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        first_n_bits(self.replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use balancer::load::Window;

    #[test]
    fn the_stall_guard_matches_the_server() {
        // The server's own test case (balancer/server/src/view.rs): 4 replicas, window
        // loads 3, 1, 1, 0; replica 3 holds the requests in flight.
        let mut w = Window::new(4, 100);
        for r in [0, 0, 0, 1, 2] {
            w.record_mut(r, 1);
        }
        let f = InFlight::new(4);
        for _ in 0..11 {
            f.start(3);
        }
        let v = SimView::new(&w, &f, 4, Some((1.0, 8)));
        assert_eq!((v.load(0), v.load(1), v.load(3), v.total()), (3, 1, 0, 5));
        for _ in 0..9 {
            f.start(3);
        }
        let v = SimView::new(&w, &f, 4, Some((1.0, 8)));
        assert_eq!(v.load(3), u64::MAX);
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b0110);
        // The in-flight load has no guard.
        let v = SimView::new(&f, &f, 4, None);
        assert_eq!((v.load(3), v.total()), (20, 20));
        // Both report the requests in flight, which the table's choice among homes reads.
        assert_eq!((v.in_flight(3), v.in_flight(0)), (Some(20), Some(0)));
    }
}
