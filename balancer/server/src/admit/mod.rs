//! Requests in flight. Client admission: at most `max_in_flight` `/search` requests are in
//! flight at once (from arrival until their response body is relayed); past the bound a
//! request is refused at once with 503 and `Retry-After`, the load-shedding answer of
//! Google's SRE book ("Handling overload") and of HAProxy's `maxconn` with no queue, so a
//! burst cannot grow the balancer's memory or its upstream connections without bound.
//!
//! And per replica: [`InFlightGuard`] counts an upstream request in [`InFlight`]
//! counts until its response body is relayed, and [`Slots`] adds each replica's queue
//! (the balancer's `in-flight` load is the backlog, in flight plus queued). A replica
//! holds at most `replica_max_in_flight` requests; a request routed to a full replica
//! waits in **that replica's queue** ([`Slots::enqueue`]), first come first served, and
//! the place a finished request frees is handed to the oldest waiter there (HAProxy's
//! per-server queue, used for hashed and persistent requests: `maxconn` with `timeout
//! queue`). A query waits for the replica its terms voted for and never takes a place
//! because it is free elsewhere. Both alternatives were measured (docs/results.md, "SIEVE
//! in the soak"): one shared queue, where every waiter took whichever place freed first,
//! and overflow to any replica with a free place. With either, the caches lost their
//! partition once the replicas filled up, and a cluster at 70% of its saturation that lost
//! a replica for a few seconds stayed overloaded. Only the load views move queries: the
//! load bound and the stall guard see each replica's backlog (in flight plus queued,
//! [`Slots::backlog`]), so a replica that falls behind is left.
//!
//! With `steal_after_ms` (`admit/steal.rs`) the queues become late binding with locality: a
//! query still waits for its own replica first, but once it has waited `steal_after`, a
//! replica with a free place and nobody waiting for it takes it (delay scheduling).
//!
//! The hand-over keeps the count at the cap, so newcomers cannot overtake the queue; a
//! newcomer that finds a queue joins it. A finished request decrements the count and then
//! looks at the queue length, while a waiter counts itself in the queue and then tries the
//! count once more, both behind a `SeqCst` fence (Dekker's order): one of the two sees
//! the other, so a place is never left free while a request waits for it.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use balancer::load::{members, InFlight, LoadView};
use tokio::sync::oneshot;

mod steal;

/// The slot of a guard whose place was handed back: its drop does nothing.
const DISARMED: usize = usize::MAX;

/// A request waiting in a queue: where to hand it a place (closed once its waiter gave
/// up), and since when it waits.
#[derive(Debug)]
struct Held {
    tx: oneshot::Sender<InFlightGuard>,
    since: Instant,
    /// The slots late binding may move it to (bit mask).
    alternatives: u64,
}

/// One replica's queue of requests waiting for a place, oldest first.
#[derive(Debug, Default)]
struct Queue {
    /// Entries in `waiters`, readable without the lock.
    len: AtomicU64,
    /// The waiting requests.
    waiters: Mutex<VecDeque<Held>>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Held>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Requests in flight per replica slot, bounded by `replica_max_in_flight`, and each
/// slot's queue: one allocation, shared by the state and every [`InFlightGuard`].
#[derive(Debug)]
pub struct Slots {
    /// Requests in flight per slot (the `in-flight` load's counts, and the others'
    /// stall guard).
    pub counts: InFlight,
    /// Places per slot (0: no cap, and no queue).
    cap: u64,
    queues: Box<[Queue]>,
    /// Entries in every queue.
    queued: AtomicU64,
    /// Per slot: requests the other balancers had at the replica when it last reported
    /// its backlog, and until when (milliseconds of `clock`) that counts.
    others: Box<[AtomicU64]>,
    others_until_ms: Box<[AtomicU64]>,
    /// Slots (below 64) that ever reported others' requests: the ones the total sums.
    reported: AtomicU64,
    /// How long a report counts (0: reports are not used).
    report_ms: u64,
    clock: std::time::Instant,
    /// Late binding: how long a request waits for its own replica before another may
    /// take it (`None`: it waits for its own).
    steal_after: Option<Duration>,
    /// The slots that may take another's waiting request: the live ones at the last
    /// routing decision ([`Slots::set_takers`]).
    takers: AtomicU64,
}

impl Slots {
    /// Counts for `replicas` slots of `cap` places each (0: no cap), nobody waiting.
    pub fn new(replicas: usize, cap: u64) -> Self {
        Slots {
            counts: InFlight::new(replicas),
            cap,
            queues: (0..replicas).map(|_| Queue::default()).collect(),
            queued: AtomicU64::new(0),
            others: (0..replicas).map(|_| AtomicU64::new(0)).collect(),
            others_until_ms: (0..replicas).map(|_| AtomicU64::new(0)).collect(),
            reported: AtomicU64::new(0),
            report_ms: 0,
            clock: std::time::Instant::now(),
            steal_after: None,
            takers: AtomicU64::new(0),
        }
    }

