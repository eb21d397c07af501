//! Property tests of the routing invariants: decisions go to live replicas, bounded
//! policies respect the cap, consistent hashing is stable and minimally disruptive.

use std::collections::BTreeMap;
use std::sync::Arc;

use balancer::ring::Ring;
use balancer::{build_policy, load_cap, LoadView, PolicyKind, PolicyParams, QueryKey, StaticLoad};
use data::rng::Rng;
use data::table::{TableRow, VotingTable};
use proptest::prelude::*;

const BOUNDED: [PolicyKind; 4] = [
    PolicyKind::ChBl,
    PolicyKind::RjCh,
    PolicyKind::TermVote,
    PolicyKind::Table,
];

/// A table over `replicas` replicas for terms `t0..t{terms}`: each term votes for one or two
/// replicas, some with weight 0.
fn random_table(replicas: usize, terms: usize, seed: u64) -> VotingTable {
    let mut rng = Rng::new(seed);
    let mut rows = Vec::new();
    for t in 0..terms {
        let a = rng.below(replicas as u64) as u16;
        let w = (rng.below(4) as f32) * 0.5;
        rows.push(TableRow {
            term: format!("t{t}"),
            replica: a,
            weight: w,
        });
        if replicas > 1 && rng.below(3) == 0 {
            let b = (a + 1) % replicas as u16;
            rows.push(TableRow {
                term: format!("t{t}"),
                replica: b,
                weight: rng.unit() as f32,
            });
        }
    }
    VotingTable {
        replicas: replicas as u16,
        rows,
        metadata: BTreeMap::new(),
    }
}

fn params(replicas: usize, eps: f64, seed: u64) -> PolicyParams {
    // Terms t0..t39 are in the table; queries also use t40..t59, which are not.
    PolicyParams {
        eps,
        ..PolicyParams::new(replicas)
    }
    .with_table(Arc::new(random_table(replicas, 40, seed)))
}

fn term_hashes(ids: &[u8]) -> Vec<u64> {
    ids.iter()
        .map(|i| data::hash::term_hash(&format!("t{i}")))
        .collect()
}

