//! The replica's RAM cache of postings lists: a byte-capacity eviction policy from
//! `cache_sim` (the same code the simulator replays, so `ballot eval`'s hit counts are the
//! replica's), made safe for concurrent requests, with single-flight misses.
//!
//! Design (after the request-coalescing caches of groupcache and foyer): one `Mutex` guards
//! the policy's metadata, a side map `term id → Arc<Postings>` of the cached lists, and the
//! table of reads in flight. The lock is held only for the O(1) policy bookkeeping and map
//! operations, never during I/O or decoding. A miss registers a *flight*; other requests
//! missing on the same term wait on it instead of reading again, so a list is never read
//! twice concurrently. The policy accounts each list at its **stored bytes** (the bytes in
//! `sizes.parquet`). The `Cache` trait does not report its victims, so evicted lists are
//! dropped from the side map lazily: once they add up to 1/16 of the capacity, one pass
//! keeps only the keys the policy still holds (amortized O(1) per evicted list). Memory is
//! thus at most 17/16 of the capacity in stored bytes, plus lists pinned by queries in
//! flight.
//!
//! Accounting of a lookup: a *hit* found the list cached; a *miss* read it from flash; a
//! *coalesced* lookup missed but shared another request's read (it costs no flash bytes).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use cache_sim::eviction::{new_cache, Cache, EvictionKind};
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

/// Evicted lists may linger in the side map up to `capacity / SLACK` bytes, so the trim
/// (a pass over the side map) runs once per that many evicted bytes, not on every miss.
const SLACK: u64 = 16;

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
    lists: FxHashMap<u32, (Arc<Postings>, u64)>,
    list_bytes: u64,
    flights: FxHashMap<u32, Arc<Flight>>,
}

/// The concurrent RAM cache.
pub struct RamCache {
    inner: Mutex<Inner>,
    kind: EvictionKind,
    capacity: u64,
}

impl std::fmt::Debug for RamCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RamCache")
            .field("kind", &self.kind)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code path panics while holding these locks; recover anyway rather than cascade.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RamCache {
    /// An empty cache of `capacity` bytes under `kind`.
    pub fn new(kind: EvictionKind, capacity: u64) -> Self {
        RamCache {
            inner: Mutex::new(Inner {
                policy: new_cache(kind, capacity),
                lists: FxHashMap::default(),
                list_bytes: 0,
                flights: FxHashMap::default(),
            }),
            kind,
            capacity,
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

    /// Stored bytes currently cached.
    pub fn used_bytes(&self) -> u64 {
        lock(&self.inner).policy.used_bytes()
    }

    /// The list of `term_id`, from the cache or (once, however many ask) from `store`.
    pub fn get(&self, store: &FlashStore, term_id: u32) -> Result<Fetched, FetchError> {
        let flight = {
            let mut inner = lock(&self.inner);
            if inner.policy.get(term_id) {
                if let Some((list, bytes)) = inner.lists.get(&term_id) {
                    return Ok(Fetched {
                        list: list.clone(),
                        outcome: Outcome::Hit,
                        bytes: *bytes,
                        read_secs: 0.0,
                    });
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
                {
                    let mut inner = lock(&self.inner);
                    inner.policy.insert(term_id, bytes);
                    if inner.policy.contains(term_id) {
                        if let Some((_, old)) = inner.lists.insert(term_id, (list.clone(), bytes)) {
                            inner.list_bytes -= old;
                        }
                        inner.list_bytes += bytes;
                    }
                    if inner.list_bytes > inner.policy.used_bytes() + self.capacity / SLACK {
                        let Inner {
                            policy,
                            lists,
                            list_bytes,
                            ..
                        } = &mut *inner;
                        lists.retain(|k, (_, b)| {
                            let keep = policy.contains(*k);
                            if !keep {
                                *list_bytes -= *b;
                            }
                            keep
                        });
                    }
                    inner.flights.remove(&term_id);
                }
                leader.finish(Ok((list.clone(), bytes)));
                Ok(Fetched {
                    list,
                    outcome: Outcome::Miss,
                    bytes,
                    read_secs,
                })
            }
            Err(e) => {
                lock(&self.inner).flights.remove(&term_id);
                leader.finish(Err(e.clone()));
                Err(e)
            }
        }
    }

    /// Checks that every key the policy holds has its list, and that evicted lists still
    /// in the side map stay within the slack (tests).
    pub fn check_consistency(&self) -> bool {
        let inner = lock(&self.inner);
        let (mut n, mut bytes) = (0usize, 0u64);
        for (k, (_, b)) in &inner.lists {
            if inner.policy.contains(*k) {
                n += 1;
                bytes += b;
            }
        }
        n == inner.policy.len()
            && bytes == inner.policy.used_bytes()
            && inner.list_bytes <= bytes + self.capacity / SLACK
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
            lock(&self.cache.inner).flights.remove(&self.term_id);
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
                let hit = cache.get(&store, id).unwrap().outcome == Outcome::Hit;
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
                .map(|_| s.spawn(|| cache.get(&store, 5).unwrap().outcome))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Miss).count(), 1);
        assert_eq!(cache.get(&store, 5).unwrap().outcome, Outcome::Hit);
    }
}
