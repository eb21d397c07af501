//! The replica's RAM cache of postings lists: a byte-capacity eviction policy of the
//! `eviction` crate (the same code the simulator replays, so `ballot eval`'s hit counts
//! are the replica's), made safe for concurrent requests, with single-flight misses.
//!
//! Design (after the request-coalescing caches of groupcache and foyer): one `RwLock` guards
//! the policy, the map `term id → list` of exactly the keys the policy holds, and the table
//! of reads in flight. The policy reports every key it evicts
//! ([`Cache::insert_evicting`]), and the map drops exactly those lists, so it never holds an
//! evicted list and needs no pruning. A lock is held only for the O(1) policy bookkeeping and
//! map operations, never during I/O or decoding; evicted lists are freed after the lock is
//! released. A miss registers a *flight*; other requests missing on the same term wait on it
//! instead of reading again, so a list is never read twice concurrently. The policy accounts
//! each list at its **stored bytes** (the bytes in `sizes.parquet`). Memory is thus the
//! capacity in stored bytes (plus each list's skip table, see [`crate::postings`]) plus the
//! lists pinned by queries in flight, which the HTTP layer bounds ([`crate::budget`]).
//!
//! Hits without an exclusive lock: SIEVE and S3-FIFO record a hit by setting a bit or
//! bumping a counter in the object's own atomic state word ([`Cache::get_shared`]), so their
//! hits take the lock *shared*: concurrent hits proceed in parallel, and only misses (insert,
//! evict) take it exclusively. This is data-race free (the policy's links and queues change
//! only under the exclusive lock; the shared path touches one atomic word) and exact: one
//! thread sees the same hits and evictions as the simulator's `access` (`get_shared` answers
//! and records exactly as `get`). LRU moves the hit object to the head of its queue, so its
//! hits take the lock exclusively. The lock is std's futex `RwLock`, which queues new
//! readers behind a waiting writer, so misses are not starved by a stream of hits.
//!
//! Accounting of a lookup: a *hit* found the list cached; a *miss* read it from flash; a
//! *coalesced* lookup missed but shared another request's read (it costs no flash bytes).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use eviction::{new_cache, Cache, EvictionKind, SharedGet};
use rustc_hash::FxHashMap;

use crate::postings::Postings;
use crate::store::{FlashStore, ReadError};

/// How a lookup was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// From the cache.
    Hit,
    /// Read from flash by this request.
    Miss,
    /// Missed, but waited for another request's read of the same list.
    Coalesced,
}

/// A list and how it was obtained.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The list (compressed, skip-indexed).
    pub list: Arc<Postings>,
    /// Hit, miss or coalesced.
    pub outcome: Outcome,
    /// The list's stored bytes.
    pub bytes: u64,
    /// Flash read time in seconds (misses only).
    pub read_secs: f64,
}

/// A failed fetch, shared by every request that waited for the same read.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct FetchError(pub Arc<ReadError>);

impl FetchError {
    /// True when the list failed its checksum or decoding.
    pub fn is_corrupt(&self) -> bool {
        matches!(*self.0, ReadError::Corrupt { .. })
    }
}

type FlightResult = Result<(Arc<Postings>, u64), FetchError>;

/// One read in progress.
#[derive(Default)]
struct Flight {
    result: Mutex<Option<FlightResult>>,
    done: Condvar,
}

impl Flight {
    fn complete(&self, r: FlightResult) {
        *lock(&self.result) = Some(r);
        self.done.notify_all();
    }

