//! S3-FIFO with a byte capacity, after Yang et al., "FIFO queues are all you need for cache
//! eviction", SOSP 2023 (Algorithm 1).
//!
//! Three FIFO queues (newest at the head): a small queue S holding 10% of the bytes
//! (`capacity / 10`, rounded down), a main queue M holding the rest, and a ghost queue G of
//! keys recently evicted from S (keys only, no data). Each cached object has a 2-bit
//! frequency, 0 on insertion, incremented on every hit and saturating at 3; a hit moves
//! nothing.
//!
//! - Insert: a key found in G leaves G and enters M; any other key enters S. Before that,
//!   objects are evicted until the new one fits.
//! - Evict: from S when S holds at least its share of bytes (the paper's `S.size ≥ 10%`),
//!   otherwise from M; from whichever queue is non-empty if the other is empty.
//! - Evicting from S: the tail is taken out of S. If its frequency is at least 1 it moves to
//!   the head of M with frequency 0, and if M now holds more than its share, one object is
//!   evicted from M (Algorithm 1's `if M is full: evictM()`); then the next tail of S is
//!   examined. Otherwise the key goes to the head of G and the scan stops.
//! - Evicting from M: a tail with frequency > 0 is reinserted at the head with frequency − 1;
//!   the first tail with frequency 0 is evicted.
//!
//! Choices where the paper leaves room, or where this differs from it:
//!
//! - Promotion threshold. Algorithm 1 moves an object from S to M when `t.freq > 1`, and
//!   libCacheSim's S3FIFO defaults to `move-to-main-threshold=2`: two hits while in S. We
//!   promote on `freq ≥ 1`, one hit while in S, as this project's design specifies: S is only
//!   10% of the bytes, so its window is short, and a term queried twice within it already
//!   separates itself from the one-hit wonders S exists to filter.
//! - Frequency on promotion. Algorithm 1 leaves it implicit ("insert t to M"); libCacheSim
//!   creates a fresh object in M, i.e. frequency 0. We reset it to 0 too: the hits that
//!   earned the promotion are not counted again as reinsertion credit in M.
//! - Ghost bound. The paper sizes G to remember as many objects as M holds. With variable
//!   sizes we bound G by bytes instead: the sizes of its keys at eviction time sum to at most
//!   M's share of the capacity (libCacheSim's default ghost size, 90% of the cache). The bound
//!   is static and equals the paper's for unit sizes. Oldest ghosts are forgotten first.
//! - Ghost lookup time. A key is looked up in (and removed from) G before the evictions that
//!   make room for it, as libCacheSim does, so the ghosts those evictions create cannot push
//!   it out of G first.
//! - Objects larger than S's share (but not than the capacity) are admitted to S like any
//!   other; libCacheSim refuses them. Eviction from S then takes them out first unless hit.
//!
//! `used_bytes` counts S and M (never G) and never exceeds the capacity: moves between S and
//! M keep the total, and an object is only added after enough bytes were freed for it.
//!
//! Victims reported by [`Cache::insert_evicting`]: objects evicted from M and objects
//! demoted from S to G (their data leaves the cache; only the key is remembered). Moves from
//! S to M and forgotten ghosts are not evictions of cached data and are not reported.
//!
//! A hit only bumps the object's frequency, so it can also be recorded through `&self`
//! ([`Cache::get_shared`], a compare-and-swap on the entry's state word): a concurrent cache
//! serves S3-FIFO hits under a shared lock.

use std::sync::atomic::Ordering::Relaxed;

use super::{Cache, EvictionKind, Queue, SharedGet, Slab, NIL};

/// Entry state: which queue holds the entry (mask [`QUEUE`]) and, in S and M, the object's
/// frequency (mask [`FREQ`]).
const QUEUE: u32 = 0b1100;
const SMALL: u32 = 0b0100;
const MAIN: u32 = 0b1000;
const GHOST: u32 = 0b1100;
const FREQ: u32 = 0b0011;

/// Byte-capacity S3-FIFO. See the [module docs](self).
#[derive(Debug)]
pub struct S3Fifo {
    /// Entries of the keys in S, M and G.
    slab: Slab,
    small: Queue,
    main: Queue,
    ghost: Queue,
    capacity: u64,
    /// S's share of the capacity: `capacity / 10`.
    small_share: u64,
    /// M's share of the capacity, which is also G's byte bound.
    main_share: u64,
}