    /// The same slots, where a request that waited `steal_after` for its replica may go to
    /// another with a free place and nobody waiting (`None`: never).
    pub fn with_stealing(mut self, steal_after: Option<Duration>) -> Self {
        self.steal_after = steal_after;
        self
    }

    /// The same slots, counting each replica's backlog report for `report_ms` (0: never).
    pub fn with_reports(mut self, report_ms: u64) -> Self {
        self.report_ms = report_ms;
        self
    }

    fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Records a replica's report of its backlog, `reported`, with an answer from slot
    /// `slot` (whose request this balancer still counts): the other balancers' part is what
    /// this balancer does not account for.
    pub fn record_report(&self, slot: usize, reported: u64) {
        if self.report_ms == 0 || slot >= self.others.len() {
            return;
        }
        let own = self.counts.count(slot) + self.queued(slot);
        self.others[slot].store(reported.saturating_sub(own), Ordering::Relaxed);
        if slot < 64 {
            self.reported.fetch_or(1 << slot, Ordering::Relaxed);
        }
        self.others_until_ms[slot].store(self.now_ms() + self.report_ms, Ordering::Relaxed);
    }

    /// The other balancers' requests at `slot`'s replica, by its last report still counting.
    pub fn others(&self, slot: usize) -> u64 {
        if self.report_ms == 0 {
            return 0;
        }
        self.others_at(slot, self.now_ms())
    }

    fn others_at(&self, slot: usize, now_ms: u64) -> u64 {
        match (self.others.get(slot), self.others_until_ms.get(slot)) {
            (Some(n), Some(until)) if until.load(Ordering::Relaxed) > now_ms => {
                n.load(Ordering::Relaxed)
            }
            _ => 0,
        }
    }

    /// Requests waiting in `slot`'s queue.
    pub fn queued(&self, slot: usize) -> u64 {
        self.queues
            .get(slot)
            .map_or(0, |q| q.len.load(Ordering::Relaxed))
    }

