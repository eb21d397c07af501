//! The demo's report: `report.md` (the simulated table, the live side-by-side table and
//! what every number means) and the live SVG charts.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::live::{LiveReport, LiveRow};
use crate::chart::{bar_chart, Bars};
use crate::cmd::eval::EvalReport;

/// Renders `report.md`.
pub fn render(report: &EvalReport, live: Option<&LiveReport>) -> Result<String> {
    let c = &report.config;
    let mut md = String::new();
    writeln!(
        md,
        "# ballot demo: cache misses by routing policy, simulated and measured\n\n\
         ## Simulated: every policy, three cache sizes\n"
    )?;
    writeln!(
        md,
        "Log: {} — {} queries ({} train, {} test), {} distinct terms, {} bytes of postings. \
         R = {} replicas, {} caches, load bound eps = {} over a trailing window of {} queries.\n",
        c["log"],
        c["queries"],
        c["train_queries"],
        c["test_queries"],
        c["distinct_terms"],
        c["distinct_postings_bytes"],
        c["replicas"],
        c["eviction"].as_str().unwrap_or("?"),
        c["eps"],
        c["window"]
    )?;
    writeln!(md, "| policy | cache frac | miss bytes ratio | miss ratio | flash bytes/query | imbalance | imbalance p99 (window) |")?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    for r in &report.output.results {
        writeln!(
            md,
            "| {} | {} | {:.4} | {:.4} | {:.0} | {:.3} | {:.3} |",
            r.policy,
            r.cache_frac,
            r.sim.miss_bytes_ratio,
            r.sim.miss_ratio,
            r.sim.flash_bytes_per_query,
            r.sim.imbalance,
            r.sim.imbalance_p99_window
        )?;
    }
    for b in &report.output.bounds {
        writeln!(
            md,
            "| {} (bound) | {} | {:.4} | | | | |",
            b.name, b.cache_frac, b.miss_bytes_ratio
        )?;
    }
    writeln!(md, "\n![miss bytes ratio by policy](eval.svg)\n")?;
    writeln!(md, "The `table` policy routes by the voting table `ballot train` learned from the train part (`table.parquet`; how training went: `train.json`, ![miss bytes ratio per training iteration](train.svg)).\n")?;
    writeln!(md, "## What the numbers mean\n")?;
    writeln!(md, "- **cache frac**: each replica's RAM cache, as a fraction of the summed postings bytes of every distinct term in the log.")?;
    writeln!(md, "- **miss bytes ratio** (headline): bytes read from flash / bytes of postings requested, over the test part only (the train part warms the caches). Lower is better.")?;
    writeln!(
        md,
        "- **miss ratio**: term lookups that missed / term lookups."
    )?;
    writeln!(
        md,
        "- **flash bytes/query**: bytes read from flash per test query."
    )?;
    writeln!(md, "- **imbalance**: max / mean queries per replica over the test part (1.0 is perfect). Bounded policies keep it near 1 + eps.")?;
    writeln!(md, "- **imbalance p99 (window)**: 99th percentile of max / mean over consecutive windows of {} test queries.", c["window"])?;
    writeln!(md, "- **one-big-cache**: one cache of R times a replica's capacity fed every query: the best any routing could do.")?;
    writeln!(md, "- **overflow** (in eval.json, `overflow_share`): test queries whose first choice was at its load bound.")?;
    writeln!(md, "- **novel** (in eval.json, `novel_miss_bytes_ratio`): the miss bytes ratio over test queries that never occur in the train part: how well the table generalizes.")?;
    writeln!(
        md,
        "\nSimulator speed: {:.1} million term lookups per second per core (median replay).",
        report.output.lookups_per_sec / 1e6
    )?;
    if let Some(live) = live {
        live_section(&mut md, live)?;
    }
    Ok(md)
}

