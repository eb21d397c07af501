//! One routing decision per policy: 8 replicas, a 150,000-term voting table, term sizes for
//! every table term, and a typical 3-term query (two table terms, one missing term).
//! Target: median <= 200 ns for `table`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use balancer::{build_policy, PolicyKind, PolicyParams, QueryKey, StaticLoad, TermBytes};
use criterion::{criterion_group, criterion_main, Criterion};
use data::hash::term_hash;
use data::rng::Rng;
use data::table::{TableRow, VotingTable};
use data::tokenizer::Tokens;

const REPLICAS: usize = 8;
const TERMS: usize = 150_000;

fn table() -> VotingTable {
    let mut rng = Rng::new(5);
    let mut rows = Vec::with_capacity(TERMS + TERMS / 10);
    for t in 0..TERMS {
        let a = rng.below(REPLICAS as u64) as u16;
        rows.push(TableRow {
            term: format!("term{t}"),
            replica: a,
            weight: 1.0 + rng.unit() as f32,
        });
        if t % 10 == 0 {
            rows.push(TableRow {
                term: format!("term{t}"),
                replica: (a + 3) % REPLICAS as u16,
                weight: rng.unit() as f32,
            });
        }
    }
    VotingTable {
        replicas: REPLICAS as u16,
        rows,
        metadata: BTreeMap::new(),
    }
}

fn route(c: &mut Criterion) {
    let term_bytes: TermBytes = (0..TERMS)
        .map(|t| {
            (
                term_hash(&format!("term{t}")),
                16 + (t as u64 * 31) % 100_000,
            )
        })
        .collect();
    let params = PolicyParams::new(REPLICAS)
        .with_table(Arc::new(table()))
        .with_term_bytes(Arc::new(term_bytes));
    let mut tokens = Tokens::new();
    tokens.tokenize("term120 term77710 zebra");
    let mut hashes = Vec::new();
    let qh = balancer::hash_tokens(&tokens, &mut hashes);
    let key = QueryKey::new(qh, &hashes);
    let load = StaticLoad::new(vec![120, 131, 118, 125, 122, 119, 127, 124]);
    let mut group = c.benchmark_group("route");
    for kind in PolicyKind::ALL {
        let policy = build_policy(kind, &params).expect("valid params");
        let mut rng = Rng::new(1);
        group.bench_function(kind.name(), |b| {
            b.iter(|| policy.route(black_box(&key), black_box(&load), &mut rng))
        });
    }
    group.finish();
}

criterion_group!(benches, route);
criterion_main!(benches);