fn scenario() -> impl Strategy<Value = (usize, Vec<u64>, Vec<bool>, f64, u64)> {
    (1usize..=16).prop_flat_map(|r| {
        (
            Just(r),
            prop::collection::vec(0u64..50, r),
            prop::collection::vec(prop::bool::weighted(0.8), r),
            prop_oneof![Just(0.0), Just(0.05), 0.0f64..1.0],
            any::<u64>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every decision is a live replica when one is live (and there is none when none is),
    /// and bounded policies never pick a replica at or over the cap while a live replica is
    /// under it.
    #[test]
    fn decisions_are_live_and_bounded(
        (r, loads, live, eps, seed) in scenario(),
        queries in prop::collection::vec(prop::collection::vec(0u8..60, 0..6), 1..20),
    ) {
        let load = StaticLoad::with_live(loads, live);
        let live_count = load.live_count();
        let cap = load_cap(eps, load.total(), live_count);
        let some_under = (0..r).any(|i| load.is_live(i) && load.load(i) < cap);
        let p = params(r, eps, seed);
        for kind in PolicyKind::ALL {
            let policy = build_policy(kind, &p).expect("valid params");
            let mut rng = Rng::new(seed);
            for q in &queries {
                let hashes = term_hashes(q);
                let qh = hashes.iter().fold(0u64, |a, &h| data::hash::mix64(a ^ h));
                let d = policy.route(&QueryKey::new(qh, &hashes), &load, &mut rng);
                let Some(d) = d else {
                    prop_assert_eq!(live_count, 0, "{} routed nowhere", kind);
                    continue;
                };
                prop_assert!(live_count > 0, "{} routed with no live replica", kind);
                let rep = usize::from(d.replica);
                prop_assert!(rep < r && load.is_live(rep), "{} chose {} ", kind, rep);
                if BOUNDED.contains(&kind) && some_under {
                    prop_assert!(load.load(rep) < cap, "{} chose {} at load {} >= cap {}",
                        kind, rep, load.load(rep), cap);
                }
            }
        }
    }

    /// With every replica live and idle, query-hash and ch-bl send a query to the same
    /// replica every time, whatever the rng.
    #[test]
    fn ring_policies_are_deterministic(r in 1usize..=64, qh in any::<u64>(), seed in any::<u64>()) {
        let p = PolicyParams::new(r);
        let load = StaticLoad::idle(r);
        let qh_policy = build_policy(PolicyKind::QueryHash, &p).expect("valid");
        let chbl = build_policy(PolicyKind::ChBl, &p).expect("valid");
        let key = QueryKey::new(qh, &[]);
        let first = qh_policy.route(&key, &load, &mut Rng::new(seed));
        prop_assert!(first.is_some());
        let mut rng = Rng::new(seed ^ 1);
        for _ in 0..5 {
            prop_assert_eq!(qh_policy.route(&key, &load, &mut rng), first);
            prop_assert_eq!(chbl.route(&key, &load, &mut rng), first);
        }
    }

    /// Every ring has exactly `vnodes` (>= 100) points per replica.
    #[test]
    fn ring_has_at_least_100_vnodes_per_replica(r in 1usize..=64, vnodes in 100usize..400) {
        let ring = Ring::new(r, vnodes).expect("valid ring");
        prop_assert_eq!(ring.len(), r * vnodes);
        for i in 0..r {
            prop_assert_eq!(ring.points_of(i), vnodes);
        }
    }
}

/// Removing one replica moves only the queries that were on it (10,000 queries, for
/// query-hash and for ch-bl with no load), and spreads them over the others.
#[test]
fn removing_a_replica_moves_only_its_queries() {
    let r = 8;
    let p = PolicyParams::new(r);
    let mut rng = Rng::new(42);
    let keys: Vec<u64> = (0..10_000).map(|_| rng.next_u64()).collect();
    for kind in [PolicyKind::QueryHash, PolicyKind::ChBl] {
        let policy = build_policy(kind, &p).expect("valid");
        let all = StaticLoad::idle(r);
        let before: Vec<u16> = keys
            .iter()
            .map(|&k| {
                policy
                    .route(&QueryKey::new(k, &[]), &all, &mut rng)
                    .unwrap()
                    .replica
            })
            .collect();
        let mut per = [0usize; 8];
        for &b in &before {
            per[usize::from(b)] += 1;
        }
        assert!(
            per.iter().all(|&c| (800..1700).contains(&c)),
            "{kind}: {per:?}"
        );
        for gone in 0..r {
            let mut live = vec![true; r];
            live[gone] = false;
            let without = StaticLoad::with_live(vec![0; r], live);
            let mut moved_to = [0usize; 8];
            for (&k, &b) in keys.iter().zip(&before) {
                let d = policy
                    .route(&QueryKey::new(k, &[]), &without, &mut rng)
                    .unwrap()
                    .replica;
                if usize::from(b) == gone {
                    assert_ne!(usize::from(d), gone);
                    moved_to[usize::from(d)] += 1;
                } else {
                    assert_eq!(d, b, "{kind}: key {k:#x} moved off live replica {b}");
                }
            }
            let spread = moved_to.iter().filter(|&&c| c > 0).count();
            assert!(
                spread >= 4,
                "{kind}: replica {gone}'s queries went to {moved_to:?}"
            );
        }
    }
}

/// Bounded policies under a live stream: with each decision adding load, the maximum load
/// stays within the cap of the final total (the bounded-loads guarantee).
#[test]
fn bounded_policies_keep_max_load_near_mean() {
    let r = 8;
    let p = params(r, 0.05, 7);
    let mut q = Rng::new(3);
    for kind in BOUNDED {
        let policy = build_policy(kind, &p).expect("valid");
        let mut load = StaticLoad::idle(r);
        let mut rng = Rng::new(1);
        for _ in 0..5_000 {
            // Skewed terms: t0 appears in every query.
            let ids = [0u8, (q.below(60)) as u8];
            let hashes = term_hashes(&ids);
            let d = policy
                .route(&QueryKey::new(hashes[1], &hashes), &load, &mut rng)
                .unwrap();
            load.loads[usize::from(d.replica)] += 1;
        }
        let max = *load.loads.iter().max().expect("non-empty");
        let cap = load_cap(0.05, load.total(), r);
        assert!(
            max <= cap,
            "{kind}: max {max} > cap {cap} ({:?})",
            load.loads
        );
    }
}
