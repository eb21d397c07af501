//! Byte-capacity eviction policies for caches of postings lists keyed by a dense term id.
//!
//! The trace simulator (`cache-sim`), the real replica's RAM cache and the balancer's
//! shadow caches all cache through this code, so a miss ratio the simulator predicts is
//! the one the replica sees. Each policy lives in one file named after
//! it and follows one paper:
//!
//! - [`lru`]: least recently used, the baseline of the standard evaluation.
//! - [`sieve`]: Zhang et al., "SIEVE is simpler than LRU", NSDI 2024.
//! - [`s3fifo`]: Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023.
//!
//! Adding a policy is one new file (a type implementing [`Cache`] with
//! `fn new(capacity_bytes: u64) -> Self`), its `mod`/`pub use` lines, and one line in the
//! `registry!` invocation below, which generates [`EvictionKind`], [`EvictionKind::ALL`],
//! the names used by `FromStr`/`Display`/serde, and [`new_cache`].
//!
//! No hashing on the hot path: a `Vec` indexed by the key itself (grown on demand) maps it to
//! a slot in a dense slab of entries, and the queues are intrusive doubly linked lists of
//! slots with `u32` links. O(1) per operation, no allocation once the slab has grown to the
//! cache's working set. Memory is four bytes per key up to the largest key ever inserted
//! (dense term ids) plus one entry per cached key.
//!
//! Insertion reports its victims ([`Cache::insert_evicting`] calls back once per evicted
//! key), so a cache that holds the objects themselves (the replica's lists) drops exactly
//! what the policy dropped. Each policy writes its insertion once, generic over the
//! callback; [`Cache::insert`] instantiates it with a no-op, so the simulator's
//! monomorphized replay pays nothing for the reports.
//!
//! Hits through a shared reference ([`Cache::get_shared`]): SIEVE and S3-FIFO hits only set
//! a visited bit or bump a 2-bit frequency, so they keep that word in an atomic and can
//! record a hit through `&self` (a concurrent cache can then serve hits under a read lock).
//! Through `&mut self` the same word is read and written with `get_mut`, i.e. as a plain
//! integer: the simulator's path has no atomic instructions.

pub mod lru;
pub mod s3fifo;
pub mod sieve;

pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicU32;

/// A byte-capacity cache of postings lists keyed by a dense term id.
///
/// Keys index a per-cache vector (four bytes per key up to the largest key inserted), so
/// they should be dense ids. `u32::MAX` is reserved as the list terminator and is never
/// cached.
pub trait Cache: Send + Sync {
    /// Looks `key` up; on a hit records the access (policy bookkeeping) and returns true.
    fn get(&mut self, key: u32) -> bool;

    /// Inserts `key` of `size` bytes after a miss, evicting as needed, and calls
    /// `evicted(victim)` once for every cached key it evicts, in eviction order. An object
    /// larger than the capacity is never cached (no-op, nothing evicted). Inserting a key
    /// already present refreshes it like a hit and keeps its old size.
    ///
    /// Exactly the reported keys stop being [`contains`](Cache::contains)ed; `key` itself is
    /// never reported. Keys the policy only remembers without data (S3-FIFO's ghosts) are
    /// not cached, so forgetting them is not reported, while a cached key demoted to a
    /// ghost is.
    fn insert_evicting(&mut self, key: u32, size: u64, evicted: &mut dyn FnMut(u32));

    /// [`insert_evicting`](Cache::insert_evicting) without the reports. The policies of this
    /// module implement it with their generic insertion and a no-op callback, so it costs
    /// no indirect call.
    fn insert(&mut self, key: u32, size: u64) {
        self.insert_evicting(key, size, &mut |_| {});
    }

    /// Records a hit through a shared reference, for policies whose hits only update the
    /// object's own state word (kept atomic): [`SharedGet::Hit`] or [`SharedGet::Miss`]
    /// exactly as [`get`](Cache::get) would answer, with the same bookkeeping; concurrent
    /// calls are exact too. Policies that reorder on a hit (LRU) answer
    /// [`SharedGet::Exclusive`] without looking: the caller must use `get`.
    fn get_shared(&self, key: u32) -> SharedGet {
        let _ = key;
        SharedGet::Exclusive
    }

