//! A closed-loop HTTP load generator for one replica (benchmarks only; not a test).
//!
//! `C` connections each send `GET /search` back to back over a keep-alive HTTP/1.1
//! connection, for `D` seconds, cycling through the first `Q` queries of the embedded
//! synthetic log (connection `i` starts at query `i`, stride `C`). Prints queries/s, latency
//! percentiles, the status codes, and the replica's `/stats` deltas (hits, misses, flash
//! bytes, queries shed by the concurrency limit and by the in-flight byte budget) over the
//! run.
//!
//! ```sh
//! cargo run --release -p replica --example load -- ADDR [CONNS] [SECS] [QUERIES] [OFFSET]
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use data::synth::{generate, SynthConfig};
use serde_json::Value;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(addr) = args.first() else {
        bail!("usage: load ADDR [CONNS=16] [SECS=10] [QUERIES=20000] [OFFSET=0]");
    };
    let addr: SocketAddr = addr.parse().context("ADDR")?;
    let num = |i: usize, d: usize| -> Result<usize> {
        args.get(i).map_or(Ok(d), |s| s.parse().context("a number"))
    };
    let (conns, secs, nq, offset) = (num(1, 16)?, num(2, 10)?, num(3, 20_000)?, num(4, 0)?);
    let log = generate(&SynthConfig::default());
    let queries: Vec<String> = log
        .queries
        .iter()
        .skip(offset)
        .take(nq)
        .map(|q| encode(q))
        .collect();
    if queries.is_empty() {
        bail!("no queries");
    }
    let before = stats(addr)?;
    let deadline = Instant::now() + Duration::from_secs(secs as u64);
    let start = Instant::now();
    let results: Vec<Result<(Vec<u32>, [u64; 3])>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                let queries = &queries;
                s.spawn(move || worker(addr, queries, c, conns, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("panic"))))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let after = stats(addr)?;
    let mut lat = Vec::new();
    let mut codes = [0u64; 3];
    for r in results {
        let (l, c) = r?;
        lat.extend(l);
        for i in 0..3 {
            codes[i] += c[i];
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)));
    let d = |k: &str| after[k].as_u64().unwrap_or(0) - before[k].as_u64().unwrap_or(0);
    println!(
        "{} requests in {elapsed:.1} s: {:.0} queries/s; 200: {}, 503: {}, other: {}",
        lat.len(),
        lat.len() as f64 / elapsed,
        codes[0],
        codes[1],
        codes[2]
    );
    println!(
        "latency us: p50 {} p90 {} p99 {} max {}",
        pct(0.5).unwrap_or(&0),
        pct(0.9).unwrap_or(&0),
        pct(0.99).unwrap_or(&0),
        lat.last().unwrap_or(&0)
    );
    let (hits, misses) = (d("hits"), d("misses"));
    println!(
        "lookups {}: hits {hits} misses {misses} (miss ratio {:.3}); flash {:.1} MB ({:.1} MB/s); \
         miss bytes ratio {:.3}; cache {} / {} bytes",
        d("lookups"),
        misses as f64 / (hits + misses).max(1) as f64,
        d("flash_bytes") as f64 / 1e6,
        d("flash_bytes") as f64 / 1e6 / elapsed,
        d("miss_bytes") as f64 / (d("miss_bytes") + d("hit_bytes")).max(1) as f64,
        after["cache_bytes"],
        after["cache_capacity"],
    );
    println!(
        "shed: {} by --max-inflight, {} by --inflight-bytes; in-flight bytes peak {} of {}",
        d("shed"),
        d("shed_over_budget"),
        after["inflight_bytes_peak"],
        after["inflight_bytes_limit"],
    );
    Ok(())
}

/// One connection's closed loop: latencies (us) and counts of 200 / 503 / other.
fn worker(
    addr: SocketAddr,
    queries: &[String],
    first: usize,
    stride: usize,
    deadline: Instant,
) -> Result<(Vec<u32>, [u64; 3])> {
    // The tests' keep-alive client (e2e::Conn), with a generous per-request limit.
    let mut conn = e2e::Conn::try_open(addr, Duration::from_secs(30))?;
    let mut lat = Vec::new();
    let mut codes = [0u64; 3];
    let mut i = first % queries.len();
    while Instant::now() < deadline {
        let t = Instant::now();
        conn.try_send("GET", &format!("/search?q={}&k=10", queries[i]), &[], b"")?;
        let status = conn.read_response()?.status;
        lat.push(t.elapsed().as_micros() as u32);
        codes[match status {
            200 => 0,
            503 => 1,
            _ => 2,
        }] += 1;
        i = (i + stride) % queries.len();
    }
    Ok((lat, codes))
}

fn stats(addr: SocketAddr) -> Result<Value> {
    let r = e2e::get(addr, "/stats");
    if r.status != 200 {
        bail!("/stats answered {}", r.status);
    }
    Ok(serde_json::from_str(&r.text())?)
}

/// Form-encodes a query.
fn encode(q: &str) -> String {
    let mut out = String::with_capacity(q.len() * 3);
    for b in q.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
