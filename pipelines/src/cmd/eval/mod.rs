//! `ballot eval`: replays the test part of a log through every requested routing policy
//! into R simulated replica caches, for one or more cache sizes, and reports miss bytes,
//! imbalance and the one-big-cache bound (table, JSON, SVG). With `--switch-table OLD NEW`
//! it simulates a live table switch instead ([`super::switch`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use balancer::policy::PolicyKind;
use cache_sim::sim::replay::DEFAULT_WINDOW;
use cache_sim::sim::{run_grid, GridConfig, GridOutput, Trace};
use clap::Args;
use eviction::EvictionKind;
use serde_json::json;

use crate::chart::{line_chart, Series};
use crate::inputs::{LogArgs, SizeArgs, SplitArgs};
use crate::json::write_json;
use crate::progress::Stage;
use crate::routing_args::RoutingArgs;

mod misses;
mod rescale;

/// Arguments of `ballot eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub routing: RoutingArgs,
    /// Number of replicas R.
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    /// Per-replica cache capacity as a fraction of the log's distinct postings bytes;
    /// comma-separated for several sizes.
    #[arg(long, default_value = "0.05", value_delimiter = ',')]
    pub cache_frac: Vec<f64>,
    /// `all` or a comma-separated list of policy names.
    #[arg(long, default_value = "all")]
    pub policies: String,
    /// Voting table for the `table` policy (with `all`, `table` runs only if given).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Eviction policy of every simulated cache: lru (the standard evaluation's), sieve (the
    /// replica's default, which `ballot train` trains for) or s3fifo.
    #[arg(long, default_value = "lru")]
    pub eviction: EvictionKind,
    /// Load-bound slack of the bounded policies.
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub eps: f64,
    /// Trailing window (queries) of the simulated load view.
    #[arg(long, default_value_t = DEFAULT_WINDOW)]
    pub window: usize,
    /// Seed of random routing choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With `--table`: its replicas cache a list only where the list's term votes at least
    /// this share of its top vote, at cache sizes up to the one the table was trained for
    /// (the balancer's `[policy] cache_admission`; docs/learner.md, "Caching only at the homes").
    #[arg(long, value_name = "SHARE", requires = "table")]
    pub cache_admission: Option<f64>,
    /// With `--table`: also print where the table's flash bytes go at each cache size, by
    /// the role of the replica for the term, by routing reason, and the N terms that miss
    /// the most (docs/learner.md, "Where the misses are").
    #[arg(long, value_name = "N", requires = "table")]
    pub breakdown: Option<usize>,
    /// With a `--table` trained over virtual homes: also report the share of requested
    /// bytes whose first choice moves between serving it on this many replicas and on
    /// `--replicas`, beside consistent hashing's (docs/learner.md, "Virtual homes").
    #[arg(long, value_name = "R0", requires = "table")]
    pub movement_from: Option<usize>,
    /// Write all results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw miss bytes ratio per policy across cache sizes as SVG here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Parses `all` or a list of names; `all` includes `table` only when a table is given.
pub fn parse_policies(spec: &str, have_table: bool) -> Result<Vec<PolicyKind>> {
    if spec.trim() == "all" {
        return Ok(PolicyKind::ALL
            .into_iter()
            .filter(|k| have_table || !k.needs_table())
            .collect());
    }
    let mut out = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let kind: PolicyKind = name.parse()?;
        if kind.needs_table() && !have_table {
            bail!("policy `{kind}` needs --table TABLE.parquet");
        }
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    if out.is_empty() {
        bail!("--policies names no policy");
    }
    Ok(out)
}

/// What `ballot eval` measured, with the configuration that produced it.
pub struct EvalReport {
    /// The configuration as written to JSON.
    pub config: serde_json::Value,
    /// The grid's results.
    pub output: GridOutput,
}

/// Runs `ballot eval`.
pub fn run(args: &EvalArgs) -> Result<EvalReport> {
    let started = Instant::now();
    validate(args)?;
    let policies = parse_policies(&args.policies, args.table.is_some())?;
    let table = match &args.table {
        Some(p) => Some(Arc::new(crate::inputs::read_table(p, args.replicas)?)),
        None => None,
    };
    let mapped = match (args.movement_from, &args.table) {
        (Some(from), Some(p)) => Some(rescale::map(p, from, args.replicas)?),
        _ => None,
    };

    let (label, trace) = load_trace(args)?;

    let cfg = GridConfig {
        replicas: args.replicas,
        cache_fracs: args.cache_frac.clone(),
        policies,
        eviction: args.eviction,
        eps: args.eps,
        window: args.window,
        seed: args.seed,
        table,
        loads: args.routing.policy_loads()?,
        homes: args.routing.homes,
        evidence: args.routing.cache_evidence,
        admission: crate::routing_args::cache_admission(args.cache_admission)?,
    };
    let stage = Stage::start(&format!(
        "simulating {} policies x {} cache sizes",
        cfg.policies.len(),
        cfg.cache_fracs.len()
    ));
    let out = run_grid(&trace, &cfg)?;
    stage.finish("done");

    print_table(&out);
    let breakdowns = match args.breakdown {
        Some(top) => misses::run(&trace, &cfg, top)?,
        None => Vec::new(),
    };
    println!(
        "lookups_per_sec {:.1}M (median single-thread replay), total {:.1}s",
        out.lookups_per_sec / 1e6,
        started.elapsed().as_secs_f64()
    );
    let rescale = match &mapped {
        Some(m) => Some(rescale::measure(&trace, m)?),
        None => None,
    };
    let mut config = base_config(args, &label, &trace)?;
    config["table"] = json!(args.table.as_ref().map(|p| p.display().to_string()));
    if let Some(path) = &args.json {
        let doc = json!({
            "config": &config,
            "results": out.results,
            "bounds": out.bounds,
            "lookups_per_sec": out.lookups_per_sec,
            "breakdown": breakdowns,
            "movement_from": rescale,
        });
        write_json(path, &doc)?;
    }
    if let Some(path) = &args.svg {
        draw(path, &out, args.replicas)?;
    }
    Ok(EvalReport {
        config,
        output: out,
    })
}

