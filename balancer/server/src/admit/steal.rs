//! Late binding with locality (`steal_after_ms`): delay scheduling (Zaharia et al.,
//! EuroSys 2010) over the replicas' queues. A request waits for the replica its terms
//! chose, whose cache holds its lists; once it has waited `steal_after`, a replica with a
//! free place and nobody waiting for it may take it, so no replica's flash idles while a
//! query waits elsewhere. Two moments move a request:
//!
//! - a replica's request ends and nobody waits for that replica: the freed place goes to
//!   the oldest request that has waited `steal_after` at the front of another queue
//!   ([`Slots::steal_for`]);
//! - a waiting request's own check, at `steal_after` and every `steal_after` after it
//!   ([`Waiter::take_free`]): the replica with a free place, an empty queue and the fewest
//!   requests in flight takes it. This covers a replica that went idle before anyone had
//!   waited long enough, which no ending request would wake.
//!
//! A request moves only to one of its alternatives, the replicas its policy says keep its
//! placement ([`balancer::RoutingPolicy::alternatives`]: for the voting table those whose
//! votes reach `steal_share` of the top vote), and only to a replica live at the last
//! routing decision ([`Slots::set_takers`]): an ejected, drained or removed one never
//! takes another's request.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use balancer::load::members;

use super::{Held, InFlightGuard, Slots, Waiter};

impl Slots {
    /// Whether waiting requests may move (`steal_after_ms` is set).
    pub fn steals(&self) -> bool {
        self.steal_after.is_some()
    }

    /// The slots that may take another's waiting request from now on: `live`, the live
    /// replicas of a routing decision.
    pub fn set_takers(&self, live: u64) {
        if self.steal_after.is_some() && self.takers.load(Ordering::Relaxed) != live {
            self.takers.store(live, Ordering::Relaxed);
        }
    }

    fn takes(&self, slot: usize) -> bool {
        slot < 64 && self.takers.load(Ordering::Relaxed) & (1 << slot) != 0
    }

    /// `slot` has a free place and nobody waiting for it: the oldest request that has
    /// waited `steal_after` in another queue and may move to `slot` takes the place.
    pub(super) fn steal_for(self: &Arc<Self>, slot: usize) {
        let Some(after) = self.steal_after else {
            return;
        };
        // Most requests end with nobody waiting anywhere: one counter says so.
        if !self.takes(slot) || self.queued_total() == 0 {
            return;
        }
        // Each round hands the place over or finds nothing; a round whose waiter left
        // meanwhile tries the next oldest, at most once per queue.
        for _ in 0..self.queues.len() {
            let Some((from, since)) = self.oldest_waiting(slot, Instant::now(), after) else {
                return;
            };
            let q = &self.queues[from];
            let mut waiters = q.lock();
            let Some(at) = waiters
                .iter()
                .position(|h| h.since == since && movable(h, slot))
            else {
                // Served (or gone) meanwhile: look again.
                continue;
            };
            if !self.counts.try_start(slot, self.cap) {
                // A newcomer took the place first: its end steals again.
                return;
            }
            let held = waiters.remove(at).expect("the entry just found");
            self.left_queue(q, 1);
            if self.give(held, slot) {
                return;
            }
        }
    }

    /// The queue (not `slot`'s) holding the request that has waited longest among those
    /// that may move to `slot`, if at least `after` by `now`, and since when it waits.
    fn oldest_waiting(
        &self,
        slot: usize,
        now: Instant,
        after: Duration,
    ) -> Option<(usize, Instant)> {
        let mut oldest: Option<(usize, Instant)> = None;
        for (i, q) in self.queues.iter().enumerate() {
            if i == slot || q.len.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let waiters = q.lock();
            // Oldest first: the first one that may move is this queue's candidate.
            let Some(h) = waiters.iter().find(|h| movable(h, slot)) else {
                continue;
            };
            let eligible = now.saturating_duration_since(h.since) >= after;
            if eligible && oldest.is_none_or(|(_, s)| h.since < s) {
                oldest = Some((i, h.since));
            }
        }
        oldest
    }
}

/// Whether waiting request `h` may move to `slot`: it still waits, and `slot` is one of its
/// alternatives.
fn movable(h: &Held, slot: usize) -> bool {
    slot < 64 && h.alternatives & (1 << slot) != 0 && !h.tx.is_closed()
}

impl Waiter {
    /// When this request may first move to another replica (`None`: never).
    pub fn steal_at(&self) -> Option<Instant> {
        self.slots.steal_after.map(|after| self.since + after)
    }