    fn wait(&self) -> FlightResult {
        let mut guard = lock(&self.result);
        loop {
            if let Some(r) = guard.as_ref() {
                return r.clone();
            }
            guard = self.done.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }
}

struct Inner {
    policy: Box<dyn Cache>,
    /// The list and stored bytes of exactly the keys `policy` holds.
    lists: FxHashMap<u32, (Arc<Postings>, u64)>,
    flights: FxHashMap<u32, Arc<Flight>>,
}

impl Inner {
    /// The cached list of `term_id` as a hit, if the map has it.
    fn hit(&self, term_id: u32) -> Option<Fetched> {
        self.lists.get(&term_id).map(|(list, bytes)| Fetched {
            list: list.clone(),
            outcome: Outcome::Hit,
            bytes: *bytes,
            read_secs: 0.0,
        })
    }
}

/// The concurrent RAM cache.
pub struct RamCache {
    inner: RwLock<Inner>,
    kind: EvictionKind,
    capacity: u64,
    /// Whether the policy records hits through a shared reference (SIEVE, S3-FIFO).
    shared_hits: bool,
    /// The policy's `used_bytes`, published after every insertion (read without locking).
    used: AtomicU64,
}

impl std::fmt::Debug for RamCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RamCache")
            .field("kind", &self.kind)
            .field("capacity", &self.capacity)
            .field("shared_hits", &self.shared_hits)
            .finish_non_exhaustive()
    }
}

// No code path panics while holding these locks; recover anyway rather than cascade.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl RamCache {
    /// An empty cache of `capacity` bytes under `kind`.
    pub fn new(kind: EvictionKind, capacity: u64) -> Self {
        let policy = new_cache(kind, capacity);
        // Asking about a key never inserted records nothing, whatever the answer.
        let shared_hits = policy.get_shared(0) != SharedGet::Exclusive;
        RamCache {
            inner: RwLock::new(Inner {
                policy,
                lists: FxHashMap::default(),
                flights: FxHashMap::default(),
            }),
            kind,
            capacity,
            shared_hits,
            used: AtomicU64::new(0),
        }
    }

    /// The eviction policy.
    pub fn kind(&self) -> EvictionKind {
        self.kind
    }

    /// The byte capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Whether hits take the lock shared (SIEVE, S3-FIFO) rather than exclusively (LRU).
    pub fn shared_hits(&self) -> bool {
        self.shared_hits
    }

    /// Stored bytes currently cached.
    pub fn used_bytes(&self) -> u64 {
        self.used.load(Relaxed)
    }

    /// The list of `term_id`, from the cache or (once, however many ask) from `store`; a
    /// list read from flash is cached only if `admit` (the balancer's admission hint, see
    /// `data::query::CacheHint`).
    pub fn get(
        &self,
        store: &FlashStore,
        term_id: u32,
        admit: bool,
    ) -> Result<Fetched, FetchError> {
        if self.shared_hits {
            let inner = read(&self.inner);
            if inner.policy.get_shared(term_id) == SharedGet::Hit {
                if let Some(hit) = inner.hit(term_id) {
                    return Ok(hit);
                }
            }
        }
        let flight = {
            let mut inner = write(&self.inner);
            // A shared miss recorded nothing, so this is the lookup's one recorded access.
            if inner.policy.get(term_id) {
                if let Some(hit) = inner.hit(term_id) {
                    return Ok(hit);
                }
            }
            if let Some(f) = inner.flights.get(&term_id) {
                let f = f.clone();
                drop(inner);
                let (list, bytes) = f.wait()?;
                return Ok(Fetched {
                    list,
                    outcome: Outcome::Coalesced,
                    bytes,
                    read_secs: 0.0,
                });
            }
            let f = Arc::new(Flight::default());
            inner.flights.insert(term_id, f.clone());
            f
        };
        let mut leader = Leader {
            cache: self,
            term_id,
            flight,
            done: false,
        };
        let result = store
            .read(term_id)
            .map(|r| {
                let secs = r.elapsed.as_secs_f64();
                (Arc::new(r.postings), r.bytes, secs)
            })
            .map_err(|e| FetchError(Arc::new(e)));
        match result {
            Ok((list, bytes, read_secs)) => {
                let evicted = if admit {
                    self.insert(term_id, &list, bytes)
                } else {
                    write(&self.inner).flights.remove(&term_id);
                    Vec::new()
                };
                leader.finish(Ok((list.clone(), bytes)));
                // Freed here, outside the lock (unless a query in flight still holds them).
                drop(evicted);
                Ok(Fetched {
                    list,
                    outcome: Outcome::Miss,
                    bytes,
                    read_secs,
                })
            }
            Err(e) => {
                write(&self.inner).flights.remove(&term_id);
                leader.finish(Err(e.clone()));
                Err(e)
            }
        }
    }

    /// Inserts a list just read into the policy and the map, drops the policy's victims
    /// from the map (returning them, to be freed after the lock is released) and ends the
    /// term's flight.
    fn insert(&self, term_id: u32, list: &Arc<Postings>, bytes: u64) -> Vec<Arc<Postings>> {
        let mut inner = write(&self.inner);
        let Inner {
            policy,
            lists,
            flights,
        } = &mut *inner;
        let mut evicted = Vec::new();
        policy.insert_evicting(term_id, bytes, &mut |victim| {
            if let Some((list, _)) = lists.remove(&victim) {
                evicted.push(list);
            }
        });
        if policy.contains(term_id) {
            lists.insert(term_id, (list.clone(), bytes));
        }
        flights.remove(&term_id);
        self.used.store(policy.used_bytes(), Relaxed);
        evicted
    }

    /// Checks that the map holds a list for exactly the keys the policy holds, and that
    /// their stored bytes add up to the policy's (tests).
    pub fn check_consistency(&self) -> bool {
        let inner = read(&self.inner);
        let bytes: u64 = inner.lists.values().map(|(_, b)| b).sum();
        inner.lists.keys().all(|&k| inner.policy.contains(k))
            && inner.lists.len() == inner.policy.len()
            && bytes == inner.policy.used_bytes()
            && self.used_bytes() == bytes
    }
}