fn print_table(out: &GridOutput) {
    println!(
        "{:<14} {:>10} {:>9} {:>10} {:>11} {:>12} {:>9} {:>11} {:>9} {:>10} {:>9}",
        "policy",
        "cache_frac",
        "replicas",
        "miss_bytes",
        "miss_ratio",
        "flash_B/q",
        "imbalance",
        "imb_p99_win",
        "overflow",
        "novel_mbr",
        "flash_max"
    );
    for r in &out.results {
        println!(
            "{:<14} {:>10} {:>9} {:>10.4} {:>11.4} {:>12.0} {:>9.3} {:>11.3} {:>9.3} {:>10.4} {:>9.4}",
            r.policy,
            r.cache_frac,
            r.replicas,
            r.sim.miss_bytes_ratio,
            r.sim.miss_ratio,
            r.sim.flash_bytes_per_query,
            r.sim.imbalance,
            r.sim.imbalance_p99_window,
            r.sim.overflow_share,
            r.sim.novel_miss_bytes_ratio,
            r.sim.flash_share_max
        );
    }
    for b in &out.bounds {
        println!(
            "{:<14} {:>10} {:>9} {:>10.4}",
            b.name, b.cache_frac, "1", b.miss_bytes_ratio
        );
    }
}

fn draw(path: &Path, out: &GridOutput, replicas: usize) -> Result<()> {
    let mut series: Vec<Series> = Vec::new();
    for r in &out.results {
        match series.iter_mut().find(|s| s.name == r.policy) {
            Some(s) => s.points.push((r.cache_frac, r.sim.miss_bytes_ratio)),
            None => series.push(Series {
                name: r.policy.clone(),
                points: vec![(r.cache_frac, r.sim.miss_bytes_ratio)],
                dashed: false,
            }),
        }
    }
    series.push(Series {
        name: "one-big-cache".into(),
        points: out
            .bounds
            .iter()
            .map(|b| (b.cache_frac, b.miss_bytes_ratio))
            .collect(),
        dashed: true,
    });
    line_chart(
        path,
        &format!("Miss bytes ratio by routing policy (R = {replicas}, test part)"),
        "per-replica cache size (fraction of distinct postings bytes)",
        "miss bytes ratio",
        &mut series,
    )
}

/// Checks the arguments every mode of `eval` shares.
pub(crate) fn validate(args: &EvalArgs) -> Result<()> {
    if args.replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    for &f in &args.cache_frac {
        crate::inputs::check_fraction("--cache-frac", f)?;
    }
    if args.window == 0 {
        bail!("--window must be at least 1");
    }
    crate::routing_args::cache_admission(args.cache_admission)?;
    crate::routing_args::cache_admission_needs_table(args.cache_admission, || {
        parse_policies(&args.policies, args.table.is_some())
    })?;
    Ok(())
}

/// Reads, splits and tokenizes the log; returns its label and the trace.
pub(crate) fn load_trace(args: &EvalArgs) -> Result<(String, Trace)> {
    let dataset = args.log.load_reported()?;
    let sizes = args.sizes.load(&dataset)?;
    let order = args.split.apply(&dataset)?;
    let stage = Stage::start("tokenizing");
    let trace = Trace::build(dataset.ordered(&order), order.train_len, &sizes);
    stage.finish(&format!(
        "{} train + {} test queries, {} distinct terms, {} postings bytes",
        trace.train_len,
        trace.test_len(),
        trace.dict.len(),
        trace.distinct_bytes()
    ));
    Ok((dataset.label, trace))
}

/// The configuration every mode of `eval` writes to JSON.
pub(crate) fn base_config(
    args: &EvalArgs,
    label: &str,
    trace: &Trace,
) -> Result<serde_json::Value> {
    Ok(json!({
        "log": label,
        "queries": trace.len(),
        "train_queries": trace.train_len,
        "test_queries": trace.test_len(),
        "distinct_terms": trace.dict.len(),
        "distinct_postings_bytes": trace.distinct_bytes(),
        "replicas": args.replicas,
        "cache_fracs": args.cache_frac,
        "eviction": args.eviction.name(),
        "eps": args.eps,
        "window": args.window,
        "load": args.routing.describe(),
        "homes": args.routing.homes,
        "work_query_bytes": args.routing.work_query_bytes,
        "cache_evidence": args.routing.cache_evidence,
        "seed": args.seed,
        "split": format!("{:?}", args.split.split()?),
        "keep_repeats": args.log.keep_repeats,
        "sizes": match (&args.sizes.sizes, &args.sizes.freq) {
            (Some(p), _) => format!("table {}", p.display()),
            (None, Some(p)) => format!("model over {} (N={}, L={})", p.display(), args.sizes.docs, args.sizes.doc_len),
            (None, None) => "model over the synthetic log's frequency table".to_owned(),
        },
    }))
}
