//! `--stats-from`: each replica's `GET /stats` counters before and after the replay, and
//! what their deltas say about the cluster: the measured miss bytes ratio (Σ miss_bytes /
//! Σ (hit_bytes + miss_bytes)), flash bytes read, and each replica's share of the queries —
//! the same quantities `ballot eval` predicts by simulation.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::client::{get, BaseUrl, HttpClient};

/// Monotonic counters of `/stats` whose deltas are reported.
pub const COUNTERS: [&str; 9] = [
    "queries",
    "lookups",
    "hits",
    "misses",
    "hit_bytes",
    "miss_bytes",
    "flash_bytes",
    "uncached_reads",
    "errors",
];
/// Gauges of `/stats`, reported as read after the replay.
pub const GAUGES: [&str; 2] = ["cache_bytes", "inflight"];

/// One `/stats` answer: the named fields, 0 when absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Values of [`COUNTERS`] then [`GAUGES`].
    pub values: Vec<u64>,
}

impl Snapshot {
    /// Reads the fields out of a `/stats` JSON object.
    pub fn from_json(body: &[u8]) -> Result<Snapshot> {
        let v: Value = serde_json::from_slice(body).context("the answer is not JSON")?;
        let Some(obj) = v.as_object() else {
            bail!("the answer is not a JSON object");
        };
        if !obj.contains_key("hit_bytes") || !obj.contains_key("miss_bytes") {
            bail!("the answer has no hit_bytes/miss_bytes counters");
        }
        let values = COUNTERS
            .iter()
            .chain(GAUGES.iter())
            .map(|k| obj.get(*k).and_then(Value::as_u64).unwrap_or(0))
            .collect();
        Ok(Snapshot { values })
    }

    fn get(&self, key: &str) -> u64 {
        COUNTERS
            .iter()
            .chain(GAUGES.iter())
            .position(|k| *k == key)
            .and_then(|i| self.values.get(i).copied())
            .unwrap_or(0)
    }
}

/// GETs and parses one replica's `/stats`.
pub async fn fetch(client: &HttpClient, base: &BaseUrl, timeout: Duration) -> Result<Snapshot> {
    let url = base.stats();
    let body = get(client, &url, timeout)
        .await
        .map_err(|f| anyhow::anyhow!("GET {url} failed: {}", f.kind()))?;
    Snapshot::from_json(&body).with_context(|| format!("GET {url}"))
}

/// One replica's deltas.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicaDelta {
    /// The `--stats-from` URL.
    pub url: String,
    /// Counter deltas (after − before) and gauges (after), by name.
    pub delta: serde_json::Map<String, Value>,
    /// This replica's share of the cluster's queries (delta).
    pub query_share: f64,
    /// This replica's miss bytes ratio (delta).
    pub miss_bytes_ratio: Option<f64>,
}

/// The cluster's deltas.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStats {
    /// Per replica, in `--stats-from` order.
    pub replicas: Vec<ReplicaDelta>,
    /// Σ queries.
    pub queries: u64,
    /// Σ lookups.
    pub lookups: u64,
    /// Σ hit bytes.
    pub hit_bytes: u64,
    /// Σ miss bytes.
    pub miss_bytes: u64,
    /// Σ flash bytes read.
    pub flash_bytes: u64,
    /// Σ miss_bytes / Σ (hit_bytes + miss_bytes), None when nothing was looked up.
    pub miss_bytes_ratio: Option<f64>,
    /// Σ misses / Σ (hits + misses).
    pub miss_ratio: Option<f64>,
    /// max/mean queries per replica.
    pub imbalance: Option<f64>,
    /// The busiest replica's share of the flash bytes read (with flash the bottleneck,
    /// throughput follows it; 1/R is perfect balance).
    pub flash_share_max: Option<f64>,
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Combines before/after snapshots (same order as `urls`).
pub fn summarize(urls: &[BaseUrl], before: &[Snapshot], after: &[Snapshot]) -> ClusterStats {
    let d = |i: usize, k: &str| after[i].get(k).saturating_sub(before[i].get(k));
    let n = urls.len();
    let sum = |k: &str| (0..n).map(|i| d(i, k)).sum::<u64>();
    let queries = sum("queries");
    let (hit_bytes, miss_bytes) = (sum("hit_bytes"), sum("miss_bytes"));
    let (hits, misses) = (sum("hits"), sum("misses"));
    let replicas = (0..n)
        .map(|i| {
            let mut delta = serde_json::Map::new();
            for k in COUNTERS {
                delta.insert(k.into(), d(i, k).into());
            }
            for k in GAUGES {
                delta.insert(k.into(), after[i].get(k).into());
            }
            let (h, m) = (d(i, "hit_bytes"), d(i, "miss_bytes"));
            ReplicaDelta {
                url: urls[i].text.clone(),
                delta,
                query_share: ratio(d(i, "queries"), queries).unwrap_or(0.0),
                miss_bytes_ratio: ratio(m, h + m),
            }
        })
        .collect();
    let max_q = (0..n).map(|i| d(i, "queries")).max().unwrap_or(0);
    let flash_bytes = sum("flash_bytes");
    let max_flash = (0..n).map(|i| d(i, "flash_bytes")).max().unwrap_or(0);
    ClusterStats {
        replicas,
        queries,
        lookups: sum("lookups"),
        hit_bytes,
        miss_bytes,
        flash_bytes,
        miss_bytes_ratio: ratio(miss_bytes, hit_bytes + miss_bytes),
        miss_ratio: ratio(misses, hits + misses),
        imbalance: (queries > 0).then(|| max_q as f64 * n as f64 / queries as f64),
        flash_share_max: ratio(max_flash, flash_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(json: &str) -> Snapshot {
        Snapshot::from_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn deltas_and_ratios() {
        let urls = vec![
            BaseUrl::parse("http://a:1", "x").unwrap(),
            BaseUrl::parse("http://b:1", "x").unwrap(),
        ];
        let before = vec![
            snap(r#"{"queries":10,"hit_bytes":100,"miss_bytes":100,"cache_bytes":5}"#),
            snap(r#"{"queries":0,"hit_bytes":0,"miss_bytes":0}"#),
        ];
        let after = vec![
            snap(
                r#"{"queries":40,"hit_bytes":400,"miss_bytes":200,"flash_bytes":7,"cache_bytes":9}"#,
            ),
            snap(r#"{"queries":10,"hit_bytes":100,"miss_bytes":300,"replica":"b"}"#),
        ];
        let s = summarize(&urls, &before, &after);
        assert_eq!((s.queries, s.hit_bytes, s.miss_bytes), (40, 400, 400));
        assert_eq!(s.miss_bytes_ratio, Some(0.5));
        assert_eq!(s.flash_bytes, 7);
        assert_eq!(s.flash_share_max, Some(1.0));
        assert_eq!(s.replicas[0].query_share, 0.75);
        assert_eq!(s.replicas[0].delta["cache_bytes"], 9);
        assert_eq!(s.replicas[1].miss_bytes_ratio, Some(0.75));
        assert_eq!(s.imbalance, Some(1.5));
        assert!(Snapshot::from_json(b"[1]").is_err());
        assert!(Snapshot::from_json(b"{\"queries\":1}").is_err());
    }
}
