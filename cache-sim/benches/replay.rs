//! Term lookups per second of the trace simulator on one core (what `ballot eval` reports
//! as `lookups_per_sec`), with a floor that fails the bench on a 2x regression.
//!
//! Workload: the embedded synthetic log's generator (200,000 queries, seed 1), sizes from
//! the standard size model over its own frequencies, R = 8 LRU caches of 5% of the distinct
//! postings bytes, the window load; `round-robin` and `ch-bl`. Each iteration replays
//! the whole trace from cold caches. Criterion reports elements (lookups) per second.
//!
//! The floor: before measuring, the best of three replays of each policy must reach
//! [`FLOOR_LOOKUPS_PER_SEC`] in an optimized build (skipped with debug assertions, whose
//! code is many times slower by design). It runs in `cargo test --release --all-targets`
//! too, where each bench runs once.

mod support;

use std::hint::black_box;
use std::sync::Arc;

use balancer::policy::{build_policy, PolicyKind, PolicyParams};
use cache_sim::sim::{replay, NoObserver, SimConfig, SimLoad};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use eviction::EvictionKind;

/// Single-thread term lookups per second the replay must reach: about half of what this
/// machine class measures (docs/results.md, "Simulator speed"), so a 2x slowdown fails.
const FLOOR_LOOKUPS_PER_SEC: f64 = 10e6;

fn bench(c: &mut Criterion) {
    let t = support::synthetic_trace();
    let cfg = SimConfig {
        admission: None,
        replicas: 8,
        capacity_bytes: t.capacity_for(0.05),
        eviction: EvictionKind::Lru,
        window: cache_sim::sim::replay::DEFAULT_WINDOW,
        seed: 1,
        load: SimLoad::Queries,
    };
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    let lookups = replay(
        &t,
        build_policy(PolicyKind::RoundRobin, &params)
            .expect("policy")
            .as_ref(),
        &cfg,
        &mut NoObserver,
    )
    .total_lookups;
    group.throughput(Throughput::Elements(lookups));
    for kind in [PolicyKind::RoundRobin, PolicyKind::ChBl] {
        let run = || {
            let policy = build_policy(kind, &params).expect("policy");
            replay(&t, policy.as_ref(), &cfg, &mut NoObserver)
        };
        let best = (0..3).map(|_| run().lookups_per_sec()).fold(0.0, f64::max);
        eprintln!("replay/{kind}: {:.1}M lookups/s (best of 3)", best / 1e6);
        if support::benchmarking() {
            assert!(
                best >= FLOOR_LOOKUPS_PER_SEC,
                "replay/{kind}: {:.1}M lookups/s is below the floor of {:.0}M",
                best / 1e6,
                FLOOR_LOOKUPS_PER_SEC / 1e6
            );
        }
        group.bench_function(kind.name(), |b| b.iter(|| black_box(run())));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
