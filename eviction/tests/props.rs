//! Property tests of the eviction policies, run for every variant of [`EvictionKind::ALL`]:
//! byte accounting and capacity invariants on random operation sequences, LRU against a
//! timestamp model, the reported victims and shared hits against the plain calls, and the
//! registry (`new_cache`, `FromStr`, `Display`, serde names).
//!
//! Step-by-step equivalence of every policy with its slow reference implementation lives
//! next to those implementations, in `golden.rs`.

use std::collections::HashMap;

use eviction::{new_cache, Cache, EvictionKind, SharedGet, UnknownEviction};
use proptest::prelude::*;
use serde::de::{value::Error as DeError, Deserialize, IntoDeserializer};

#[derive(Clone, Copy, Debug)]
enum Op {
    Get(u32),
    Insert(u32, u64),
    Access(u32, u64),
    /// `contains(key)` must agree with an immediately following `get(key)`.
    Probe(u32),
}

const KEYS: u32 = 64;

fn op(max_size: u64) -> impl Strategy<Value = Op> {
    // Sparse keys up to 5000 too, so the per-key vectors grow mid-sequence.
    let key = prop_oneof![4 => 0..KEYS, 1 => (0..KEYS).prop_map(|k| k * 79)];
    prop_oneof![
        1 => key.clone().prop_map(Op::Get),
        1 => (key.clone(), 0..=max_size).prop_map(|(k, s)| Op::Insert(k, s)),
        3 => (key.clone(), 0..=max_size).prop_map(|(k, s)| Op::Access(k, s)),
        1 => key.prop_map(Op::Probe),
    ]
}

/// A capacity, and operations whose sizes reach up to ~1.5x the capacity.
fn workload() -> impl Strategy<Value = (u64, Vec<Op>)> {
    prop_oneof![0u64..64, 64u64..5_000, Just(u64::MAX)].prop_flat_map(|capacity| {
        let max_size = capacity.saturating_add(capacity / 2).saturating_add(1);
        (Just(capacity), prop::collection::vec(op(max_size), 1..300))
    })
}