    /// [`get`](Cache::get), then [`insert`](Cache::insert) on a miss; returns whether it hit.
    fn access(&mut self, key: u32, size: u64) -> bool {
        if self.get(key) {
            true
        } else {
            self.insert(key, size);
            false
        }
    }

    /// Whether `key` is cached, without any bookkeeping.
    fn contains(&self, key: u32) -> bool;

    /// Sum of the sizes of the cached objects; never more than [`capacity`](Cache::capacity).
    fn used_bytes(&self) -> u64;

    /// The byte capacity the cache was built with.
    fn capacity(&self) -> u64;

    /// Number of cached objects.
    fn len(&self) -> usize;

    /// Whether no object is cached.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which policy this is.
    fn kind(&self) -> EvictionKind;
}

/// The answer of [`Cache::get_shared`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedGet {
    /// Cached; the hit was recorded.
    Hit,
    /// Not cached; nothing was recorded.
    Miss,
    /// This policy records hits only through `&mut self` ([`Cache::get`]).
    Exclusive,
}

/// Receives a concrete cache type from [`with_cache_type`].
pub trait CacheVisitor {
    /// What the visit returns.
    type Output;
    /// Runs with `make`, the constructor (`capacity_bytes -> cache`) of the chosen policy.
    fn visit<C: Cache + 'static>(self, make: fn(u64) -> C) -> Self::Output;
}

/// Generates the policy registry from one line per policy: `Variant => "name", Type;`.
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $name:literal, $policy:ty;)+) => {
        /// An eviction policy, by name. The names (`FromStr`, `Display`, serde) are
        /// lowercase: `lru`, `sieve`, `s3fifo`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum EvictionKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)+
        }

        impl EvictionKind {
            /// Every policy, in registry order.
            pub const ALL: [EvictionKind; [$($name),+].len()] = [$(EvictionKind::$variant),+];

            /// The policy's name, as accepted by `FromStr` and written by `Display`.
            pub fn name(self) -> &'static str {
                match self {
                    $(EvictionKind::$variant => $name,)+
                }
            }
        }

        /// Builds an empty cache of `kind` holding at most `capacity_bytes` bytes.
        pub fn new_cache(kind: EvictionKind, capacity_bytes: u64) -> Box<dyn Cache> {
            match kind {
                $(EvictionKind::$variant => Box::new(<$policy>::new(capacity_bytes)),)+
            }
        }

        /// Calls `visitor` with the constructor of `kind`'s concrete type, so hot loops (the
        /// trace simulator) can be monomorphized over the policy instead of paying a virtual
        /// call per access.
        pub fn with_cache_type<V: CacheVisitor>(kind: EvictionKind, visitor: V) -> V::Output {
            match kind {
                $(EvictionKind::$variant => visitor.visit(<$policy>::new),)+
            }
        }
    };
}

registry! {
    /// Least recently used ([`Lru`]).
    Lru => "lru", Lru;
    /// SIEVE, NSDI 2024 ([`Sieve`]).
    Sieve => "sieve", Sieve;
    /// S3-FIFO, SOSP 2023 ([`S3Fifo`]).
    S3Fifo => "s3fifo", S3Fifo;
}

impl EvictionKind {
    /// The replicas' default eviction policy, and the default of the commands that train
    /// tables for them (`ballot train`, `ballot retrain`, `ballot demo`): SIEVE. On the
    /// standard evaluation's log and caches it reads 20-25% fewer flash bytes than LRU under
    /// every routing policy, and a table trained for it 27% fewer (`docs/results.md`, "SIEVE
    /// caches"). The offline evaluation commands (`eval`, `simulate`, `grid`)
    /// keep LRU, the standard evaluation's policy.
    pub const SERVING_DEFAULT: EvictionKind = EvictionKind::Sieve;
}