    /// Requests waiting in every queue.
    pub fn queued_total(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// A replica's backlog: requests in flight there plus requests waiting for it, and the
    /// other balancers' requests there while a report of them counts.
    pub fn backlog(&self, slot: usize) -> u64 {
        self.counts.count(slot) + self.queued(slot) + self.others(slot)
    }

    /// Every replica's backlog.
    pub fn backlog_total(&self) -> u64 {
        let own = self.counts.total() + self.queued_total();
        if self.report_ms == 0 {
            return own;
        }
        let now = self.now_ms();
        let others: u64 = members(self.reported.load(Ordering::Relaxed))
            .map(|s| self.others_at(s, now))
            .sum();
        own + others
    }

    fn guard(self: &Arc<Self>, slot: usize) -> InFlightGuard {
        InFlightGuard {
            slots: Arc::clone(self),
            slot,
        }
    }

    fn queue(&self, slot: usize) -> Option<&Queue> {
        (self.cap != 0).then(|| self.queues.get(slot)).flatten()
    }

    fn left_queue(&self, q: &Queue, n: u64) {
        q.len.fetch_sub(n, Ordering::SeqCst);
        self.queued.fetch_sub(n, Ordering::Relaxed);
    }

    /// A place on `slot` now, or `None` when the slot is full or requests wait for it
    /// (then [`Slots::enqueue`]).
    pub fn try_start(self: &Arc<Self>, slot: usize) -> Option<InFlightGuard> {
        let Some(q) = self.queue(slot) else {
            self.counts.start(slot);
            return Some(self.guard(slot));
        };
        if q.len.load(Ordering::SeqCst) != 0 {
            return None;
        }
        self.counts
            .try_start(slot, self.cap)
            .then(|| self.guard(slot))
    }

    /// A place on `slot` if one is free, or a place at the back of its queue, from which
    /// late binding may move it to the slots of `alternatives` (a bit mask).
    pub fn enqueue(
        self: &Arc<Self>,
        slot: usize,
        alternatives: u64,
    ) -> Result<InFlightGuard, Waiter> {
        let Some(q) = self.queue(slot) else {
            self.counts.start(slot);
            return Ok(self.guard(slot));
        };
        // Allocated before the lock is taken; dropped unused if a place turns out free.
        let (tx, rx) = oneshot::channel();
        let since = Instant::now();
        let mut waiters = q.lock();
        q.len.fetch_add(1, Ordering::SeqCst);
        self.queued.fetch_add(1, Ordering::Relaxed);
        // Counted in the queue before the last look at the count: a request that ends
        // after this look sees the queue and hands its place over.
        fence(Ordering::SeqCst);
        if self.counts.try_start(slot, self.cap) {
            self.left_queue(q, 1);
            return Ok(self.guard(slot));
        }
        waiters.push_back(Held {
            tx,
            since,
            alternatives,
        });
        Err(Waiter {
            rx: Some(rx),
            slots: Arc::clone(self),
            slot,
            since,
            alternatives,
        })
    }

    /// Hands the place just freed on `slot` to the oldest waiter still waiting, unless a
    /// newcomer took it first (its own end hands it over then).
    fn hand_over(self: &Arc<Self>, slot: usize, q: &Queue) {
        let mut waiters = q.lock();
        while let Some(held) = waiters.pop_front() {
            if held.tx.is_closed() {
                self.left_queue(q, 1);
                continue;
            }
            if !self.counts.try_start(slot, self.cap) {
                waiters.push_front(held);
                return;
            }
            self.left_queue(q, 1);
            if self.give(held, slot) {
                return;
            }
        }
    }

    /// Hands the place just taken on `slot` to `held`, out of its queue: `false` (and the
    /// place taken back) if it gave up meanwhile. The place comes back without the guard's
    /// drop, which would lock the queue the caller holds.
    fn give(self: &Arc<Self>, held: Held, slot: usize) -> bool {
        match held.tx.send(self.guard(slot)) {
            Ok(()) => true,
            Err(mut guard) => {
                guard.slot = DISARMED;
                self.counts.finish(slot);
                false
            }
        }
    }
}

/// Every live slot, loaded by its backlog: the `in-flight` load.
impl LoadView for Slots {
    fn replicas(&self) -> usize {
        self.counts.replicas()
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.backlog(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        self.backlog_total()
    }

    #[inline]
    fn in_flight(&self, replica: usize) -> Option<u64> {
        Some(self.backlog(replica))
    }
}

/// A request in one replica's queue. Dropping it (the wait timed out, or the client went
/// away) takes it out of the queue.
#[derive(Debug)]
pub struct Waiter {
    rx: Option<oneshot::Receiver<InFlightGuard>>,
    slots: Arc<Slots>,
    slot: usize,
    since: Instant,
    alternatives: u64,
}

impl Waiter {
    /// The place handed over to this request, or `None` if none came by `until` (the
    /// request keeps its place in the queue: call again, or drop it to leave).
    pub async fn wait_until(&mut self, until: tokio::time::Instant) -> Option<InFlightGuard> {
        let rx = self.rx.as_mut()?;
        match tokio::time::timeout_at(until, rx).await {
            Ok(Ok(guard)) => {
                self.rx = None;
                Some(guard)
            }
            Ok(Err(_)) => {
                // Closed without a place (the slots are gone): nothing will come.
                self.rx = None;
                None
            }
            Err(_) => None,
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else {
            return;
        };
        // Closed before the lock is taken: a place handed over in between drops with the
        // receiver and is handed on by its guard, which takes this lock itself.
        drop(rx);
        if let Some(q) = self.slots.queue(self.slot) {
            let mut waiters = q.lock();
            let before = waiters.len();
            waiters.retain(|held| !held.tx.is_closed());
            self.slots.left_queue(q, (before - waiters.len()) as u64);
        }
    }
}

/// An upstream request in flight on a replica slot; dropping it ends the request, and its
/// place goes to the oldest request waiting for that replica.
#[derive(Debug)]
pub struct InFlightGuard {
    slots: Arc<Slots>,
    slot: usize,
}

impl InFlightGuard {
    /// The replica slot the request holds a place on (another than the one it waited for
    /// when that place was stolen for it).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.slot == DISARMED {
            return;
        }
        self.slots.counts.finish(self.slot);
        let Some(q) = self.slots.queue(self.slot) else {
            return;
        };
        // Dekker's order with `enqueue`: the place is free before the queue is read.
        fence(Ordering::SeqCst);
        if q.len.load(Ordering::SeqCst) != 0 {
            self.slots.hand_over(self.slot, q);
        } else if self.slots.steal_after.is_some() {
            self.slots.steal_for(self.slot);
        }
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
    fn a_backlog_report_adds_the_other_balancers_requests_while_it_counts() {
        let s = Arc::new(Slots::new(4, 0).with_reports(60_000));
        let held: Vec<_> = (0..2).map(|_| s.try_start(1).unwrap()).collect();
        // The replica reports 7 searches while this balancer has 2 there: 5 are others'.
        s.record_report(1, 7);
        assert_eq!((s.others(1), s.backlog(1), s.backlog_total()), (5, 7, 7));
        // A report below this balancer's own count adds nothing.
        s.record_report(1, 1);
        assert_eq!(s.backlog(1), 2);
        drop(held);
        // Reports off: never counted; expired: no longer counted.
        let off = Slots::new(4, 0);
        off.record_report(0, 9);
        assert_eq!(off.backlog(0), 0);
        let brief = Slots::new(4, 0).with_reports(1);
        brief.record_report(0, 9);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!((brief.backlog(0), brief.backlog_total()), (0, 0));
    }