impl S3Fifo {
    /// An empty cache holding at most `capacity_bytes` bytes.
    pub fn new(capacity_bytes: u64) -> Self {
        let small_share = capacity_bytes / 10;
        S3Fifo {
            slab: Slab::new(),
            small: Queue::new(),
            main: Queue::new(),
            ghost: Queue::new(),
            capacity: capacity_bytes,
            small_share,
            main_share: capacity_bytes - small_share,
        }
    }

    /// Bytes held by the small queue S.
    pub fn small_bytes(&self) -> u64 {
        self.small.bytes()
    }

    /// Bytes held by the main queue M.
    pub fn main_bytes(&self) -> u64 {
        self.main.bytes()
    }

    /// Number of keys remembered by the ghost queue G.
    pub fn ghost_len(&self) -> usize {
        self.ghost.len()
    }

    /// Sum of the sizes of the keys in G; at most M's share of the capacity.
    pub fn ghost_bytes(&self) -> u64 {
        self.ghost.bytes()
    }

    /// The slot and state of `key` if it is cached (in S or M).
    #[inline]
    fn cached(&self, key: u32) -> Option<(u32, u32)> {
        let slot = self.slab.slot(key)?;
        let state = self.slab.entry(slot).state.load(Relaxed);
        (state & QUEUE != GHOST).then_some((slot, state))
    }

    /// Frees room by evicting from S or M, reporting what leaves the cache; false if both
    /// are empty (nothing to evict).
    fn evict(&mut self, evicted: &mut impl FnMut(u32)) -> bool {
        let from_small = !self.small.is_empty()
            && (self.small.bytes() >= self.small_share || self.main.is_empty());
        if from_small {
            self.evict_small(evicted);
        } else if !self.main.is_empty() {
            self.evict_main(evicted);
        } else {
            return false;
        }
        true
    }

    /// Takes tails out of S, promoting those hit while in S to M, until one is demoted to G
    /// (reported: its data leaves the cache) or S is empty.
    fn evict_small(&mut self, evicted: &mut impl FnMut(u32)) {
        while let Some(tail) = self.small.tail() {
            self.small.remove(&mut self.slab, tail);
            let entry = self.slab.entry_mut(tail);
            let state = entry.state_mut();
            if *state & FREQ >= 1 {
                *state = MAIN;
                self.main.push_head(&mut self.slab, tail);
                if self.main.bytes() > self.main_share {
                    self.evict_main(evicted);
                }
            } else {
                *state = GHOST;
                evicted(entry.key);
                self.remember(tail);
                return;
            }
        }
    }

    /// Reinserts tails of M that were hit (spending one unit of frequency) until one that
    /// was not is evicted (and reported), or M is empty. Terminates: every reinsertion
    /// lowers a frequency.
    fn evict_main(&mut self, evicted: &mut impl FnMut(u32)) {
        while let Some(tail) = self.main.tail() {
            let entry = self.slab.entry_mut(tail);
            let state = entry.state_mut();
            if *state & FREQ > 0 {
                *state -= 1;
                self.main.move_to_head(&mut self.slab, tail);
            } else {
                evicted(entry.key);
                self.main.remove(&mut self.slab, tail);
                self.slab.release(tail);
                return;
            }
        }
    }

    /// Puts an entry just demoted from S at the head of G, forgetting the oldest ghosts
    /// while G remembers more than M's share of bytes.
    fn remember(&mut self, slot: u32) {
        self.ghost.push_head(&mut self.slab, slot);
        while self.ghost.bytes() > self.main_share {
            let Some(oldest) = self.ghost.tail() else {
                break;
            };
            self.ghost.remove(&mut self.slab, oldest);
            self.slab.release(oldest);
        }
    }

    /// The insertion, generic over the eviction callback (see [`Cache::insert_evicting`]).
    fn insert_with(&mut self, key: u32, size: u64, mut evicted: impl FnMut(u32)) {
        if self.get(key) || size > self.capacity || key == NIL {
            return;
        }
        // Consult G before making room: the ghosts those evictions add cannot push `key` out.
        let was_ghost = match self.slab.slot(key) {
            Some(ghost) => {
                self.ghost.remove(&mut self.slab, ghost);
                self.slab.release(ghost);
                true
            }
            None => false,
        };
        while self.capacity - self.used_bytes() < size {
            if !self.evict(&mut evicted) {
                break;
            }
        }
        if was_ghost {
            let slot = self.slab.add(key, size, MAIN);
            self.main.push_head(&mut self.slab, slot);
        } else {
            let slot = self.slab.add(key, size, SMALL);
            self.small.push_head(&mut self.slab, slot);
        }
    }
}

