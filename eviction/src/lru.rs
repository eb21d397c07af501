//! Least recently used with a byte capacity: the classic policy (analysed as far back as
//! Mattson et al., "Evaluation techniques for storage hierarchies", IBM Systems Journal 1970)
//! and the baseline of the standard evaluation.
//!
//! One recency queue, most recent at the head. A hit moves the key to the head; an insert
//! evicts from the tail until the new object fits, then adds it at the head. O(1) per
//! operation. Because a hit reorders the queue, hits need `&mut self`: LRU has no
//! [`Cache::get_shared`] path.

use super::{Cache, EvictionKind, Queue, Slab, NIL};

/// Byte-capacity LRU. See the [module docs](self).
#[derive(Debug)]
pub struct Lru {
    slab: Slab,
    queue: Queue,
    capacity: u64,
}

impl Lru {
    /// An empty cache holding at most `capacity_bytes` bytes.
    pub fn new(capacity_bytes: u64) -> Self {
        Lru {
            slab: Slab::new(),
            queue: Queue::new(),
            capacity: capacity_bytes,
        }
    }

    /// Evicts the least recently used object and reports it; false if the cache is empty.
    fn evict_one(&mut self, evicted: &mut impl FnMut(u32)) -> bool {
        let Some(victim) = self.queue.tail() else {
            return false;
        };
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

impl Cache for Lru {
    #[inline]
    fn get(&mut self, key: u32) -> bool {
        let Some(slot) = self.slab.slot(key) else {
            return false;
        };
        self.queue.move_to_head(&mut self.slab, slot);
        true
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
        EvictionKind::Lru
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recent_until_the_new_object_fits() {
        let mut c = Lru::new(10);
        c.insert(1, 4);
        c.insert(2, 4);
        assert!(c.get(1)); // order: 1 2
        c.insert(3, 5); // needs 5, has 2: evicts 2 (LRU), then fits
        assert!(c.contains(1) && !c.contains(2) && c.contains(3));
        assert_eq!((c.used_bytes(), c.len()), (9, 2));
        // Reports: 3 then 1 go, in LRU order, to fit 9 bytes.
        let mut victims = Vec::new();
        c.insert_evicting(4, 9, &mut |k| victims.push(k));
        assert_eq!(victims, [1, 3]);
        assert_eq!(c.get_shared(4), crate::SharedGet::Exclusive);
    }

    #[test]
    fn reserved_key_is_never_cached() {
        let mut c = Lru::new(10);
        c.insert(NIL, 1);
        assert!(c.is_empty() && !c.contains(NIL));
    }
}