/// The live part of the report.
fn live_section(md: &mut String, live: &LiveReport) -> Result<()> {
    writeln!(md, "\n## Live: real replicas and balancer over HTTP\n")?;
    writeln!(
        md,
        "For each policy: {} fresh `replica` processes ({} cache bytes each, {}, flash \
         emulated at {} MB/s per replica) behind a `balancer` process, all on loopback. \
         {} queries from the end of the train part warm the caches (not counted); then {} \
         test queries run closed-loop with {} clients (throughput at saturation), and {} \
         more open-loop at the same offered rate for every policy (latency at equal load). \
         A `work` load reads each query's flash bytes from: {} (`--work-source`). \
         Balancers per policy: {} (`--balancers`; the clients spread over them), backlog \
         reports counted for {} ms (`--live-backlog-reports-ms`). The table's cache \
         admission share: {} (`--cache-admission`).\n",
        live.replicas,
        live.cache_bytes,
        live.eviction,
        live.flash_read_mbps
            .map_or_else(|| "device".to_owned(), |m| m.to_string()),
        live.warm_queries,
        live.saturate_queries,
        live.concurrency,
        live.steady_queries,
        live.work_source,
        live.balancers,
        live.backlog_reports_ms,
        live.cache_admission
            .map_or_else(|| "none".to_owned(), |s| s.to_string()),
    )?;
    const COLUMNS: [&str; 13] = [
        "policy",
        "simulated miss bytes ratio",
        "measured",
        "difference",
        "busiest flash share (simulated / measured)",
        "imbalance (measured)",
        "overflow (simulated / measured)",
        "throughput at saturation (q/s)",
        "vs first",
        "p99 at saturation (ms)",
        "offered (q/s)",
        "p50 / p99 at offered load (ms)",
        "errors",
    ];
    writeln!(md, "| {} |", COLUMNS.join(" | "))?;
    writeln!(md, "|---{}|", "|---:".repeat(COLUMNS.len() - 1))?;
    let base = live.rows.first().map_or(0.0, |r| r.saturation_qps);
    for r in &live.rows {
        writeln!(
            md,
            "| {} | {:.4} | {:.4} | {:+.4} | {:.3} / {:.3} | {:.3} | {:.3} / {:.3} | {:.1} | {:.2}x | {:.1} | {:.1} | {:.1} / {:.1} | {} |",
            row_name(live, r),
            r.simulated_miss_bytes_ratio,
            r.measured_miss_bytes_ratio,
            r.measured_miss_bytes_ratio - r.simulated_miss_bytes_ratio,
            r.simulated_flash_share_max,
            r.measured_flash_share_max,
            r.measured_imbalance,
            r.simulated_overflow_share,
            r.measured_overflow_share,
            r.saturation_qps,
            if base > 0.0 { r.saturation_qps / base } else { 0.0 },
            r.saturation_p99_ms,
            r.offered_qps,
            r.steady_p50_ms,
            r.steady_p99_ms,
            r.errors
        )?;
    }
    if live.rounds > 1 {
        spread_section(md, live)?;
    }
    writeln!(md, "\n### Predicted by the queueing simulator\n")?;
    writeln!(md, "`cache_sim::queueing` replays the same queries through the same policy, load bound, caches and emulated flash, with time: closed loop with the same clients, then open loop at the same offered rate, every process's CPU work on the machine's shared cores (`--sim-cpu-us`, `--sim-cores`).\n")?;
    writeln!(
        md,
        "| policy | throughput at saturation (measured / predicted / error) | p99 at offered load, ms (measured / predicted / error) | overflow (measured / predicted) | busiest flash share (measured / predicted) | flash use at saturation (measured / predicted) | moved by late binding (measured / predicted) |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|---:|")?;
    let err = |measured: f64, predicted: f64| {
        if measured > 0.0 {
            format!("{:+.0}%", (predicted / measured - 1.0) * 100.0)
        } else {
            "–".to_owned()
        }
    };
    for r in &live.rows {
        let p = &r.predicted;
        writeln!(
            md,
            "| {} | {:.1} / {:.1} / {} | {:.1} / {:.1} / {} | {:.3} / {:.3} | {:.3} / {:.3} | {:.2} / {:.2} | {:.3} / {:.3} |",
            row_name(live, r),
            r.saturation_qps,
            p.saturation_qps,
            err(r.saturation_qps, p.saturation_qps),
            r.steady_p99_ms,
            p.steady_p99_ms,
            err(r.steady_p99_ms, p.steady_p99_ms),
            r.measured_overflow_share,
            p.overflow_share,
            r.measured_flash_share_max,
            p.flash_share_max,
            r.saturation_flash_use,
            p.saturation_flash_use,
            r.measured_stolen_share,
            p.stolen_share
        )?;
    }
    writeln!(
        md,
        "\n![simulated and measured miss bytes ratio](live-miss.svg)\n"
    )?;
    writeln!(
        md,
        "![throughput at saturation](live-throughput.svg)\n\n\
         ![p99 latency at the same offered load](live-p99.svg)\n"
    )?;
    writeln!(md, "### What the live numbers mean\n")?;
    writeln!(md, "- **simulated miss bytes ratio**: the simulator's prediction for exactly these queries (the warm-up queries warm its caches, the counted ones are counted) with the same policy, index sizes and cache bytes.")?;
    writeln!(md, "- **measured**: Σ miss bytes / Σ (hit + miss) bytes over the counted queries, from every replica's `GET /stats` read before and after. **difference** is measured − simulated; both bound the same load over the last 10,000 routing decisions, so the two differ only by what a live system adds: concurrent queries interleave their cache accesses, the work a query costs reaches the balancer when its answer does, and a replica that falls behind (twice the mean of requests in flight, plus 2) sheds queries to the next-ranked one.")?;
    writeln!(md, "- **busiest flash share**: the share of all flash bytes read by the replica that read the most (1/R is perfect balance). With flash the bottleneck, throughput follows this replica.")?;
    writeln!(md, "- **flash use at saturation**: the replicas' flash bytes over their emulated bandwidth times the closed-loop phase's time (the simulator: each replica's, averaged); 1 means no flash ever idled.")?;
    writeln!(md, "- **moved by late binding**: share of the counted queries the balancer sent to another replica than the one routed to after they waited `steal_after_ms` (`--live-steal-after-ms`; 0 when it is off).")?;
    writeln!(
        md,
        "- **imbalance (measured)**: max / mean queries per replica over the counted queries."
    )?;
    writeln!(md, "- **overflow**: share of queries sent past their first choice because it was at its load bound: in the simulator over the counted queries; at the balancer over the counted queries' first attempts (its `/metrics` read before and after). Both bound the same load over the last 10,000 routing decisions: the learned table its work (`load = \"work\"`: the flash bytes each query read at its replica plus a fixed cost), the other policies their query counts (`load = \"window\"`).")?;
    writeln!(md, "- **throughput at saturation**: answers per second in the closed-loop phase; with flash the bottleneck, it follows the flash bytes each query costs. **vs first**: relative to the first policy (round-robin by default).")?;
    writeln!(md, "- **p99 at saturation**: 99th percentile latency in the closed-loop phase, where every policy runs at its own maximum rate.")?;
    writeln!(md, "- **offered / p50 / p99 at offered load**: the open-loop phase sends at one fixed rate for every policy (a fraction of the first policy's saturation throughput); latency is measured from each request's intended send time, so queueing is not hidden.")?;
    writeln!(
        md,
        "- **errors**: failed client requests over the warm-up and both phases (any kind; by kind in `live.json`, `errors_by_kind`)."
    )?;
    Ok(())
}

