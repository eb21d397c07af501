//! Shadow caches: a router's own estimate of what each replica's cache holds and of its
//! flash work, for backends that do not report it (a search engine ballot did not write
//! sends no `x-ballot-miss-bytes`), and for the `cache-aware` policy, which routes by what
//! they hold. The HTTP balancer and both simulators keep them with this one code.
//!
//! The balancer knows which terms it sent to which replica and how large their postings are
//! (the size table of `[policy] sizes`), so it can replay them into a cache per replica of
//! the replica's own size and eviction policy: the same `eviction` code the trace simulator
//! and ballot's replica cache with, keyed by dense term ids as the simulator's are. A
//! query's misses in its replica's shadow cache are the flash bytes that replica will read
//! for it (DESIGN.md, "In the field"; the simulator predicts the replica's misses to within
//! 0.02 the same way).
//!
//! - Term ids: the size table's terms get ids `0..n` in the table's order when it is loaded;
//!   a term the table does not know gets the next free id on first sight, up to
//!   [`Shadow::MAX_UNKNOWN`] of them, and after that counts as a miss of its default size
//!   every time without being cached. Memory is therefore bounded: the id maps, and per
//!   replica four bytes per id plus one entry per cached term ([`Shadow::memory_bytes`]).
//! - Replicas come and go: each slot's cache belongs to an [`Owner`], the replica it was
//!   built for and the moment that replica last became live, so a replica that is removed,
//!   replaced, or ejected and re-admitted (a restart, most likely: its RAM cache is empty)
//!   starts from an empty shadow cache too.
//! - A query is fed when it is sent: a retry on another replica feeds that replica's cache
//!   too, and the first replica's estimate keeps it (rare: failovers only).
//! - One lock per replica's cache, held for the few operations of one query.

use std::sync::{Mutex, RwLock};

use data::sizes::SizeTable;
use eviction::{new_cache, Cache, EvictionKind};
use rustc_hash::FxHashMap;

use crate::MAX_REPLICAS;

/// Whom a slot's cache belongs to: a replica (any id unique among the replicas that ever
/// held the slot) and the moment it last became live. A cache of another owner is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// The replica.
    pub id: usize,
    /// When it last became live (any clock).
    pub since: u64,
}

/// Who holds each replica slot now, as the shadow caches name its owner.
pub trait Owners {
    /// The owner of slot `slot` (`None`: an empty slot).
    fn owner(&self, slot: usize) -> Option<Owner>;
}

/// Each slot its own owner for ever: the simulators' replicas never restart.
pub struct FixedOwners;

impl Owners for FixedOwners {
    fn owner(&self, slot: usize) -> Option<Owner> {
        Some(Owner { id: slot, since: 0 })
    }
}

/// Per replica: the cache and whom it belongs to.
struct Slot {
    owner: Owner,
    cache: Option<Box<dyn Cache>>,
}

/// The shadow caches of every replica slot, and the term ids they share.
pub struct Shadow {
    /// Term hash → (id, postings bytes) of the size table's terms.
    known: FxHashMap<u64, (u32, u32)>,
    /// Term hash → id of the terms seen that the table does not know.
    unknown: RwLock<FxHashMap<u64, u32>>,
    /// Postings bytes of a term the table does not know.
    default_bytes: u32,
    /// Each replica's cache size and policy.
    cache_bytes: u64,
    eviction: EvictionKind,
    slots: Box<[Mutex<Slot>]>,
}

impl Shadow {
    /// The most terms outside the size table that get an id (and can be cached).
    pub const MAX_UNKNOWN: usize = 1 << 20;

    /// Shadow caches of `cache_bytes` each under `eviction`, for the terms of `sizes`
    /// (unknown terms weigh `default_bytes`).
    pub fn new(
        sizes: &SizeTable,
        default_bytes: u32,
        cache_bytes: u64,
        eviction: EvictionKind,
    ) -> Shadow {
        let terms = sizes
            .sorted()
            .into_iter()
            .map(|(term, bytes)| (data::hash::term_hash(term), bytes));
        Shadow::from_terms(terms, default_bytes, cache_bytes, eviction)
    }