    /// The next check after one at `now` (`steal_after` later, at least a millisecond).
    pub fn next_steal_check(&self, now: Instant) -> Option<Instant> {
        self.slots
            .steal_after
            .map(|after| now + after.max(Duration::from_millis(1)))
    }

    /// A place on another live replica among its alternatives with a free place and nobody
    /// waiting, the one with the fewest requests in flight, once this request has waited
    /// `steal_after`; the caller then drops this waiter, which leaves its queue.
    pub fn take_free(&self) -> Option<InFlightGuard> {
        let after = self.slots.steal_after?;
        if self.since.elapsed() < after {
            return None;
        }
        let s = &self.slots;
        let candidates =
            s.takers.load(Ordering::Relaxed) & self.alternatives & !(1u64 << (self.slot % 64));
        let r = members(candidates)
            .filter(|&r| s.counts.count(r) < s.cap && s.queued(r) == 0)
            .min_by_key(|&r| s.counts.count(r))?;
        s.try_start(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon(ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(ms)
    }

    /// Two replicas of one place each, stealing after `after_ms` (`None`: off), live as
    /// `takers` says.
    fn slots(after_ms: Option<u64>, takers: u64) -> Arc<Slots> {
        let s = Slots::new(2, 1).with_stealing(after_ms.map(Duration::from_millis));
        s.set_takers(takers);
        Arc::new(s)
    }

    /// Replica 0 full with a request waiting for it (movable to `alternatives`), replica 1's
    /// place just freed: replica 0's place, and the waiter.
    fn waiting_while_replica_1_frees(s: &Arc<Slots>, alternatives: u64) -> (InFlightGuard, Waiter) {
        let home = s.try_start(0).expect("replica 0's place");
        let other = s.try_start(1).expect("replica 1's place");
        let waiter = s.enqueue(0, alternatives).expect_err("replica 0 is full");
        drop(other);
        (home, waiter)
    }

    #[tokio::test]
    async fn a_freed_replica_with_nobody_waiting_takes_a_request_that_waited_long_enough() {
        let s = slots(Some(0), 0b11);
        let (home, mut waiter) = waiting_while_replica_1_frees(&s, 0b10);
        let got = waiter
            .wait_until(soon(1000))
            .await
            .expect("replica 1's place");
        assert_eq!(got.slot(), 1);
        assert_eq!((s.queued(0), s.counts.count(1)), (0, 1));
        drop((got, home, waiter));
        assert_eq!(s.backlog_total(), 0);
    }

    #[tokio::test]
    async fn a_request_moves_only_to_its_alternatives_only_when_live_and_only_after_the_wait() {
        // Not an alternative: replica 1's freed place is not taken.
        let s = slots(Some(0), 0b11);
        let (_home, mut waiter) = waiting_while_replica_1_frees(&s, 0b01);
        assert!(waiter.wait_until(soon(20)).await.is_none());
        assert!(waiter.take_free().is_none(), "not among its alternatives");
        assert_eq!(s.counts.count(1), 0);

        // Not live at the last routing decision: neither.
        let s = slots(Some(0), 0b01);
        let (_home, mut waiter) = waiting_while_replica_1_frees(&s, 0b11);
        assert!(waiter.wait_until(soon(20)).await.is_none());
        assert!(waiter.take_free().is_none(), "replica 1 is not live");

        // Before `steal_after`: it waits for its own replica, then moves.
        let s = slots(Some(150), 0b11);
        let (_home, mut waiter) = waiting_while_replica_1_frees(&s, 0b11);
        assert!(waiter.wait_until(soon(20)).await.is_none());
        assert!(waiter.take_free().is_none(), "it has not waited 150 ms yet");
        let at = waiter.steal_at().expect("stealing is on");
        tokio::time::sleep_until(at.into()).await;
        let got = waiter
            .take_free()
            .expect("replica 1 is free and nobody waits there");
        assert_eq!(got.slot(), 1);
        drop(waiter);
        assert_eq!(s.queued(0), 0, "the moved request left its queue");
    }

    #[tokio::test]
    async fn without_stealing_a_freed_replica_takes_nobody_elses_request() {
        let s = slots(None, 0b11);
        let (_home, mut waiter) = waiting_while_replica_1_frees(&s, u64::MAX);
        assert!(waiter.wait_until(soon(20)).await.is_none());
        assert!(waiter.take_free().is_none() && waiter.steal_at().is_none());
        assert!(!s.steals());
    }
}