/// Runs `ops` on a cache of `kind`, checking the invariants after every step.
fn check_invariants(kind: EvictionKind, capacity: u64, ops: &[Op]) {
    let mut cache = new_cache(kind, capacity);
    assert_eq!((cache.kind(), cache.capacity()), (kind, capacity));
    assert!(cache.is_empty());
    // The size each key was cached with: set when an insert finds the key absent.
    let mut cached_size: HashMap<u32, u64> = HashMap::new();
    let mut keys: Vec<u32> = Vec::new();
    for (step, &op) in ops.iter().enumerate() {
        let at = || format!("{kind}, capacity {capacity}, step {step}: {op:?}");
        let insert = |cache: &mut Box<dyn Cache>, sizes: &mut HashMap<u32, u64>, k, s| {
            let was_cached = cache.contains(k);
            let (used, len) = (cache.used_bytes(), cache.len());
            cache.insert(k, s);
            if was_cached {
                assert_eq!((cache.used_bytes(), cache.len()), (used, len), "{}", at());
            } else if s > capacity {
                // Never cached, and nothing else is disturbed.
                assert!(!cache.contains(k), "{}", at());
                assert_eq!((cache.used_bytes(), cache.len()), (used, len), "{}", at());
            } else {
                // Every policy admits an object that fits.
                assert!(cache.contains(k), "{}", at());
                sizes.insert(k, s);
            }
        };
        keys.push(match op {
            Op::Get(k) | Op::Probe(k) | Op::Insert(k, _) | Op::Access(k, _) => k,
        });
        match op {
            Op::Get(k) => {
                let was_cached = cache.contains(k);
                assert_eq!(cache.get(k), was_cached, "{}", at());
            }
            Op::Probe(k) => {
                let contained = cache.contains(k);
                assert_eq!(cache.get(k), contained, "{}", at());
            }
            Op::Insert(k, s) => insert(&mut cache, &mut cached_size, k, s),
            Op::Access(k, s) => {
                let was_cached = cache.contains(k);
                if cache.get(k) {
                    assert!(was_cached, "{}", at());
                } else {
                    assert!(!was_cached, "{}", at());
                    insert(&mut cache, &mut cached_size, k, s);
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let cached: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| cache.contains(k))
            .collect();
        let bytes: u64 = cached.iter().map(|k| cached_size[k]).sum();
        assert!(cache.used_bytes() <= capacity, "{}", at());
        assert_eq!(cache.used_bytes(), bytes, "{}", at());
        assert_eq!(cache.len(), cached.len(), "{}", at());
        assert_eq!(cache.is_empty(), cached.is_empty(), "{}", at());
    }
}

/// LRU as "evict the smallest last-use time": a different formulation from both the
/// linked-list policy and the `Vec`-ordered reference in `eviction_golden.rs`.
struct TimestampLru {
    capacity: u64,
    clock: u64,
    /// key -> (size, last use)
    objects: HashMap<u32, (u64, u64)>,
}

impl TimestampLru {
    fn get(&mut self, key: u32) -> bool {
        self.clock += 1;
        match self.objects.get_mut(&key) {
            Some(object) => {
                object.1 = self.clock;
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, key: u32, size: u64) {
        if self.get(key) || size > self.capacity {
            return;
        }
        while self.capacity - self.objects.values().map(|o| o.0).sum::<u64>() < size {
            let oldest = self
                .objects
                .iter()
                .min_by_key(|(_, o)| o.1)
                .map(|(&k, _)| k);
            self.objects.remove(&oldest.unwrap());
        }
        self.objects.insert(key, (size, self.clock));
    }
}

/// Runs `ops` on two caches of `kind` in lockstep: one through the plain calls, one through
/// [`Cache::insert_evicting`] and (where the policy has it) [`Cache::get_shared`]. Every
/// answer and the cached set must agree, and the reported victims must be exactly the keys
/// that stopped being cached, each once.
fn check_reports_and_shared_hits(kind: EvictionKind, capacity: u64, ops: &[Op]) {
    let mut plain = new_cache(kind, capacity);
    let mut reporting = new_cache(kind, capacity);
    let shared = reporting.get_shared(0) != SharedGet::Exclusive;
    assert_eq!(shared, kind != EvictionKind::Lru, "{kind}");
    let mut keys: Vec<u32> = Vec::new();
    let get = |c: &mut Box<dyn Cache>, k: u32| match c.get_shared(k) {
        SharedGet::Hit => true,
        SharedGet::Miss => false,
        SharedGet::Exclusive => c.get(k),
    };
    for (step, &op) in ops.iter().enumerate() {
        let at = || format!("{kind}, capacity {capacity}, step {step}: {op:?}");
        let k = match op {
            Op::Get(k) | Op::Probe(k) | Op::Insert(k, _) | Op::Access(k, _) => k,
        };
        keys.push(k);
        keys.sort_unstable();
        keys.dedup();
        let before: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| reporting.contains(k))
            .collect();
        let mut victims = Vec::new();
        match op {
            Op::Get(k) | Op::Probe(k) => {
                assert_eq!(get(&mut reporting, k), plain.get(k), "{}", at())
            }
            Op::Insert(k, s) => {
                plain.insert(k, s);
                reporting.insert_evicting(k, s, &mut |v| victims.push(v));
            }
            Op::Access(k, s) => {
                let hit = get(&mut reporting, k);
                if !hit {
                    reporting.insert_evicting(k, s, &mut |v| victims.push(v));
                }
                assert_eq!(plain.access(k, s), hit, "{}", at());
            }
        }
        let after: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| reporting.contains(k))
            .collect();
        let mut gone: Vec<u32> = before
            .iter()
            .copied()
            .filter(|k| !after.contains(k))
            .collect();
        let mut reported = victims.clone();
        reported.sort_unstable();
        gone.sort_unstable();
        assert_eq!(reported, gone, "{}: reported {victims:?}", at());
        let plain_cached: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&k| plain.contains(k))
            .collect();
        assert_eq!(after, plain_cached, "{}", at());
        assert_eq!(reporting.used_bytes(), plain.used_bytes(), "{}", at());
        assert_eq!(reporting.len(), plain.len(), "{}", at());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reported_victims_and_shared_hits_match_the_plain_calls((capacity, ops) in workload()) {
        for kind in EvictionKind::ALL {
            check_reports_and_shared_hits(kind, capacity, &ops);
        }
    }

    #[test]
    fn invariants_hold_for_every_policy((capacity, ops) in workload()) {
        for kind in EvictionKind::ALL {
            check_invariants(kind, capacity, &ops);
        }
    }

    #[test]
    fn lru_matches_a_timestamp_model((capacity, ops) in workload()) {
        let mut cache = new_cache(EvictionKind::Lru, capacity);
        let mut model = TimestampLru { capacity, clock: 0, objects: HashMap::new() };
        for op in ops {
            match op {
                Op::Get(k) | Op::Probe(k) => prop_assert_eq!(cache.get(k), model.get(k)),
                Op::Insert(k, s) => {
                    cache.insert(k, s);
                    model.insert(k, s);
                }
                Op::Access(k, s) => {
                    let hit = model.get(k);
                    if !hit {
                        model.insert(k, s);
                    }
                    prop_assert_eq!(cache.access(k, s), hit);
                }
            }
            let used: u64 = model.objects.values().map(|o| o.0).sum();
            prop_assert_eq!(cache.used_bytes(), used);
            prop_assert_eq!(cache.len(), model.objects.len());
            for &k in model.objects.keys() {
                prop_assert!(cache.contains(k));
            }
        }
    }
}

#[test]
fn every_kind_builds_and_round_trips_its_name() {
    for kind in EvictionKind::ALL {
        let mut cache = new_cache(kind, 100);
        assert_eq!(cache.kind(), kind);
        assert_eq!(cache.capacity(), 100);
        assert!(!cache.access(7, 60));
        assert!(cache.access(7, 60));
        assert_eq!((cache.used_bytes(), cache.len()), (60, 1));

        let name = kind.to_string();
        assert_eq!(name, kind.name());
        assert_eq!(name.parse::<EvictionKind>(), Ok(kind));
        let from_serde: Result<_, DeError> =
            EvictionKind::deserialize(name.as_str().into_deserializer());
        assert_eq!(from_serde, Ok(kind));
    }
    let names: Vec<&str> = EvictionKind::ALL.map(EvictionKind::name).to_vec();
    assert_eq!(names, ["lru", "sieve", "s3fifo"]);
}

#[test]
fn unknown_names_are_rejected_with_the_valid_ones() {
    for bad in ["", "LRU", "s3-fifo", "arc"] {
        let err = bad.parse::<EvictionKind>().unwrap_err();
        assert_eq!(err, UnknownEviction(bad.to_owned()));
        assert!(err.to_string().contains("lru, sieve, s3fifo"), "{err}");
        let from_serde: Result<_, DeError> = EvictionKind::deserialize(bad.into_deserializer());
        assert!(from_serde.is_err(), "serde accepted {bad:?}");
    }
}

#[test]
fn zero_capacity_caches_only_empty_objects() {
    for kind in EvictionKind::ALL {
        let mut cache = new_cache(kind, 0);
        cache.insert(1, 1);
        assert!(!cache.contains(1) && cache.is_empty());
        cache.insert(2, 0);
        assert!(cache.contains(2) && cache.used_bytes() == 0);
    }
}
