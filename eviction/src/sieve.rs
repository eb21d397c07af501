//! SIEVE with a byte capacity, after Zhang et al., "SIEVE is simpler than LRU: an efficient
//! turn-key eviction algorithm for web caches", NSDI 2024.
//!
//! One FIFO queue (newest at the head) and a visited bit per object. A hit only sets the bit:
//! nothing moves, so hits are cheaper than LRU's. To evict, a hand walks from where it last
//! stopped (initially the tail) toward the head, wrapping to the tail, clearing visited bits;
//! the first unvisited object is evicted and the hand stays at that object's predecessor (its
//! newer neighbour). New objects enter at the head, unvisited. Evictions repeat until the new
//! object fits. Each pass of the hand clears the bits it crosses, so its moves are amortized
//! O(1) per hit.
//!
//! Because a hit only sets a bit, it can also be recorded through `&self`
//! ([`Cache::get_shared`], a relaxed atomic store), so a concurrent cache serves SIEVE hits
//! under a shared lock.

use std::sync::atomic::Ordering::Relaxed;

use super::{Cache, EvictionKind, Queue, SharedGet, Slab, NIL};

/// Entry state of an object hit since the hand last passed it (0: not hit).
const VISITED: u32 = 1;

/// Byte-capacity SIEVE. See the [module docs](self).
#[derive(Debug)]
pub struct Sieve {
    slab: Slab,
    queue: Queue,
    /// The slot where the next eviction scan starts; `None` means the tail.
    hand: Option<u32>,
    capacity: u64,
}

impl Sieve {
    /// An empty cache holding at most `capacity_bytes` bytes.
    pub fn new(capacity_bytes: u64) -> Self {
        Sieve {
            slab: Slab::new(),
            queue: Queue::new(),
            hand: None,
            capacity: capacity_bytes,
        }
    }

    /// Evicts one object by the SIEVE scan and reports it; false if the cache is empty.
    fn evict_one(&mut self, evicted: &mut impl FnMut(u32)) -> bool {
        let Some(tail) = self.queue.tail() else {
            return false;
        };
        let mut victim = self.hand.unwrap_or(tail);
        while *self.slab.entry_mut(victim).state_mut() == VISITED {
            *self.slab.entry_mut(victim).state_mut() = 0;
            victim = Queue::newer(&self.slab, victim).unwrap_or(tail);
        }
        self.hand = Queue::newer(&self.slab, victim);
        evicted(self.slab.entry(victim).key);
        self.queue.remove(&mut self.slab, victim);
        self.slab.release(victim);
        true
    }

    /// The insertion, generic over the eviction callback (see [`Cache::insert_evicting`]).
    fn insert_with(&mut self, key: u32, size: u64, mut evicted: impl FnMut(u32)) {
        if self.get(key) || size > self.capacity || key == NIL {
            return;
        }
        while self.capacity - self.queue.bytes() < size {
            if !self.evict_one(&mut evicted) {
                break;
            }
        }
        let slot = self.slab.add(key, size, 0);
        self.queue.push_head(&mut self.slab, slot);
    }
}

impl Cache for Sieve {
    #[inline]
    fn get(&mut self, key: u32) -> bool {
        let Some(slot) = self.slab.slot(key) else {
            return false;
        };
        let state = self.slab.entry_mut(slot).state_mut();
        if *state != VISITED {
            *state = VISITED;
        }
        true
    }

    /// Sets the visited bit with a relaxed atomic store (racing hits all store the same
    /// value, so none is lost).
    #[inline]
    fn get_shared(&self, key: u32) -> SharedGet {
        let Some(slot) = self.slab.slot(key) else {
            return SharedGet::Miss;
        };
        let state = &self.slab.entry(slot).state;
        if state.load(Relaxed) != VISITED {
            state.store(VISITED, Relaxed);
        }
        SharedGet::Hit
    }

    fn insert_evicting(&mut self, key: u32, size: u64, evicted: &mut dyn FnMut(u32)) {
        self.insert_with(key, size, evicted);
    }

    fn insert(&mut self, key: u32, size: u64) {
        self.insert_with(key, size, |_| {});
    }

    fn contains(&self, key: u32) -> bool {
        self.slab.slot(key).is_some()
    }

    fn used_bytes(&self) -> u64 {
        self.queue.bytes()
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn kind(&self) -> EvictionKind {
        EvictionKind::Sieve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_stays_at_the_evicted_objects_newer_neighbour() {
        let mut c = Sieve::new(3);
        for key in [1, 2, 3] {
            c.insert(key, 1);
        }
        // queue head..tail: 3 2 1; all unvisited. Evicting takes the tail, 1; hand -> 2.
        c.insert(4, 1);
        assert_eq!(c.hand, c.slab.slot(2));
        assert!(!c.contains(1));
        // 4 3 2, hand at 2; visiting 2 makes the hand skip it and evict 3; hand -> 4.
        assert!(c.get(2));
        c.insert(5, 1);
        assert!(c.contains(2) && !c.contains(3));
        assert_eq!(c.hand, c.slab.slot(4));
        // 5 4 2, hand at 4. A shared hit on 4 protects it like `get`: the scan clears its
        // bit and evicts its newer neighbour 5, which is reported.
        assert_eq!(c.get_shared(4), SharedGet::Hit);
        assert_eq!(c.get_shared(3), SharedGet::Miss);
        let mut victims = Vec::new();
        c.insert_evicting(6, 1, &mut |k| victims.push(k));
        assert_eq!(victims, [5]);
        assert!(c.contains(2) && c.contains(4) && c.contains(6));
    }
}