    /// As [`Shadow::new`], for terms given as `(term hash, postings bytes)`, which get ids
    /// in their order (the simulators' dense term ids, when given in id order).
    pub fn from_terms(
        terms: impl IntoIterator<Item = (u64, u64)>,
        default_bytes: u32,
        cache_bytes: u64,
        eviction: EvictionKind,
    ) -> Shadow {
        let known = terms
            .into_iter()
            .enumerate()
            .map(|(id, (hash, bytes))| {
                let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
                (hash, (id as u32, bytes))
            })
            .collect();
        let slots = (0..MAX_REPLICAS)
            .map(|_| {
                Mutex::new(Slot {
                    owner: Owner::default(),
                    cache: None,
                })
            })
            .collect();
        Shadow {
            known,
            unknown: RwLock::new(FxHashMap::default()),
            default_bytes,
            cache_bytes,
            eviction,
            slots,
        }
    }

    /// The id and bytes of the term with hash `h`; `None` for an unknown term past
    /// [`Shadow::MAX_UNKNOWN`].
    fn term(&self, h: u64) -> Option<(u32, u32)> {
        if let Some(&t) = self.known.get(&h) {
            return Some(t);
        }
        let first = self.known.len() as u32;
        {
            let unknown = self.unknown.read().unwrap_or_else(|e| e.into_inner());
            if let Some(&id) = unknown.get(&h) {
                return Some((id, self.default_bytes));
            }
            // Full: no write lock for a term that can no longer get an id.
            if unknown.len() >= Self::MAX_UNKNOWN {
                return None;
            }
        }
        let mut unknown = self.unknown.write().unwrap_or_else(|e| e.into_inner());
        let next = first + unknown.len() as u32;
        if let Some(&id) = unknown.get(&h) {
            return Some((id, self.default_bytes));
        }
        if unknown.len() >= Self::MAX_UNKNOWN {
            return None;
        }
        unknown.insert(h, next);
        Some((next, self.default_bytes))
    }

    /// The cache size of each replica.
    pub fn cache_bytes(&self) -> u64 {
        self.cache_bytes
    }

    /// Feeds the terms of one query routed to slot `index`, held by `owner`, into that
    /// slot's cache; returns the postings bytes they missed (what the replica will read
    /// from flash for this query). A missed list is cached only if `admits` its term hash
    /// (the cache admission rule, as the replica follows it).
    pub fn access(
        &self,
        index: usize,
        owner: Owner,
        term_hashes: &[u64],
        admits: impl Fn(u64) -> bool,
    ) -> u64 {
        let Some(slot) = self.slots.get(index) else {
            return 0;
        };
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.owner != owner || slot.cache.is_none() {
            slot.owner = owner;
            slot.cache = Some(new_cache(self.eviction, self.cache_bytes));
        }
        let Some(cache) = slot.cache.as_mut() else {
            return 0;
        };
        let mut missed = 0u64;
        for &h in term_hashes {
            match self.term(h) {
                Some((id, bytes)) => {
                    if !cache.get(id) {
                        if admits(h) {
                            cache.insert(id, u64::from(bytes));
                        }
                        missed += u64::from(bytes);
                    }
                }
                None => missed += u64::from(self.default_bytes),
            }
        }
        missed
    }

    /// The postings bytes the terms `term_hashes` would miss in slot `index`'s cache if the
    /// query went to `owner` now, and their bytes in all, without feeding the cache (a cache
    /// that is not `owner`'s, or not yet built, misses everything).
    pub fn peek_of(&self, index: usize, owner: Owner, term_hashes: &[u64]) -> (u64, u64) {
        let bytes_of = |h: u64| match self.known.get(&h) {
            Some(&(id, bytes)) => (Some(id), bytes),
            None => {
                let unknown = self.unknown.read().unwrap_or_else(|e| e.into_inner());
                (unknown.get(&h).copied(), self.default_bytes)
            }
        };
        let Some(slot) = self.slots.get(index) else {
            return (0, 0);
        };
        let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        let cache = slot.cache.as_ref().filter(|_| slot.owner == owner);
        let (mut missed, mut all) = (0u64, 0u64);
        for &h in term_hashes {
            let (id, bytes) = bytes_of(h);
            let hit = matches!((cache, id), (Some(c), Some(id)) if c.contains(id));
            all += u64::from(bytes);
            if !hit {
                missed += u64::from(bytes);
            }
        }
        (missed, all)
    }

    /// The postings bytes the terms `term_hashes` would miss in slot `index`'s cache if the
    /// query went to `owner` now, without feeding it.
    pub fn peek(&self, index: usize, owner: Owner, term_hashes: &[u64]) -> u64 {
        self.peek_of(index, owner, term_hashes).0
    }

    /// Bytes of postings slot `index`'s cache holds now.
    pub fn cached_bytes(&self, index: usize) -> u64 {
        self.slots.get(index).map_or(0, |s| {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.cache.as_ref().map_or(0, |c| c.used_bytes())
        })
    }