impl fmt::Display for EvictionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not in the registry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown eviction policy {0:?} (expected one of: {valid})",
    valid = EvictionKind::ALL.map(EvictionKind::name).join(", ")
)]
pub struct UnknownEviction(pub String);

impl FromStr for EvictionKind {
    type Err = UnknownEviction;

    /// Parses an exact policy name (the same names serde accepts).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| UnknownEviction(s.to_owned()))
    }
}

/// "No slot": the end of a list, a key without an entry. Also why `u32::MAX` cannot be a key.
const NIL: u32 = u32::MAX;

/// A tracked key: its neighbours in whichever queue holds it (`prev` toward the head, i.e.
/// newer; `next` toward the tail, older), the size it was cached with and a policy-defined
/// state word. Free entries chain through `next`.
///
/// The state word is atomic so that [`Cache::get_shared`] can update it through `&self`;
/// every `&mut self` path uses [`Entry::state_mut`] (a plain integer access).
#[derive(Debug)]
struct Entry {
    prev: u32,
    next: u32,
    key: u32,
    state: AtomicU32,
    size: u64,
}

impl Entry {
    /// The state word, through exclusive access: no atomic instruction.
    #[inline]
    fn state_mut(&mut self) -> &mut u32 {
        self.state.get_mut()
    }
}

/// The keys a policy tracks: `index[key]` is the slot of the key's entry (or [`NIL`]), and
/// the entries are dense, one per tracked key, freed slots reused first. A warm cache's list
/// operations therefore stay within a few hundred kilobytes however sparse the keys, and the
/// only per-key cost is four bytes of index.
#[derive(Debug)]
struct Slab {
    index: Vec<u32>,
    entries: Vec<Entry>,
    /// Head of the chain of free slots.
    free: u32,
}

impl Slab {
    const fn new() -> Self {
        Slab {
            index: Vec::new(),
            entries: Vec::new(),
            free: NIL,
        }
    }

    /// The slot of `key`'s entry, if it has one.
    #[inline]
    fn slot(&self, key: u32) -> Option<u32> {
        match self.index.get(key as usize) {
            Some(&slot) if slot != NIL => Some(slot),
            _ => None,
        }
    }

    #[inline]
    fn entry(&self, slot: u32) -> &Entry {
        &self.entries[slot as usize]
    }

    #[inline]
    fn entry_mut(&mut self, slot: u32) -> &mut Entry {
        &mut self.entries[slot as usize]
    }

    /// Gives `key`, which must have no entry and not be [`NIL`], an entry in no queue.
    #[inline]
    fn add(&mut self, key: u32, size: u64, state: u32) -> u32 {
        let entry = Entry {
            prev: NIL,
            next: NIL,
            key,
            state: AtomicU32::new(state),
            size,
        };
        let slot = if self.free == NIL {
            self.entries.push(entry);
            // Fewer entries than keys, and keys are below u32::MAX.
            (self.entries.len() - 1) as u32
        } else {
            let slot = self.free;
            self.free = self.entries[slot as usize].next;
            self.entries[slot as usize] = entry;
            slot
        };
        if self.index.len() <= key as usize {
            self.index.resize(key as usize + 1, NIL);
        }
        self.index[key as usize] = slot;
        slot
    }

    /// Forgets the entry in `slot`, which must be in no queue.
    #[inline]
    fn release(&mut self, slot: u32) {
        let key = self.entries[slot as usize].key;
        self.index[key as usize] = NIL;
        self.entries[slot as usize].next = self.free;
        self.free = slot;
    }
}

/// A FIFO/recency queue of slots threaded through [`Slab::entries`]: head = newest, tail =
/// oldest. Several queues may share one slab as long as an entry sits in at most one of
/// them. It counts its entries and their bytes.
#[derive(Debug)]
struct Queue {
    head: u32,
    tail: u32,
    len: usize,
    bytes: u64,
}

