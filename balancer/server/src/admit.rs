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

/// Requests in flight per replica slot, and the wake-up of the queue when one ends: one
/// allocation, shared by the state and every [`InFlightGuard`].
#[derive(Debug)]
pub struct Slots {
    /// Requests in flight per slot (the `in-flight` load, and the others' stall guard).
    pub counts: InFlight,
    /// Wakes one request waiting for a replica slot each time an upstream request ends.
    pub freed: Notify,
}

impl Slots {
    /// Counts for `replicas` slots, nobody waiting.
    pub fn new(replicas: usize) -> Self {
        Slots {
            counts: InFlight::new(replicas),
            freed: Notify::new(),
        }
    }
}

/// An upstream request in flight on a replica slot; dropping it ends the request and wakes
/// one waiter.
#[derive(Debug)]
pub struct InFlightGuard {
    slots: Arc<Slots>,
    slot: usize,
}

impl InFlightGuard {
    /// Counts a request on `slot` until the guard drops, unless the slot already holds
    /// `cap` requests (`cap` 0: no cap).
    pub fn try_start(slots: &Arc<Slots>, slot: usize, cap: u64) -> Option<Self> {
        let started = if cap == 0 {
            slots.counts.start(slot);
            true
        } else {
            slots.counts.try_start(slot, cap)
        };
        started.then(|| InFlightGuard {
            slots: Arc::clone(slots),
            slot,
        })
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.slots.counts.finish(self.slot);
        self.slots.freed.notify_one();
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