    fn soon(ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_freed_place_goes_to_the_oldest_waiter_and_newcomers_queue_behind() {
        let s = Arc::new(Slots::new(2, 1));
        let held = s.try_start(0).expect("a free place");
        assert!(s.try_start(0).is_none(), "full");
        let mut first = s.enqueue(0, 0).expect_err("full: queued");
        let mut second = s.enqueue(0, 0).expect_err("queued behind");
        assert!(
            s.try_start(0).is_none(),
            "a newcomer does not overtake the queue"
        );
        assert_eq!((s.queued(0), s.backlog(0), s.backlog(1)), (2, 3, 0));
        assert!(
            first.wait_until(soon(20)).await.is_none(),
            "nothing freed yet"
        );
        let other = s.try_start(1).expect("another replica's place is its own");
        drop(other);
        assert!(
            first.wait_until(soon(20)).await.is_none(),
            "not replica 1's place"
        );
        drop(held);
        let got = first.wait_until(soon(1000)).await.expect("handed over");
        assert!(
            second.wait_until(soon(20)).await.is_none(),
            "one place, one waiter"
        );
        assert_eq!(
            (s.counts.count(0), s.queued(0)),
            (1, 1),
            "the count stays at the cap"
        );
        drop(got);
        let got = second.wait_until(soon(1000)).await.expect("handed over");
        drop((got, first, second));
        assert_eq!((s.backlog_total(), s.counts.total()), (0, 0));
        assert!(s.try_start(0).is_some(), "free again");
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_passes_its_turn_on() {
        let s = Arc::new(Slots::new(1, 1));
        let held = s.try_start(0).unwrap();
        let gone = s.enqueue(0, 0).unwrap_err();
        let mut next = s.enqueue(0, 0).unwrap_err();
        drop(gone);
        assert_eq!(s.queued(0), 1, "leaving takes the request out of the queue");
        drop(held);
        let got = next.wait_until(soon(1000)).await.expect("the next in line");
        drop((got, next));
        assert_eq!(s.backlog(0), 0);
        // A request that finds a free place when it queues takes it at once.
        assert!(s.enqueue(0, 0).is_ok());
        assert_eq!(s.backlog(0), 0);
    }

    #[test]
    fn without_a_cap_there_is_no_queue() {
        let s = Arc::new(Slots::new(1, 0));
        let held: Vec<_> = (0..1000).map(|_| s.enqueue(0, 0).unwrap()).collect();
        assert_eq!((s.counts.count(0), s.queued(0)), (1000, 0));
        drop(held);
        assert_eq!(s.counts.count(0), 0);
    }

    /// Many requests on two threads through 3 places: the cap holds at every moment, every
    /// request that waits long enough gets a place, and none is left behind in a queue
    /// with a place free (a lost hand-over would stall the rest until their timeouts).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cap_holds_and_no_place_is_lost_under_contention() {
        const CAP: u64 = 3;
        let s = Arc::new(Slots::new(1, CAP));
        let busy = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..400)
            .map(|i| {
                let (s, busy, most) = (Arc::clone(&s), Arc::clone(&busy), Arc::clone(&most));
                tokio::spawn(async move {
                    let guard = match s.try_start(0) {
                        Some(g) => g,
                        None => match s.enqueue(0, 0) {
                            Ok(g) => g,
                            Err(mut w) => {
                                // Every fifth request gives up almost at once.
                                let wait = if i % 5 == 0 { 1 } else { 10_000 };
                                match w.wait_until(soon(wait)).await {
                                    Some(g) => g,
                                    None => return i % 5 == 0,
                                }
                            }
                        },
                    };
                    let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                    true
                })
            })
            .collect();
        for t in tasks {
            assert!(
                t.await.unwrap(),
                "a patient request timed out: a place was lost"
            );
        }
        assert!(most.load(Ordering::SeqCst) as u64 <= CAP);
        assert_eq!((s.counts.count(0), s.queued_total()), (0, 0));
    }

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
