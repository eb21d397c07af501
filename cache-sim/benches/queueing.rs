//! Simulated queries per second of the queueing simulator on one core, trace-driven with
//! caches at R = 8 (the requirement: at least 1M).
//!
//! Workload: the embedded synthetic log's generator (200,000 queries, seed 1), sizes from
//! the standard size model over its own frequencies, LRU caches of 5% of the distinct
//! postings bytes, flash at 4 MB/s per replica (the demo's), 200 µs of CPU per query,
//! `ch-bl` and `term-vote` over the window load. Each iteration simulates all 200,000
//! queries from cold caches, closed loop with 32 clients (`closed_32`) or open loop at 60%
//! of that throughput (`open`). Criterion reports elements (queries) per second.

use std::hint::black_box;
use std::sync::Arc;

use balancer::policy::{build_policy, PolicyKind, PolicyParams};
use cache_sim::queueing::{Arrivals, QueueConfig, Router, Simulator};
use cache_sim::sim::Trace;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use data::sizes::{FreqTable, SizeModel, Sizes};
use data::synth::{generate, SynthConfig};

fn trace() -> Trace {
    let log = generate(&SynthConfig::default());
    let sizes = Sizes::Model {
        freq: FreqTable::from_pairs(log.freq),
        model: SizeModel::default(),
    };
    let n = log.queries.len();
    Trace::build(log.queries.iter().map(String::as_str), n * 4 / 5, &sizes)
}

fn bench(c: &mut Criterion) {
    let t = trace();
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
