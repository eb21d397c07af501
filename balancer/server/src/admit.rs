//! Requests in flight. Client admission: at most `max_in_flight` `/search` requests are in
//! flight at once (from arrival until their response body is relayed); past the bound a
//! request is refused at once with 503 and `Retry-After`, the load-shedding answer of
//! Google's SRE book ("Handling overload") and of HAProxy's `maxconn` with no queue, so a
//! burst cannot grow the balancer's memory or its upstream connections without bound. And
//! per replica slot: [`InFlightGuard`] counts an upstream request in the shared
//! [`InFlight`] load (`balancer::load`) until its response body is relayed, and then wakes
//! one request waiting in the queue for a replica slot (`replica_max_in_flight`; see
//! [`crate::proxy`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use balancer::load::InFlight;
use tokio::sync::Notify;

/// An upstream request in flight on a replica slot; dropping it ends the request.
#[derive(Debug)]
pub struct InFlightGuard {
    loads: Arc<InFlight>,
    slot: usize,
    freed: Arc<Notify>,
}

impl InFlightGuard {
    /// Counts a request on `slot` of `loads` until the guard drops; then `freed` wakes one
    /// waiter.
    pub fn start(loads: &Arc<InFlight>, slot: usize, freed: &Arc<Notify>) -> Self {
        loads.start(slot);
        InFlightGuard {
            loads: Arc::clone(loads),
            slot,
            freed: Arc::clone(freed),
        }
    }

    /// Like [`InFlightGuard::start`], unless `slot` already holds `cap` requests (`cap`
    /// 0: no cap).
    pub fn try_start(
        loads: &Arc<InFlight>,
        slot: usize,
        cap: u64,
        freed: &Arc<Notify>,
    ) -> Option<Self> {
        if cap == 0 {
            return Some(Self::start(loads, slot, freed));
        }
        loads.try_start(slot, cap).then(|| InFlightGuard {
            loads: Arc::clone(loads),
            slot,
            freed: Arc::clone(freed),
        })
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.loads.finish(self.slot);
        self.freed.notify_one();
    }
}

/// The shared count of client requests in flight.
#[derive(Debug)]
pub struct Admission {
    in_flight: Arc<AtomicUsize>,
    max: usize,
}

/// One admitted request; dropping it frees its place.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    /// At most `max` requests in flight.
    pub fn new(max: usize) -> Self {
        Admission {
            in_flight: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot, or `None` when `max` requests are in flight.
    pub fn try_enter(&self) -> Option<Slot> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(Arc::clone(&self.in_flight));
        (before < self.max).then_some(slot)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_and_slots_free_on_drop() {
        let a = Admission::new(2);
        let s1 = a.try_enter().expect("first");
        let s2 = a.try_enter().expect("second");
        assert!(a.try_enter().is_none(), "third refused");
        assert_eq!(a.in_flight(), 2, "a refusal leaves the count as it was");
        drop(s1);
        let s3 = a.try_enter().expect("a freed place");
        drop((s2, s3));
        assert_eq!(a.in_flight(), 0);
    }
}
