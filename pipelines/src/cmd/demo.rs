//! `ballot demo`: the README's first command. On the embedded synthetic default (or a log
//! and sizes you point it at) it trains a voting table, evaluates every routing policy
//! (the learned table included) at three cache sizes and writes a report with the table,
//! the charts and what each number means.
//!
//! The live part of the demo (real replica and balancer processes, measured HTTP cache
//! hits) arrives with the end-to-end issue; this command grows with it.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use learner::refine::RefineConfig;

use super::eval::{run as run_eval, write_json, EvalArgs};
use super::train::{self, TrainArgs};
use crate::inputs::{LogArgs, SizeArgs, SplitArgs};

/// Arguments of `ballot demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Output directory for the report, JSON and charts.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Number of replicas R.
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    /// Per-replica cache size the voting table is trained for.
    #[arg(long, default_value_t = 0.05)]
    pub train_cache_frac: f64,
    /// Per-replica cache sizes to evaluate (fractions of the distinct postings bytes).
    #[arg(long, default_value = "0.02,0.05,0.1", value_delimiter = ',')]
    pub cache_frac: Vec<f64>,
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create output directory", args.out.display()))?;
    let json = args.out.join("eval.json");
    let svg = args.out.join("eval.svg");
    let table = args.out.join("table.parquet");
    let split = SplitArgs {
        split: 0.8,
        shuffle_seed: 1,
        split_time: None,
    };
    let defaults = RefineConfig::default();
    train::run(&TrainArgs {
        log: args.log.clone(),
        sizes: args.sizes.clone(),
        split: split.clone(),
        replicas: args.replicas,
        cache_frac: args.train_cache_frac,
        eviction: cache_sim::eviction::EvictionKind::Lru,
        eps: 0.05,
        iterations: defaults.iterations,
        seed: 1,
        min_term_freqs: vec![2, 3],
        ufactors: vec![10, 30, 60],
        move_margin: defaults.move_margin,
        price_step: defaults.price_step,
        secondary: defaults.secondary,
        patience: defaults.patience,
        validation_frac: 0.1,
        output: table.clone(),
        report: Some(args.out.join("train.json")),
        svg: Some(args.out.join("train.svg")),
    })?;
    let eval = EvalArgs {
        log: args.log.clone(),
        sizes: args.sizes.clone(),
        split,
        replicas: args.replicas,
        cache_frac: args.cache_frac.clone(),
        policies: "all".into(),
        table: Some(table),
        eviction: cache_sim::eviction::EvictionKind::Lru,
        eps: 0.05,
        window: cache_sim::sim::replay::DEFAULT_WINDOW,
        seed: 1,
        json: Some(json.clone()),
        svg: Some(svg.clone()),
    };
    let report = run_eval(&eval)?;
    let md = render_report(&report)?;
    let md_path = args.out.join("report.md");
    std::fs::write(&md_path, md).with_context(|| format!("{}: cannot write", md_path.display()))?;
    write_json(&args.out.join("config.json"), &report.config)?;
    println!(
        "report: {} (chart {}, data {})",
        md_path.display(),
        svg.display(),
        json.display()
    );
    Ok(())
}

fn render_report(report: &super::eval::EvalReport) -> Result<String> {
    let c = &report.config;
    let mut md = String::new();
    writeln!(
        md,
        "# ballot demo: simulated cache misses by routing policy\n"
    )?;
    writeln!(
        md,
        "Log: {} — {} queries ({} train, {} test), {} distinct terms, {} bytes of postings. \
         R = {} replicas, LRU caches, load bound eps = {} over a trailing window of {} queries.\n",
        c["log"],
        c["queries"],
        c["train_queries"],
        c["test_queries"],
        c["distinct_terms"],
        c["distinct_postings_bytes"],
        c["replicas"],
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
    Ok(md)
}