/// A row's name: the policy, and its round when there are several.
fn row_name(live: &LiveReport, r: &LiveRow) -> String {
    if live.rounds > 1 {
        format!("{} (round {})", r.policy, r.round)
    } else {
        r.policy.clone()
    }
}

/// Each policy's median over the rounds and its spread (lowest – highest), against the
/// first policy's median.
fn spread_section(md: &mut String, live: &LiveReport) -> Result<()> {
    writeln!(
        md,
        "\n### Over {} rounds in rotated order\n\nEach policy's median, and its spread \
         (lowest – highest) over the rounds.\n",
        live.rounds
    )?;
    writeln!(
        md,
        "| policy | throughput at saturation (q/s) | vs first | p99 at offered load (ms) | vs first | errors |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|---:|")?;
    let spread = |policy: &str, f: fn(&LiveRow) -> f64| -> (f64, f64, f64) {
        let mut v: Vec<f64> = live
            .rows
            .iter()
            .filter(|r| r.policy == policy)
            .map(f)
            .collect();
        v.sort_by(f64::total_cmp);
        let median = match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        (
            median,
            v.first().copied().unwrap_or(0.0),
            v.last().copied().unwrap_or(0.0),
        )
    };
    let mut policies: Vec<&str> = Vec::new();
    for r in &live.rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let first = policies.first().copied().unwrap_or_default();
    let (base_qps, _, _) = spread(first, |r| r.saturation_qps);
    let (base_p99, _, _) = spread(first, |r| r.steady_p99_ms);
    let vs = |x: f64, base: f64| if base > 0.0 { x / base } else { 0.0 };
    for p in policies {
        let (q, q_lo, q_hi) = spread(p, |r| r.saturation_qps);
        let (l, l_lo, l_hi) = spread(p, |r| r.steady_p99_ms);
        let errors: u64 = live
            .rows
            .iter()
            .filter(|r| r.policy == p)
            .map(|r| r.errors)
            .sum();
        writeln!(
            md,
            "| {p} | {q:.1} ({q_lo:.1} – {q_hi:.1}) | {:.2}x | {l:.1} ({l_lo:.1} – {l_hi:.1}) | {:.2}x | {errors} |",
            vs(q, base_qps),
            vs(l, base_p99),
        )?;
    }
    Ok(())
}

