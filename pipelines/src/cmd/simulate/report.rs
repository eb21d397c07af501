//! `ballot simulate`'s outputs: the table on stdout (with the simulator's own speed), the
//! JSON document and the latency-against-load chart. `sat_flash` is the saturation phase's
//! flash use (bytes read over bandwidth × time, the mean over servers), `stolen` its share
//! of queries sent past their replica by late binding.

use std::path::Path;

use anyhow::Result;
use cache_sim::queueing::QueueConfig;
use cache_sim::sim::Trace;
use serde_json::json;

use super::{RouterResult, SimulateArgs};
use crate::chart::{line_chart, Series};

/// Prints one row per policy, then the simulator's speed.
pub fn print_table(results: &[RouterResult]) {
    println!(
        "{:<14} {:>10} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>10} {:>9} {:>8} {:>10}",
        "policy",
        "sat_q/s",
        "sat_flash",
        "stolen",
        "offered",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "overflow",
        "shed",
        "miss_bytes",
        "flash_max",
        "util_max",
        "queue_avg"
    );
    for r in results {
        let l = &r.latency;
        let util_max = l.utilisation.iter().copied().fold(0.0, f64::max);
        let s = &r.saturation;
        println!(
            "{:<14} {:>10.1} {:>9.3} {:>7.4} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.4} {:>7.4} {:>10.4} {:>9.3} {:>8.3} {:>6.2}/{:<3}",
            r.policy,
            s.throughput_qps,
            s.flash_use_mean(),
            s.stolen_share,
            l.offered_qps.unwrap_or(0.0),
            l.latency_ms.p50,
            l.latency_ms.p99,
            l.latency_ms.p999,
            l.overflow_share,
            l.error_share,
            l.miss_bytes_ratio,
            l.flash_share_max,
            util_max,
            l.queue_mean_all,
            l.queue_max_all
        );
    }
    // The timed phases only (an instant warm-up is a plain trace replay).
    let (queries, wall) = results
        .iter()
        .flat_map(|r| [&r.saturation, &r.latency])
        .fold((0u64, 0.0f64), |(q, w), p| (q + p.sent, w + p.wall_seconds));
    if wall > 0.0 {
        println!(
            "simulated {:.2}M queries/s in the timed phases ({queries} queries in {wall:.2} s \
             of one thread)",
            queries as f64 / wall / 1e6
        );
    }
}

/// Writes the configuration and every result.
pub fn write_json(
    path: &Path,
    args: &SimulateArgs,
    label: &str,
    trace: &Trace,
    cfg: &QueueConfig,
    results: &[RouterResult],
) -> Result<()> {
    let doc = json!({
        "config": {
            "log": label,
            "queries": trace.len(),
            "train_queries": trace.train_len,
            "test_queries": trace.test_len(),
            "cache_frac": args.cache.cache_frac,
            "eps": args.eps,
            "concurrency": args.concurrency,
            "rate": results.first().and_then(|r| r.latency.offered_qps),
            "load_frac": args.load_frac,
            "warmup": format!("{:?}", args.warmup).to_lowercase(),
            "arrivals": format!("{:?}", args.arrivals).to_lowercase(),
            "shard_routing": format!("{:?}", args.shard_routing).to_lowercase(),
            "simulator": cfg,
        },
        "results": results,
    });
    crate::json::write_json(path, &doc)
}

/// p99 latency against offered load, one curve per policy. Points where a policy is past
/// its saturation (answering less than 95% of the offered rate, or shedding over 1%) are
/// left out: their latency only measures how long the run was.
pub fn draw_sweep(path: &Path, args: &SimulateArgs, results: &[RouterResult]) -> Result<()> {
    let mut series: Vec<Series> = results
        .iter()
        .map(|r| Series {
            name: r.policy.clone(),
            points: r
                .sweep
                .iter()
                .filter(|p| p.throughput_qps >= 0.95 * p.rate && p.error_share <= 0.01)
                .map(|p| (p.rate, p.latency_ms.p99))
                .collect(),
            dashed: false,
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    line_chart(
        path,
        &format!(
            "p99 latency against offered load (R = {}, {} MB/s flash, simulated)",
            args.replicas, args.flash_read_mbps
        ),
        "offered load (queries/s)",
        "p99 latency (ms)",
        &mut series,
    )
}