/// The request reading a list; wakes the waiters even if it unwinds.
struct Leader<'a> {
    cache: &'a RamCache,
    term_id: u32,
    flight: Arc<Flight>,
    done: bool,
}

impl Leader<'_> {
    fn finish(&mut self, r: FlightResult) {
        self.done = true;
        self.flight.complete(r);
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.done {
            write(&self.cache.inner).flights.remove(&self.term_id);
            self.flight
                .complete(Err(FetchError(Arc::new(ReadError::NoTerm(self.term_id)))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::build::build_index;
    use crate::store::StoreOptions;
    use std::time::Duration;

    fn store(dir: &std::path::Path, latency_ms: u64) -> FlashStore {
        let terms = (0..40).map(|i| (format!("t{i:02}"), 20 + (i * 131) % 900));
        build_index(dir, 2000, terms).unwrap();
        FlashStore::open(
            dir,
            StoreOptions {
                latency: Duration::from_millis(latency_ms),
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_list_not_admitted_is_read_but_not_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), 0);
        let cache = RamCache::new(EvictionKind::Lru, 1 << 20);
        for _ in 0..2 {
            assert_eq!(cache.get(&store, 3, false).unwrap().outcome, Outcome::Miss);
        }
        assert_eq!(cache.used_bytes(), 0);
        assert!(cache.check_consistency());
        // Admitted, it is cached; a later lookup that would not admit it still hits.
        assert_eq!(cache.get(&store, 3, true).unwrap().outcome, Outcome::Miss);
        assert_eq!(cache.get(&store, 3, false).unwrap().outcome, Outcome::Hit);
        assert!(cache.used_bytes() > 0 && cache.check_consistency());
    }

    #[test]
    fn matches_the_simulator_for_every_policy() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), 0);
        let sizes: Vec<u64> = (0..40)
            .map(|i| u64::from(store.directory().entry(i).unwrap().len))
            .collect();
        let mut rng = data::rng::Rng::new(7);
        let trace: Vec<u32> = (0..3000)
            .map(|_| {
                let r = rng.next_u64() % 100;
                (if r < 70 { r % 8 } else { r % 40 }) as u32
            })
            .collect();
        for kind in EvictionKind::ALL {
            let cap = sizes.iter().sum::<u64>() / 4;
            let cache = RamCache::new(kind, cap);
            let mut sim = new_cache(kind, cap);
            for &id in &trace {
                let hit = cache.get(&store, id, true).unwrap().outcome == Outcome::Hit;
                assert_eq!(hit, sim.access(id, sizes[id as usize]), "{kind}");
                assert!(cache.check_consistency(), "{kind}");
            }
            assert_eq!(cache.used_bytes(), sim.used_bytes());
        }
    }

    #[test]
    fn concurrent_misses_read_once() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), 50);
        let cache = RamCache::new(EvictionKind::Lru, 1 << 20);
        let outcomes: Vec<Outcome> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| cache.get(&store, 5, true).unwrap().outcome))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Miss).count(), 1);
        assert_eq!(cache.get(&store, 5, true).unwrap().outcome, Outcome::Hit);
    }

    /// A hit while another thread holds the lock shared (as a concurrent hit does): SIEVE and
    /// S3-FIFO hits complete, LRU hits wait for the exclusive lock.
    #[test]
    fn sieve_and_s3fifo_hits_proceed_under_a_shared_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), 0);
        for kind in EvictionKind::ALL {
            let cache = RamCache::new(kind, 1 << 20);
            assert_eq!(cache.shared_hits(), kind != EvictionKind::Lru, "{kind}");
            assert_eq!(cache.get(&store, 3, true).unwrap().outcome, Outcome::Miss);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::scope(|s| {
                let held = read(&cache.inner);
                let (cache, store) = (&cache, &store);
                s.spawn(move || tx.send(cache.get(store, 3, true).unwrap().outcome));
                if cache.shared_hits() {
                    let got = rx.recv_timeout(Duration::from_secs(20));
                    assert_eq!(got, Ok(Outcome::Hit), "{kind}: hit blocked by a reader");
                    drop(held);
                } else {
                    // Cannot complete while the lock is held; the wait only bounds the check.
                    let got = rx.recv_timeout(Duration::from_millis(100));
                    assert!(
                        got.is_err(),
                        "{kind}: hit did not take the lock exclusively"
                    );
                    drop(held);
                    let got = rx.recv_timeout(Duration::from_secs(20));
                    assert_eq!(got, Ok(Outcome::Hit), "{kind}");
                }
            });
            assert!(cache.check_consistency(), "{kind}");
        }
    }

    /// Threads hitting and missing at once: every lookup is accounted once and the map stays
    /// exactly the policy's contents.
    #[test]
    fn concurrent_hits_and_misses_keep_the_map_exact() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), 0);
        let total: u64 = (0..40)
            .map(|i| u64::from(store.directory().entry(i).unwrap().len))
            .sum();
        for kind in EvictionKind::ALL {
            let cache = RamCache::new(kind, total / 3);
            let counts: Vec<[u64; 3]> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4u64)
                    .map(|t| {
                        let (cache, store) = (&cache, &store);
                        s.spawn(move || {
                            let mut rng = data::rng::Rng::new(t);
                            let mut c = [0u64; 3];
                            for _ in 0..2000 {
                                let r = rng.next_u64() % 100;
                                let id = (if r < 80 { r % 6 } else { r % 40 }) as u32;
                                c[cache.get(store, id, true).unwrap().outcome as usize] += 1;
                            }
                            c
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let sum = |i: usize| counts.iter().map(|c| c[i]).sum::<u64>();
            assert_eq!(sum(0) + sum(1) + sum(2), 8000, "{kind}");
            assert!(sum(0) > 4000, "{kind}: {counts:?}");
            assert!(cache.check_consistency(), "{kind}");
            assert!(cache.used_bytes() <= total / 3, "{kind}");
        }
    }
}