/// Draws `live-miss.svg`, `live-throughput.svg` and `live-p99.svg` into `out`.
pub fn live_charts(out: &Path, live: &LiveReport) -> Result<()> {
    let names: Vec<String> = live.rows.iter().map(|r| row_name(live, r)).collect();
    let one = |name: &str, values: Vec<f64>| Bars {
        name: name.into(),
        values,
    };
    bar_chart(
        &out.join("live-miss.svg"),
        "Miss bytes ratio: simulated vs measured over HTTP",
        "miss bytes ratio",
        &names,
        &[
            one(
                "simulated",
                live.rows
                    .iter()
                    .map(|r| r.simulated_miss_bytes_ratio)
                    .collect(),
            ),
            one(
                "measured",
                live.rows
                    .iter()
                    .map(|r| r.measured_miss_bytes_ratio)
                    .collect(),
            ),
        ],
    )?;
    bar_chart(
        &out.join("live-throughput.svg"),
        "Throughput at saturation (closed loop)",
        "queries/s",
        &names,
        &[one(
            "answers per second",
            live.rows.iter().map(|r| r.saturation_qps).collect(),
        )],
    )?;
    bar_chart(
        &out.join("live-p99.svg"),
        "p99 latency at the same offered load (open loop)",
        "ms",
        &names,
        &[one(
            "p99 from the intended send time",
            live.rows.iter().map(|r| r.steady_p99_ms).collect(),
        )],
    )
}

/// Prints the side-by-side table to stdout.
pub fn print_live_table(live: &LiveReport) {
    println!(
        "{:<24} {:>10} {:>10} {:>9} {:>12} {:>9} {:>13} {:>9}",
        "policy", "simulated", "measured", "diff", "sat q/s", "p99 ms", "p99 ms@load", "errors"
    );
    for r in &live.rows {
        println!(
            "{:<24} {:>10.4} {:>10.4} {:>+9.4} {:>12.1} {:>9.1} {:>13.1} {:>9}",
            row_name(live, r),
            r.simulated_miss_bytes_ratio,
            r.measured_miss_bytes_ratio,
            r.measured_miss_bytes_ratio - r.simulated_miss_bytes_ratio,
            r.saturation_qps,
            r.saturation_p99_ms,
            r.steady_p99_ms,
            r.errors
        );
    }
}
