//! Simulated queries per second of the queueing simulator on one core, trace-driven with
//! caches at R = 8, with a floor that fails the bench on a 2x regression.
//!
//! Workload: the embedded synthetic log's generator (200,000 queries, seed 1), sizes from
//! the standard size model over its own frequencies, LRU caches of 5% of the distinct
//! postings bytes, flash at 4 MB/s per replica (the demo's), 200 µs of CPU per query,
//! `ch-bl` and `term-vote` over the window load. Each iteration simulates all 200,000
//! queries from cold caches, closed loop with 32 clients (`closed_32`) or open loop at 60%
//! of that throughput (`open`). Criterion reports elements (queries) per second.
//!
//! The floor: the best of three closed-loop runs of each policy must simulate
//! [`FLOOR_QUERIES_PER_SEC`] in an optimized build (skipped with debug assertions). It runs
//! in `cargo test --release --all-targets` too, where each bench runs once.

mod support;

use std::hint::black_box;
use std::sync::Arc;

use balancer::policy::{build_policy, PolicyKind, PolicyParams};
use cache_sim::queueing::{Arrivals, QueueConfig, Router, Simulator};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Simulated queries per second a closed-loop run must reach on one core: under half of
/// what this machine class measures (docs/results.md, "Simulator speed").
const FLOOR_QUERIES_PER_SEC: f64 = 0.5e6;

fn bench(c: &mut Criterion) {
    let t = support::synthetic_trace();
    let mut cfg = QueueConfig::new(8, t.capacity_for(0.05));
    cfg.replica.flash_read_mbps = Some(4.0);
    cfg.replica.cpu_us = 200.0;
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.throughput(Throughput::Elements(t.len() as u64));
    for kind in [PolicyKind::ChBl, PolicyKind::TermVote] {
        let policy = build_policy(kind, &params).expect("policy");
        let closed = Arrivals::Closed { clients: 32 };
        let run = |arrivals: &Arrivals| {
            let mut sim =
                Simulator::new(Some(&t), Router::Policy(policy.as_ref()), &cfg).expect("config");
            sim.run(0..t.len(), arrivals).expect("run")
        };
        let saturation = run(&closed).throughput_qps;
        let best = (0..3)
            .map(|_| run(&closed).sim_queries_per_sec)
            .fold(0.0, f64::max);
        eprintln!(
            "simulate/{kind}: {:.2}M simulated queries/s (best of 3)",
            best / 1e6
        );
        if support::benchmarking() {
            assert!(
                best >= FLOOR_QUERIES_PER_SEC,
                "simulate/{kind}: {:.2}M simulated queries/s is below the floor of {:.1}M",
                best / 1e6,
                FLOOR_QUERIES_PER_SEC / 1e6
            );
        }
        let open = Arrivals::Fixed {
            rate: 0.6 * saturation,
        };
        group.bench_function(format!("closed_32/{kind}"), |b| {
            b.iter(|| black_box(run(&closed)))
        });
        group.bench_function(format!("open/{kind}"), |b| b.iter(|| black_box(run(&open))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
