//! The HTTP balancer's [`LoadView`]: one of the shared loads of [`balancer::load`]
//! (requests in flight, or the trailing window of queries or work, exactly as the
//! simulators count them) seen through the replica set's liveness, with the two things
//! only a live server has:
//!
//! - **Liveness:** a replica is live when it is a member, healthy (active checks with
//!   fall/rise and passive ejection, as HAProxy), not drained, and not excluded by the
//!   current request's failed attempts.
//! - **Backlog** of every replica ([`LoadView::in_flight`]: requests in flight there plus
//!   requests waiting in its queue, [`Slots::backlog`]), by which the `table` policy
//!   chooses among a query's homes.
//! - **Stall guard** (window and work loads; [`balancer::load::Guarded`], the same code the
//!   queueing simulator routes through): a replica whose backlog reaches
//!   `ceil((1+stall_eps)·(backlog + 1)/live) + stall_slack` (the backlog summed over the
//!   replicas) counts as full whatever its window says: it is falling behind, and its
//!   queries overflow.
//! - **Slow start** (HAProxy's `slowstart`, in routed queries): a replica that became live
//!   `k` queries ago, with `k < slow_start`, has weight `s = max(k / slow_start, 1/64)`.
//!   The view reports its load as `load / s` and the total as `total · live / Σ s`, so the
//!   bounded-load cap `(1+eps)·total/live` becomes `(1+eps)·s·total/Σ s` for it: a
//!   replica coming back takes a share that grows from almost nothing to its full share,
//!   and the others' cap rises while it does, instead of every replica being over a cap
//!   computed as if the newcomer already carried its share (which sent the newcomer all of
//!   the overflow).

use std::sync::Arc;

use balancer::load::{Guarded, LoadView, Stall, MAX_REPLICAS};

use crate::admit::Slots;

use crate::replicas::{Members, Replica};

/// The smallest slow-start weight: a replica coming back takes queries from the start.
const MIN_WEIGHT: f64 = 1.0 / 64.0;

/// One routing decision's view of the replicas.
pub struct View<'a> {
    slots: &'a [Option<Arc<Replica>>],
    /// Liveness, the base load and the stall guard over the backlog.
    guarded: Guarded<'a>,
    /// Slow-start weights of the live replicas (1.0 outside slow start).
    weight: [f64; MAX_REPLICAS],
    /// Replicas in slow start.
    slow: u64,
    /// `live / Σ weight`: scales the total while some replica is in slow start.
    total_scale: f64,
}

/// How a [`View`] is built.
#[derive(Clone, Copy, Debug)]
pub struct ViewConfig {
    /// The stall guard (`None`: no guard, as for the `in-flight` load itself).
    pub stall: Option<Stall>,
    /// Slow-start length in routed queries (0: none).
    pub slow_start: u64,
    /// The query clock now.
    pub now: u64,
}

impl<'a> View<'a> {
    /// A view of `members` over `base` (which may be `backlog` itself), excluding the
    /// replicas in the `exclude` bit mask. With `ignore_health`, ejected replicas count as
    /// live (the last resort when every replica is ejected).
    pub fn new(
        members: &'a Members,
        base: &'a dyn LoadView,
        backlog: &'a Slots,
        exclude: u64,
        ignore_health: bool,
        cfg: ViewConfig,
    ) -> Self {
        let slots = &members.slots[..members.slots.len().min(MAX_REPLICAS)];
        let mut live = 0u64;
        let mut weight = [1.0f64; MAX_REPLICAS];
        let mut slow = 0u64;
        let mut weight_sum = 0.0f64;
        for (i, s) in slots.iter().enumerate() {
            let Some(rep) = s else { continue };
            let is_live = exclude & (1u64 << i) == 0
                && (ignore_health || rep.is_healthy())
                && !rep.is_drained();
            if !is_live {
                continue;
            }
            live |= 1 << i;
            let age = cfg.now.saturating_sub(rep.live_since());
            if age < cfg.slow_start {
                let w = (age as f64 / cfg.slow_start as f64).max(MIN_WEIGHT);
                weight[i] = w;
                slow |= 1 << i;
                weight_sum += w;
            } else {
                weight_sum += 1.0;
            }
        }
        let total_scale = if slow != 0 && weight_sum > 0.0 {
            f64::from(live.count_ones()) / weight_sum
        } else {
            1.0
        };
        View {
            slots,
            guarded: Guarded::new(base, backlog, slots.len(), live, cfg.stall),
            weight,
            slow,
            total_scale,
        }
    }
}

