//! Routing never allocates: a counting global allocator checks that, once built, every
//! policy makes zero allocations across 10,000 `route` calls — including `table` with a
//! 150,000-term table and a 3-term query. The HTTP balancer's routing step has its own test
//! in `balancer-server`.

use std::sync::Arc;

use balancer::{build_policy, PolicyKind, PolicyParams, QueryKey, StaticLoad, TermBytes};
use data::hash::term_hash;
use data::rng::Rng;

#[path = "support/alloc.rs"]
mod support;
use support::{allocations, big_table, REPLICAS, TERMS};

#[test]
fn route_never_allocates() {
    // The counter counts.
    let start = allocations();
    let probe = std::hint::black_box(vec![1u8; 3]);
    assert!(allocations() > start && probe.len() == 3);

    let term_bytes: TermBytes = (0..TERMS)
        .map(|t| (term_hash(&format!("term{t}")), 16 + t as u64))
        .collect();
    let params = PolicyParams::new(REPLICAS)
        .with_table(Arc::new(big_table()))
        .with_term_bytes(Arc::new(term_bytes));
    // Two table terms and one missing term; one replica dead; loads near the cap so that
    // overflow and random jumps happen too.
    let queries: Vec<(u64, Vec<u64>)> = (0..64)
        .map(|i| {
            let terms = [
                format!("term{}", i * 997 % TERMS),
                format!("term{}", i * 7919 % TERMS),
                format!("missing{i}"),
            ];
            let hashes: Vec<u64> = terms.iter().map(|t| term_hash(t)).collect();
            (term_hash(&terms.join(" ")), hashes)
        })
        .collect();
    for kind in PolicyKind::ALL {
        let policy = build_policy(kind, &params).expect("valid params");
        let mut load = StaticLoad::with_live(
            vec![10, 30, 12, 9, 11, 40, 10, 13],
            vec![true, true, true, true, true, false, true, true],
        );
        let mut rng = Rng::new(1);
        let before = allocations();
        for i in 0..10_000 {
            let (qh, hashes) = &queries[i % queries.len()];
            let d = policy
                .route(&QueryKey::new(*qh, hashes), &load, &mut rng)
                .expect("a live replica");
            let r = usize::from(d.replica);
            load.loads[r] += 1;
            if i % 16 == 15 {
                // Drain a little, like a trailing window.
                for l in load.loads.iter_mut() {
                    *l = l.saturating_sub(1);
                }
            }
        }
        let after = allocations();
        assert_eq!(after - before, 0, "{kind} allocated during routing");
    }
}
