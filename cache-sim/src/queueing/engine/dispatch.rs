//! Late binding in the balancer, as `balancer-server`'s queues do it: each balancer sends
//! a replica at most `slots` queries at once and holds the rest in that replica's queue,
//! oldest first; an answer frees a slot for the oldest query held for the replica.
//!
//! With `steal_after` (delay scheduling, Zaharia et al., EuroSys 2010: wait a bounded time
//! for a local slot, then run anywhere), a replica with a free slot and nobody held for it
//! takes a query that has waited at least `steal_after` for another replica:
//! - when an answer frees its slot: the oldest such query in another queue;
//! - when a held query's wait reaches `steal_after` (its timer): the replica with a free
//!   slot and an empty queue that has the fewest queries in flight, if any.
//!
//! Either way only to a replica among the query's alternatives: for the voting table the
//! replicas whose real votes reach `steal_share` of its top vote, which hold its lists
//! too, so a move keeps the locality.
//!
//! A moved query's backlog moves with it (the `in-flight` load and the stall guard count
//! it at the replica that serves it), and it is counted as stolen.

use eviction::Cache;

use super::{Engine, STEAL_TIMER};

impl<C: Cache> Engine<'_, C> {
    /// Query slot `qi`, routed by balancer `b` to replica `r`: sent now, or held for `r`.
    pub(super) fn send_or_hold(&mut self, qi: u32, b: usize, r: usize) {
        let slots = self.cfg.balancer.slots;
        if slots == 0 || (self.sent[b][r] < slots && self.held[b][r].is_empty()) {
            self.send(qi, b, r);
            return;
        }
        self.held[b][r].push_back(qi);
        self.queries[qi as usize].held_since = self.now;
        if let Some(after) = self.cfg.balancer.steal_after {
            self.events.push(self.now + after, STEAL_TIMER | qi);
        }
    }

    /// Sends query slot `qi` to replica `r` on behalf of balancer `b`: every shard's task.
    fn send(&mut self, qi: u32, b: usize, r: usize) {
        let query = &mut self.queries[qi as usize];
        query.held_since = -1.0;
        query.index = r as u16;
        let q = query.q as usize;
        if self.cfg.balancer.slots > 0 {
            self.sent[b][r] += 1;
        }
        self.feed_shadow(q, r);
        for s in 0..self.fanout {
            self.dispatch(qi, q, s * self.replicas + r);
        }
    }

    /// Balancer `b`'s query at replica `r` was answered: its slot goes to the oldest query
    /// held for `r`, or else to the oldest one held elsewhere for `steal_after`.
    pub(super) fn release(&mut self, b: usize, r: usize) {
        if self.cfg.balancer.slots == 0 {
            return;
        }
        self.sent[b][r] -= 1;
        if let Some(qi) = self.held[b][r].pop_front() {
            self.send(qi, b, r);
            return;
        }
        let Some(after) = self.cfg.balancer.steal_after else {
            return;
        };
        // Per queue, the oldest query that may move to `r` and has waited long enough.
        let bit = 1u64 << r;
        let oldest = (0..self.replicas)
            .filter_map(|from| {
                let (at, &qi) = self.held[b][from]
                    .iter()
                    .enumerate()
                    .find(|(_, &qi)| self.queries[qi as usize].alternatives & bit != 0)?;
                let since = self.queries[qi as usize].held_since;
                (self.now >= since + after).then_some((since, from, at))
            })
            .min_by(|x, y| x.0.total_cmp(&y.0));
        if let Some((_, from, at)) = oldest {
            let qi = self.held[b][from].remove(at).expect("the entry just read");
            self.move_held(qi, b, from, r);
        }
    }

    /// Held query slot `qi` has waited `steal_after` (if it is still held and this is its
    /// current wait's timer): a replica with a free slot and nobody held for it takes it.
    pub(super) fn steal_timer(&mut self, qi: u32) {
        let (Some(after), Some(query)) =
            (self.cfg.balancer.steal_after, self.queries.get(qi as usize))
        else {
            return;
        };
        if query.held_since < 0.0 || self.now < query.held_since + after {
            return;
        }
        let (b, home) = (usize::from(query.balancer), usize::from(query.index));
        let slots = self.cfg.balancer.slots;
        let free = (0..self.replicas)
            .filter(|&r| query.alternatives & (1 << r) != 0)
            .filter(|&r| self.sent[b][r] < slots && self.held[b][r].is_empty())
            .min_by_key(|&r| self.sent[b][r]);
        let Some(to) = free else {
            return;
        };
        let queue = &mut self.held[b][home];
        let at = queue
            .iter()
            .position(|&x| x == qi)
            .expect("a held query is in its replica's queue");
        queue.remove(at);
        self.move_held(qi, b, home, to);
    }

    /// Sends held query slot `qi` (out of its queue) to replica `to` instead of `from`.
    fn move_held(&mut self, qi: u32, b: usize, from: usize, to: usize) {
        self.in_flights[b].finish(from);
        self.in_flights[b].start(to);
        self.in_flight_all.finish(from);
        self.in_flight_all.start(to);
        if self.queries[qi as usize].counted {
            self.ph.stolen += 1;
        }
        self.send(qi, b, to);
    }
}