impl Cache for S3Fifo {
    #[inline]
    fn get(&mut self, key: u32) -> bool {
        let Some(slot) = self.slab.slot(key) else {
            return false;
        };
        let state = self.slab.entry_mut(slot).state_mut();
        if *state & QUEUE == GHOST {
            return false;
        }
        if *state & FREQ < 3 {
            *state += 1;
        }
        true
    }

    /// Bumps the frequency with a compare-and-swap loop, so racing hits are all counted (up
    /// to the saturation at 3, as with `get`). Only the frequency bits change here: which
    /// queue holds an entry changes under `&mut self` alone.
    #[inline]
    fn get_shared(&self, key: u32) -> SharedGet {
        let Some(slot) = self.slab.slot(key) else {
            return SharedGet::Miss;
        };
        let state = &self.slab.entry(slot).state;
        let mut current = state.load(Relaxed);
        loop {
            if current & QUEUE == GHOST {
                return SharedGet::Miss;
            }
            if current & FREQ == 3 {
                return SharedGet::Hit;
            }
            match state.compare_exchange_weak(current, current + 1, Relaxed, Relaxed) {
                Ok(_) => return SharedGet::Hit,
                Err(now) => current = now,
            }
        }
    }

    fn insert_evicting(&mut self, key: u32, size: u64, evicted: &mut dyn FnMut(u32)) {
        self.insert_with(key, size, evicted);
    }

    fn insert(&mut self, key: u32, size: u64) {
        self.insert_with(key, size, |_| {});
    }

    fn contains(&self, key: u32) -> bool {
        self.cached(key).is_some()
    }

    fn used_bytes(&self) -> u64 {
        self.small.bytes() + self.main.bytes()
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    fn kind(&self) -> EvictionKind {
        EvictionKind::S3Fifo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ghost_never_remembers_more_than_mains_share() {
        // capacity 10: S share 1, M share 9. Every object is a one-hit wonder of 3 bytes, so
        // each insertion demotes the S tail to G; G keeps at most 9 bytes = 3 keys.
        let mut c = S3Fifo::new(10);
        for key in 0..20 {
            c.insert(key, 3);
            assert!(c.ghost_bytes() <= 9);
        }
        assert_eq!(c.ghost_len(), 3);
        assert_eq!(c.used_bytes(), 9);
    }

    #[test]
    fn ghost_hit_goes_to_main() {
        let mut c = S3Fifo::new(10);
        c.insert(1, 5);
        c.insert(2, 5);
        c.insert(3, 5); // S holds 10 >= 1: evicts 1 (unvisited) to G
        assert!(!c.contains(1) && c.ghost_len() == 1);
        c.insert(1, 5); // ghost hit: 1 leaves G for M; 2 is demoted to make room
        assert!(c.contains(1) && !c.contains(2));
        assert_eq!((c.main_bytes(), c.small_bytes()), (5, 5));
    }

    #[test]
    fn demotions_to_the_ghost_queue_and_main_evictions_are_reported() {
        let mut c = S3Fifo::new(10);
        let mut victims = Vec::new();
        c.insert_evicting(1, 5, &mut |k| victims.push(k));
        c.insert_evicting(2, 5, &mut |k| victims.push(k));
        assert!(victims.is_empty());
        // 1 is demoted to G: its data leaves the cache.
        c.insert_evicting(3, 5, &mut |k| victims.push(k));
        assert_eq!(victims, [1]);
        // A shared hit on 3 earns it promotion; 2 (unhit) goes to G; ghost 1 enters M.
        assert_eq!(c.get_shared(3), SharedGet::Hit);
        assert_eq!(c.get_shared(1), SharedGet::Miss);
        c.insert_evicting(1, 5, &mut |k| victims.push(k));
        assert_eq!(victims, [1, 2]);
        // S holds 3 (hit once): inserting 4 promotes 3 to M, which then holds 10 > 9 bytes,
        // so M evicts its unhit tail 1; S is then empty and 4 fits.
        c.insert_evicting(4, 5, &mut |k| victims.push(k));
        assert_eq!(victims, [1, 2, 1]);
        assert!(c.contains(3) && c.contains(4) && !c.contains(1));
    }
}
