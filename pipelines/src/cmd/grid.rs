//! `ballot grid`: the learner's scorecard. For each (replicas, cache size) configuration it
//! trains a voting table on the train part, replays the test part through every policy
//! and prints one Markdown row: the learned table against round-robin and against the best
//! other policy whose imbalance is at most 1 + eps. This produces the README's grid in one
//! command.

use std::sync::Arc;

use anyhow::{bail, Result};
use balancer::policy::PolicyKind;
use cache_sim::sim::replay::DEFAULT_WINDOW;
use cache_sim::sim::{run_grid, GridConfig, Trace};
use clap::Args;
use learner::{train, TrainConfig};
use serde_json::json;

use crate::inputs::{LogArgs, SizeArgs, SplitArgs};
use crate::json::write_json;
use crate::routing_args::RoutingArgs;

/// Arguments of `ballot grid`.
#[derive(Args, Debug)]
pub struct GridArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub routing: RoutingArgs,
    /// Configurations `R:cache_frac`, comma-separated.
    #[arg(
        long,
        default_value = "8:0.05,8:0.02,8:0.1,4:0.05,16:0.05",
        value_delimiter = ','
    )]
    pub configs: Vec<String>,
    /// Load-bound slack.
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub eps: f64,
    /// Seed of training and simulation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Each configuration's table is replayed with its replicas caching a list only where
    /// the list's term votes at least this share of its top vote (the balancer's `[policy]
    /// cache_admission`; docs/learner.md, "Caching only at the homes").
    #[arg(long, value_name = "SHARE")]
    pub cache_admission: Option<f64>,
    /// Write every configuration's full results as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

fn parse_config(s: &str) -> Result<(usize, f64)> {
    let Some((r, f)) = s.split_once(':') else {
        bail!("--configs entry {s:?} is not R:cache_frac");
    };
    let r: usize = r
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("bad replica count in {s:?}"))?;
    let f: f64 = f
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("bad cache fraction in {s:?}"))?;
    if r == 0 || f.is_nan() || f <= 0.0 || f > 1.0 {
        bail!("--configs entry {s:?} is out of range");
    }
    Ok((r, f))
}

/// Throughput of `a` over `b` when flash bandwidth is the bottleneck: the cluster serves
/// queries until its busiest replica's flash is saturated, so throughput is inversely
/// proportional to the flash bytes that replica reads per query,
/// `flash_bytes_per_query · R · flash_share_max`.
pub fn flash_bound_gain(a: &cache_sim::sim::SimResult, b: &cache_sim::sim::SimResult) -> f64 {
    let busiest = |r: &cache_sim::sim::SimResult| r.flash_bytes_per_query * r.flash_share_max;
    if busiest(a) > 0.0 {
        busiest(b) / busiest(a)
    } else {
        f64::INFINITY
    }
}

/// Runs `ballot grid`.
pub fn run(args: &GridArgs) -> Result<()> {
    let admission = crate::routing_args::cache_admission(args.cache_admission)?;
    let configs = args
        .configs
        .iter()
        .map(|c| parse_config(c))
        .collect::<Result<Vec<_>>>()?;
    let dataset = args.log.load()?;
    let sizes = args.sizes.load(&dataset)?;
    let order = args.split.apply(&dataset)?;
    let trace = Trace::build(dataset.ordered(&order), order.train_len, &sizes);
    let train_queries: Vec<&str> = order
        .train()
        .iter()
        .map(|&i| dataset.queries.get(i as usize))
        .collect();
    println!(
        "log: {} ({} train, {} test queries)\n",
        dataset.label,
        trace.train_len,
        trace.test_len()
    );
    println!(
        "| R | cache | table | table flash max | round-robin | table / round-robin | flash-bound throughput / round-robin | best other (imbalance ≤ {:.2}) | table vs best other | term-vote (imbalance) | table, novel queries | best other, novel queries | train seconds |",
        1.0 + args.eps
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut all = Vec::new();
    for (replicas, frac) in configs {
        let capacity = trace.capacity_for(frac);
        let cfg = TrainConfig {
            load: args.routing.sim_load_for(PolicyKind::Table)?,
            homes: args.routing.homes,
            eps: args.eps,
            seed: args.seed,
            ..TrainConfig::new(replicas, frac, capacity)
        };
        let started = std::time::Instant::now();
        let out = train(&train_queries, &sizes, &cfg, |_| {}, |_| {})?;
        let train_seconds = started.elapsed().as_secs_f64();
        let grid = run_grid(
            &trace,
            &GridConfig {
                replicas,
                cache_fracs: vec![frac],
                policies: PolicyKind::ALL.to_vec(),
                eviction: cfg.eviction,
                eps: args.eps,
                window: DEFAULT_WINDOW,
                seed: args.seed,
                table: Some(Arc::new(out.table)),
                loads: args.routing.policy_loads()?,
                homes: args.routing.homes,
                evidence: args.routing.cache_evidence,
                admission,
            },
        )?;
        let find = |name: &str| grid.results.iter().find(|r| r.policy == name);
        let (Some(table), Some(rr), Some(tv)) =
            (find("table"), find("round-robin"), find("term-vote"))
        else {
            bail!("grid lacks table, round-robin or term-vote results");
        };
        let bound = 1.0 + args.eps + 1e-9;
        let best_other = grid
            .results
            .iter()
            .filter(|r| r.policy != "table" && r.sim.imbalance <= bound)
            .min_by(|a, b| a.sim.miss_bytes_ratio.total_cmp(&b.sim.miss_bytes_ratio));
        let Some(best_other) = best_other else {
            bail!("no other policy stayed within the imbalance bound");
        };
        let t = table.sim.miss_bytes_ratio;
        let o = best_other.sim.miss_bytes_ratio;
        println!(
            "| {replicas} | {frac} | {t:.4} | {:.4} | {:.4} | {:.3} | {:.2} | {} {o:.4} | {:+.1}% | {:.4} ({:.4}) | {:.4} | {:.4} | {train_seconds:.0} |",
            table.sim.flash_share_max,
            rr.sim.miss_bytes_ratio,
            t / rr.sim.miss_bytes_ratio,
            flash_bound_gain(&table.sim, &rr.sim),
            best_other.policy,
            (t / o - 1.0) * 100.0,
            tv.sim.miss_bytes_ratio,
            tv.sim.imbalance,
            table.sim.novel_miss_bytes_ratio,
            best_other.sim.novel_miss_bytes_ratio,
        );
        all.push(json!({
            "replicas": replicas,
            "cache_frac": frac,
            "train_seconds": train_seconds,
            "train_report": out.report,
            "results": grid.results,
            "bounds": grid.bounds,
        }));
    }
    if let Some(path) = &args.json {
        write_json(path, &serde_json::Value::Array(all))?;
    }
    Ok(())
}