    /// An estimate of the memory the shadow caches hold: the id maps (16 bytes an entry
    /// and a word of table overhead) and, per cache, four bytes per id up to the largest
    /// id plus an entry (24 bytes) per cached term.
    pub fn memory_bytes(&self) -> u64 {
        let ids = self.known.capacity()
            + self
                .unknown
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .capacity();
        let mut total = ids as u64 * 24;
        let max_id = (self.known.len() + Self::MAX_UNKNOWN) as u64;
        for s in self.slots.iter() {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = &s.cache {
                let index = (self.known.len() as u64 + c.len() as u64).min(max_id);
                total += 4 * index + 24 * c.len() as u64;
            }
        }
        total
    }

    /// Terms of the size table, and terms outside it that got an id.
    fn terms(&self) -> (usize, usize) {
        let unknown = self.unknown.read().unwrap_or_else(|e| e.into_inner()).len();
        (self.known.len(), unknown)
    }

    /// A JSON summary for `/admin/replicas`: the cache size and policy, the memory the
    /// caches take, and the term ids.
    pub fn summary(&self) -> serde_json::Value {
        let (known, unknown) = self.terms();
        serde_json::json!({
            "cache_bytes": self.cache_bytes,
            "eviction": self.eviction.name(),
            "memory_bytes": self.memory_bytes(),
            "size_table_terms": known,
            "other_terms": unknown,
            "max_other_terms": Self::MAX_UNKNOWN,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: usize) -> Owner {
        Owner { id, since: 0 }
    }

    fn h(t: &str) -> u64 {
        data::hash::term_hash(t)
    }

    #[test]
    fn misses_are_the_bytes_a_cache_of_the_replicas_size_would_read() {
        let sizes = SizeTable::from_pairs([("a".to_owned(), 1_000), ("b".to_owned(), 3_000)]);
        let s = Shadow::new(&sizes, 21, 3_500, EvictionKind::Lru);
        let r = replica(1);
        assert_eq!(s.access(0, r, &[h("a"), h("b")], |_| true), 4_000);
        // b (3,000) evicted a (1,000) to make room? a + b = 4,000 > 3,500: the LRU kept b.
        assert_eq!(s.access(0, r, &[h("b")], |_| true), 0);
        assert_eq!(s.access(0, r, &[h("a")], |_| true), 1_000);
        // An unknown term weighs the default and is cached like any other.
        assert_eq!(s.access(0, r, &[h("zzz")], |_| true), 21);
        assert_eq!(s.access(0, r, &[h("zzz")], |_| true), 0);
        // A peek does not feed the cache.
        assert_eq!(s.peek(0, r, &[h("a"), h("zzz"), h("new")]), 21);
        assert_eq!(s.peek(0, r, &[h("new")]), 21);
        // Another slot has its own cache.
        assert_eq!(s.peek(1, r, &[h("zzz")]), 21);
        assert_eq!(s.access(1, r, &[h("zzz")], |_| true), 21);
        assert!(s.cached_bytes(0) <= 3_500 && s.cached_bytes(0) > 0);
        assert!(s.memory_bytes() > 0);
        // A term the admission rule keeps out of a slot misses there every time.
        let not_b = |t: u64| t != h("b");
        assert_eq!(s.access(2, r, &[h("b")], not_b), 3_000);
        assert_eq!(s.access(2, r, &[h("b"), h("a")], not_b), 4_000);
        assert_eq!(s.access(2, r, &[h("b"), h("a")], not_b), 3_000);
    }

    #[test]
    fn a_replica_that_comes_back_or_is_replaced_starts_cold() {
        let sizes = SizeTable::from_pairs([("a".to_owned(), 1_000)]);
        let s = Shadow::new(&sizes, 21, 10_000, EvictionKind::Sieve);
        let r = replica(1);
        assert_eq!(s.access(0, r, &[h("a")], |_| true), 1_000);
        assert_eq!(s.access(0, r, &[h("a")], |_| true), 0);
        assert_eq!(s.peek_of(0, r, &[h("a"), h("b")]), (21, 1_021));
        // Ejected, then re-admitted later: a new stamp.
        let back = Owner { id: 1, since: 7 };
        assert_eq!(
            s.access(0, back, &[h("a")], |_| true),
            1_000,
            "cold after coming back"
        );
        // Another replica in the slot.
        assert_eq!(
            s.access(0, replica(2), &[h("a")], |_| true),
            1_000,
            "cold when replaced"
        );
    }
}