impl LoadView for View<'_> {
    fn replicas(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        if replica >= self.slots.len() || self.slots[replica].is_none() {
            return 0;
        }
        let load = self.guarded.load(replica);
        if self.slow & (1u64 << replica) == 0 {
            load
        } else {
            // `as` saturates (a stalled replica's u64::MAX stays the largest load).
            (load as f64 / self.weight[replica]) as u64
        }
    }

    #[inline]
    fn total(&self) -> u64 {
        let total = self.guarded.total();
        if self.slow == 0 {
            total
        } else {
            (total as f64 * self.total_scale) as u64
        }
    }

    #[inline]
    fn in_flight(&self, replica: usize) -> Option<u64> {
        self.guarded.in_flight(replica)
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        self.guarded.live_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::QueryClock;
    use balancer::load::Window;

    fn members(n: usize, clock: &Arc<QueryClock>) -> Members {
        Members {
            slots: (0..n)
                .map(|i| {
                    Some(Arc::new(
                        Replica::new(&format!("r{i}"), "127.0.0.1:1", Arc::clone(clock)).unwrap(),
                    ))
                })
                .collect(),
        }
    }

    const PLAIN: ViewConfig = ViewConfig {
        stall: None,
        slow_start: 0,
        now: 0,
    };

    #[test]
    fn liveness_follows_health_drain_exclusion_and_removal() {
        let clock = Arc::new(QueryClock::default());
        let mut m = members(4, &clock);
        let f = Slots::new(4, 0);
        f.counts.start(0);
        f.counts.start(0);
        f.counts.start(2);
        m.slots[1].as_ref().unwrap().eject("test");
        m.slots[3].as_ref().unwrap().set_drained(true);
        let v = View::new(&m, &f, &f, 0, false, PLAIN);
        assert_eq!(v.live_bits(), 0b0101);
        assert_eq!((v.load(0), v.load(2), v.total()), (2, 1, 3));
        assert_eq!((v.in_flight(0), v.in_flight(1)), (Some(2), Some(0)));
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b1110);
        let v = View::new(&m, &f, &f, 0b0001, false, PLAIN);
        assert_eq!(v.live_bits(), 0b0100);
        let v = View::new(&m, &f, &f, 0, true, PLAIN);
        assert_eq!(v.live_bits(), 0b0111);
        m.slots[2] = None;
        let v = View::new(&m, &f, &f, 0, false, PLAIN);
        assert_eq!((v.live_bits(), v.load(2), v.replicas()), (0b0001, 0, 4));
    }

    #[test]
    fn requests_waiting_in_a_queue_count_in_the_backlog() {
        let clock = Arc::new(QueryClock::default());
        let m = members(4, &clock);
        let w = Window::new(4, 100);
        // Two places per replica. Replica 3 holds both and has 18 requests queued;
        // replica 0 holds one. Backlog 20 of 21: stall cap ceil(2 * 22 / 4) + 8 = 19.
        let s = Arc::new(Slots::new(4, 2));
        let held: Vec<_> = [3, 3, 0].iter().map(|&r| s.try_start(r).unwrap()).collect();
        let waiting: Vec<_> = (0..18).map(|_| s.enqueue(3, 0).unwrap_err()).collect();
        let cfg = ViewConfig {
            stall: Some(Stall { eps: 1.0, slack: 8 }),
            ..PLAIN
        };
        let v = View::new(&m, &w, &s, 0, false, cfg);
        assert_eq!((v.in_flight(3), v.in_flight(0)), (Some(20), Some(1)));
        assert_eq!(v.load(3), u64::MAX, "full by its queue");
        assert_eq!(v.load(0), 0, "the window load");
        // The in-flight load itself is the backlog.
        let v = View::new(&m, &*s, &s, 0, false, PLAIN);
        assert_eq!((v.load(3), v.total()), (20, 21));
        drop(waiting);
        assert_eq!(
            (s.backlog(3), s.queued_total()),
            (2, 0),
            "leaving empties the queue"
        );
        drop(held);
        assert_eq!(s.backlog_total(), 0);
    }

    #[test]
    fn a_replica_coming_back_ramps_its_share_up() {
        let clock = Arc::new(QueryClock::default());
        let m = members(4, &clock);
        // Three replicas carried the window while replica 3 was out.
        let mut w = Window::new(4, 300);
        for i in 0..300 {
            w.record_mut(i % 3, 1);
        }
        for _ in 0..1000 {
            clock.tick();
        }
        let r3 = m.slots[3].as_ref().unwrap();
        r3.eject("paused");
        r3.record_check(true, 1, 1); // back at clock 1000
        let f = Slots::new(4, 0);
        let cfg = |now| ViewConfig {
            slow_start: 400,
            now,
            ..PLAIN
        };
        let cap = |v: &View<'_>| balancer::load::load_cap(0.05, v.total(), v.live_count());
        // Without slow start the three busy replicas (100 each) are over the cap of
        // ceil(1.05 * 301 / 4) = 80, so every overflow goes to replica 3.
        let v = View::new(&m, &w, &f, 0, false, PLAIN);
        assert_eq!(v.below_cap_bits(0b1111, cap(&v)), 0b1000);
        // Just back: its weight is tiny, the others' cap rises above their load.
        let v = View::new(&m, &w, &f, 0, false, cfg(1000));
        assert_eq!(v.below_cap_bits(0b1111, cap(&v)), 0b1111);
        assert_eq!(v.load(0), 100);
        // Half way: weight 0.5, total 300 * 4 / 3.5.
        let v = View::new(&m, &w, &f, 0, false, cfg(1200));
        assert_eq!(v.total(), 342);
        // Done: plain loads again.
        let v = View::new(&m, &w, &f, 0, false, cfg(1400));
        assert_eq!((v.total(), v.load(3)), (300, 0));
    }
}
