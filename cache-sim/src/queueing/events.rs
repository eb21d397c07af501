//! The event queue: a binary min-heap of 16-byte events (time, then insertion order, then
//! the task the event belongs to). Times are non-negative `f64` seconds compared through
//! their bit patterns (monotone for non-negative floats), so ordering is integer compares;
//! events at the same time come out in insertion order. The heap's buffer grows to the
//! most events ever pending and is reused: no allocation per event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One pending event: task `task` has something to do at `time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    /// `f64::to_bits` of a non-negative time.
    time: u64,
    /// Insertion counter (high 32 bits, wrapping) and task (low 32 bits).
    key: u64,
}

/// A min-heap of events.
#[derive(Debug, Default)]
pub(crate) struct Events {
    heap: BinaryHeap<Reverse<Event>>,
    seq: u32,
}

impl Events {
    /// Schedules `task` at `time` (non-negative and finite).
    #[inline]
    pub(crate) fn push(&mut self, time: f64, task: u32) {
        debug_assert!(time >= 0.0 && time.is_finite(), "event time {time}");
        let key = (u64::from(self.seq) << 32) | u64::from(task);
        self.seq = self.seq.wrapping_add(1);
        // +0.0 for a -0.0 that arithmetic could produce: keeps the bit order monotone.
        let time = (time + 0.0).to_bits();
        self.heap.push(Reverse(Event { time, key }));
    }

    /// The time of the earliest event.
    #[inline]
    pub(crate) fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| f64::from_bits(e.0.time))
    }

    /// Takes the earliest event: `(time, task)`.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(f64, u32)> {
        self.heap
            .pop()
            .map(|Reverse(e)| (f64::from_bits(e.time), e.key as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_insertion_order() {
        let mut e = Events::default();
        e.push(2.0, 7);
        e.push(0.5, 3);
        e.push(2.0, 1);
        e.push(0.0, 9);
        assert_eq!(e.peek_time(), Some(0.0));
        let order: Vec<(f64, u32)> = std::iter::from_fn(|| e.pop()).collect();
        assert_eq!(order, vec![(0.0, 9), (0.5, 3), (2.0, 7), (2.0, 1)]);
        assert_eq!(e.peek_time(), None);
    }
}
