//! One `access` on a warm cache, for every eviction policy.
//!
//! Workload: 150,000 distinct term ids queried with Zipf(0.9) popularity (ids shuffled so hot
//! terms are spread through memory). Postings sizes follow the standard size model `16 + df`,
//! `df = ceil(N (1 - exp(-f L)))`, N = 10M documents, L = 300, with corpus frequency
//! `f = 0.01 / (corpus rank + 1)` and a corpus rank independent of the query rank. Each cache
//! holds 5% of the summed bytes of all terms, as in the standard evaluation, which lands
//! LRU's miss bytes ratio between the standard evaluation's term-hash and round-robin
//! reference points; the hit ratio of each policy is printed.
//!
//! - `access/<policy>`: one warm cache.
//! - `access_8_caches/<policy>`: eight warm caches alive, accesses dealt round-robin to them
//!   (every cache sees every term: the largest memory footprint the simulator produces). The
//!   simulator's requirement is at least 20M accesses/s on one core for LRU here.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use eviction::{new_cache, Cache, EvictionKind};

const TERMS: usize = 150_000;
const STREAM: usize = 1 << 21;
const REPLICAS: usize = 8;
const ZIPF: f64 = 0.9;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Workload {
    stream: Vec<(u32, u64)>,
    capacity: u64,
}

fn workload() -> Workload {
    let mut rng = 1;
    // Term id of each popularity rank: a Fisher-Yates shuffle.
    let mut ids: Vec<u32> = (0..TERMS as u32).collect();
    for i in (1..TERMS).rev() {
        ids.swap(i, (splitmix64(&mut rng) % (i as u64 + 1)) as usize);
    }
    // Sizes by corpus rank, dealt to term ids in an order independent of `ids`.
    let mut sizes: Vec<u64> = (0..TERMS)
        .map(|corpus_rank| {
            let f = 0.01 / (corpus_rank + 1) as f64;
            16 + (10_000_000.0 * (1.0 - (-f * 300.0).exp())).ceil() as u64
        })
        .collect();
    for i in (1..TERMS).rev() {
        sizes.swap(i, (splitmix64(&mut rng) % (i as u64 + 1)) as usize);
    }
    let mut cdf: Vec<f64> = (0..TERMS)
        .scan(0.0, |sum, rank| {
            *sum += ((rank + 1) as f64).powf(-ZIPF);
            Some(*sum)
        })
        .collect();
    let total = cdf[TERMS - 1];
    cdf.iter_mut().for_each(|c| *c /= total);
    let stream = (0..STREAM)
        .map(|_| {
            let u = (splitmix64(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
            let rank = cdf.partition_point(|&c| c < u).min(TERMS - 1);
            let id = ids[rank];
            (id, sizes[id as usize])
        })
        .collect();
    Workload {
        stream,
        capacity: sizes.iter().sum::<u64>() / 20,
    }
}

/// Replays the stream once through `caches`, round-robin; returns the request hit ratio.
fn warm(caches: &mut [Box<dyn Cache>], stream: &[(u32, u64)]) -> f64 {
    let mut hits = 0;
    for (i, &(key, size)) in stream.iter().enumerate() {
        hits += u64::from(caches[i % caches.len()].access(key, size));
    }
    hits as f64 / stream.len() as f64
}

fn bench_access(c: &mut Criterion) {
    let Workload { stream, capacity } = workload();

    let mut group = c.benchmark_group("access");
    group.throughput(Throughput::Elements(1));
    for kind in EvictionKind::ALL {
        let mut caches = [new_cache(kind, capacity)];
        warm(&mut caches, &stream);
        let hit_ratio = warm(&mut caches, &stream);
        eprintln!("{kind}: warm request hit ratio {hit_ratio:.3}");
        let [cache] = &mut caches;
        let mut i = 0;
        group.bench_function(kind.name(), |b| {
            b.iter(|| {
                let (key, size) = stream[i];
                i = (i + 1) % STREAM;
                black_box(cache.access(black_box(key), size))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("access_8_caches");
    group.throughput(Throughput::Elements(1));
    for kind in EvictionKind::ALL {
        let mut caches: Vec<Box<dyn Cache>> =
            (0..REPLICAS).map(|_| new_cache(kind, capacity)).collect();
        warm(&mut caches, &stream);
        let hit_ratio = warm(&mut caches, &stream);
        eprintln!("{kind} x{REPLICAS}: warm request hit ratio {hit_ratio:.3}");
        let mut i = 0;
        group.bench_function(kind.name(), |b| {
            b.iter(|| {
                let (key, size) = stream[i];
                let hit = caches[i % REPLICAS].access(black_box(key), size);
                i = (i + 1) % STREAM;
                black_box(hit)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_access);
criterion_main!(benches);