impl Queue {
    const fn new() -> Self {
        Queue {
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The oldest slot.
    fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The slot just newer than `slot` (toward the head), if any.
    #[inline]
    fn newer(slab: &Slab, slot: u32) -> Option<u32> {
        let prev = slab.entry(slot).prev;
        (prev != NIL).then_some(prev)
    }

    /// Adds `slot`, which must be in no queue, at the head.
    #[inline]
    fn push_head(&mut self, slab: &mut Slab, slot: u32) {
        self.link_head(slab, slot);
        self.len += 1;
        self.bytes += slab.entry(slot).size;
    }

    /// Takes `slot`, which must be in this queue, out of it.
    #[inline]
    fn remove(&mut self, slab: &mut Slab, slot: u32) {
        self.unlink(slab, slot);
        self.len -= 1;
        self.bytes -= slab.entry(slot).size;
    }

    /// Moves `slot`, which must be in this queue, to the head.
    #[inline]
    fn move_to_head(&mut self, slab: &mut Slab, slot: u32) {
        if self.head != slot {
            self.unlink(slab, slot);
            self.link_head(slab, slot);
        }
    }

    #[inline]
    fn link_head(&mut self, slab: &mut Slab, slot: u32) {
        let entry = slab.entry_mut(slot);
        entry.prev = NIL;
        entry.next = self.head;
        if self.head == NIL {
            self.tail = slot;
        } else {
            slab.entry_mut(self.head).prev = slot;
        }
        self.head = slot;
    }

    #[inline]
    fn unlink(&mut self, slab: &mut Slab, slot: u32) {
        let &Entry { prev, next, .. } = slab.entry(slot);
        if prev == NIL {
            self.head = next;
        } else {
            slab.entry_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            slab.entry_mut(next).prev = prev;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keeps_fifo_order_and_counts() {
        let mut slab = Slab::new();
        let mut q = Queue::new();
        let slots = [(7, 10), (3, 20), (9, 30)].map(|(key, size)| {
            let slot = slab.add(key, size, 0);
            q.push_head(&mut slab, slot);
            slot
        });
        let [a, b, c] = slots;
        assert_eq!((q.len(), q.bytes(), q.tail()), (3, 60, Some(a)));
        assert_eq!(
            (slab.slot(7), slab.slot(9), slab.slot(8)),
            (Some(a), Some(c), None)
        );
        assert_eq!(Queue::newer(&slab, a), Some(b));
        assert_eq!(Queue::newer(&slab, c), None);
        q.move_to_head(&mut slab, a); // a c b
        assert_eq!(q.tail(), Some(b));
        q.remove(&mut slab, c); // a b
        slab.release(c);
        assert_eq!((Queue::newer(&slab, b), slab.slot(9)), (Some(a), None));
        // The freed slot is reused.
        assert_eq!(slab.add(100, 5, 0), c);
        assert_eq!(slab.slot(100), Some(c));
        q.remove(&mut slab, b);
        q.remove(&mut slab, a);
        assert!(q.is_empty());
        assert_eq!((q.bytes(), q.tail(), q.head), (0, None, NIL));
    }

    #[test]
    fn slab_reuses_freed_slots_before_growing() {
        let mut slab = Slab::new();
        let slots = [0, 1, 2, 3].map(|key| slab.add(key, 1, 0));
        slab.release(slots[1]);
        slab.release(slots[3]);
        assert_eq!((slab.slot(1), slab.slot(3)), (None, None));
        // Last freed, first reused; no growth while free slots remain.
        assert_eq!(
            [slab.add(10, 1, 0), slab.add(11, 1, 0)],
            [slots[3], slots[1]]
        );
        assert_eq!(slab.entries.len(), 4);
        assert_eq!(slab.add(12, 1, 0), 4);
        assert_eq!((slab.slot(10), slab.slot(12)), (Some(slots[3]), Some(4)));
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = "arc".parse::<EvictionKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown eviction policy "arc" (expected one of: lru, sieve, s3fifo)"#
        );
    }
}
