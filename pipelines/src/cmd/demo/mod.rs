//! `ballot demo`: the README's first command. On the embedded synthetic default (or a log
//! and sizes you point it at) it builds a small replica index, trains a voting table on the
//! index's stored sizes, evaluates every routing policy by simulation at three cache sizes,
//! then runs the live part ([`live`]): real replica and balancer processes on loopback,
//! the test queries replayed over HTTP under round-robin, `ch-bl` and the learned table,
//! with flash emulated as the bottleneck. It writes `report.md` with the side-by-side
//! table (simulated against measured), SVG charts and JSON.

mod cluster;
mod live;
mod report;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use learner::refine::RefineConfig;

use super::build_index::{self, BuildIndexArgs};
use super::eval::{parse_policies, run as run_eval, EvalArgs};
use super::train::{self, TrainArgs};
use crate::inputs::{check_fraction, LogArgs, SizeArgs, SplitArgs};
use crate::json::write_json;
use crate::routing_args::RoutingArgs;

/// Arguments of `ballot demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub routing: RoutingArgs,
    /// Size table `(term, bytes)` the index is built from (default: the size model over
    /// --freq, or over the synthetic log's own frequencies).
    #[arg(long, conflicts_with = "freq")]
    pub sizes: Option<PathBuf>,
    /// Word-frequency TSV for the size model (needed with a real --log unless --sizes).
    #[arg(long)]
    pub freq: Option<PathBuf>,
    /// Documents in the demo's index (size model N; 1M gives about 210 MB on the default).
    #[arg(long, default_value_t = 1_000_000)]
    pub docs: u64,
    /// Tokens per document (size model L).
    #[arg(long, default_value_t = data::sizes::SizeModel::default().doc_len)]
    pub doc_len: f64,
    /// Output directory for the index, table, report, JSON, charts and process logs.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Number of replicas R (of each shard, with --shards).
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    /// Document shards S of the index: the live part starts S × R replica processes (R per
    /// shard), and the balancer fans each query out to one replica of every shard and
    /// merges the answers (its `[shards]` section).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub shards: u32,
    /// With --shards: how the balancer picks each shard's replica, `same-column` (the
    /// policy decides once, in shard 0, and every shard follows) or `per-shard` (each shard
    /// routes its part itself).
    #[arg(long, default_value = "same-column", value_parser = ["same-column", "per-shard"])]
    pub shard_route: String,
    /// Per-replica cache size the voting table is trained for (and the live run uses).
    #[arg(long, default_value_t = 0.05)]
    pub train_cache_frac: f64,
    /// Per-replica cache sizes to simulate (fractions of the distinct postings bytes).
    #[arg(long, default_value = "0.02,0.05,0.1", value_delimiter = ',')]
    pub cache_frac: Vec<f64>,
    /// Eviction policy of the replicas' caches, trained for and simulated (lru, sieve or
    /// s3fifo).
    #[arg(long, default_value_t = eviction::EvictionKind::SERVING_DEFAULT)]
    pub eviction: eviction::EvictionKind,
    /// The table's replicas cache a list only where the list's term votes at least this
    /// share of its top vote (the balancer's `[policy] cache_admission`, simulated and
    /// live; docs/learner.md, "Caching only at the homes"). One shard only.
    #[arg(long, value_name = "SHARE")]
    pub cache_admission: Option<f64>,
    /// Train with this flash-balance weight (`ballot train --flash-price`; 0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub flash_price: f64,
    /// Skip the live part (no processes, no HTTP).
    #[arg(long)]
    pub no_live: bool,
    /// Live: emulated flash bandwidth of each replica in MB/s (the bottleneck).
    #[arg(long, default_value_t = 4.0)]
    pub flash_read_mbps: f64,
    /// Live: policies served, in order (the first sets the open-loop rate).
    #[arg(long, default_value = "round-robin,ch-bl,table")]
    pub live_policies: String,
    /// Live: rounds over the policies, each in an order rotated by one (round k starts
    /// with the k-th policy), so no policy always runs first or last; the report gives each
    /// policy's spread over the rounds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10))]
    pub live_rounds: u64,
    /// Split by time instead of the shuffled 80/20 split: train before this instant (UTC,
    /// `2006-05-01T00:00:00`), serve from it on, in log order (a log with times only).
    #[arg(long)]
    pub split_time: Option<String>,
    /// Live: last train queries replayed to warm the caches (not counted).
    #[arg(long, default_value_t = 5_000)]
    pub live_warm: usize,
    /// Live: test queries replayed closed-loop (throughput at saturation).
    #[arg(long, default_value_t = 5_000)]
    pub live_saturate: usize,
    /// Live: further test queries replayed open-loop at one rate for every policy (latency
    /// at the same offered load).
    #[arg(long, default_value_t = 3_000)]
    pub live_steady: usize,
    /// Live: closed-loop clients.
    #[arg(long, default_value_t = 32)]
    pub live_concurrency: usize,
    /// Live: balancer processes per policy, each with the same table and config on its own
    /// port; the clients are spread over them (and retry on another when a connection
    /// fails). The queueing prediction models each balancer's own view (its own requests
    /// and window; with --live-backlog-reports-ms every balancer's requests in flight).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub balancers: u64,
    /// Live: each balancer's `backlog_reports_ms` (0: it counts only its own requests; > 0:
    /// the replicas' backlog reports add the other balancers' requests for this long).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub live_backlog_reports_ms: u64,
    /// Live and predicted: each balancer's `replica_max_in_flight`, the requests it sends
    /// one replica at once (the rest wait in its queue for that replica).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub live_slots: u64,
    /// Live and predicted: the balancers' late binding, `steal_after_ms` (unset: off), with
    /// the default `steal_share`.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub live_steal_after_ms: Option<u64>,
    /// Live and simulated: the balancers' load-bound slack `eps` (training and `eval`
    /// keep the default).
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub live_eps: f64,
    /// Live: open-loop rate as a fraction of the first policy's saturation throughput.
    #[arg(long, default_value_t = 0.6)]
    pub live_load: f64,
    /// Live: open-loop rate in queries/s (overrides --live-load).
    #[arg(long)]
    pub live_rate: Option<f64>,
    /// Live and predicted: bound every policy but the table by this load instead of
    /// `--load`'s (e.g. `in-flight`, the balancer's own default for them, which only the
    /// queueing simulator can model: the trace-simulated miss bytes of those policies stay
    /// under `--load`'s bound).
    #[arg(long)]
    pub live_others_load: Option<balancer::LoadKind>,
    /// Queueing prediction: CPU time of one query outside flash reads, microseconds (the
    /// replica's work plus the balancer's and the load generator's share; see
    /// docs/queueing.md for how to measure it).
    #[arg(long, default_value_t = 600.0)]
    pub sim_cpu_us: f64,
    /// Queueing prediction: cores the replicas' CPU work shares (default: this machine's,
    /// since the demo runs every process on it).
    #[arg(long)]
    pub sim_cores: Option<usize>,
}

impl DemoArgs {
    fn validate(&self) -> Result<()> {
        if !(1..=balancer::MAX_REPLICAS).contains(&self.replicas) {
            bail!(
                "--replicas must be between 1 and {}, got {}",
                balancer::MAX_REPLICAS,
                self.replicas
            );
        }
        crate::routing_args::cache_admission(self.cache_admission)?;
        if self.cache_admission.is_some() && self.shards > 1 {
            bail!("--cache-admission is not supported with --shards yet (one shard only)");
        }
        check_fraction("--train-cache-frac", self.train_cache_frac)?;
        for &f in &self.cache_frac {
            check_fraction("--cache-frac", f)?;
        }
        if self.docs == 0 || self.docs > u64::from(u32::MAX) {
            bail!("--docs must be between 1 and {}", u32::MAX);
        }
        if !(self.flash_read_mbps.is_finite() && self.flash_read_mbps > 0.0) {
            bail!("--flash-read-mbps must be a positive number");
        }
        if !(self.live_eps.is_finite() && self.live_eps >= 0.0) {
            bail!("--live-eps must be a number >= 0");
        }
        if !(self.live_load > 0.0 && self.live_load <= 1.0) {
            bail!("--live-load must be in (0, 1]");
        }
        if self.live_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            bail!("--live-rate must be a positive number");
        }
        if self.live_concurrency == 0 || self.live_saturate == 0 || self.live_steady == 0 {
            bail!("--live-concurrency, --live-saturate and --live-steady must be at least 1");
        }
        Ok(())
    }
}

/// Writes the size table of the whole index, `out`: each term's stored bytes summed over
/// the `shards` shards of `root` (what a query reads over every shard, the bytes the
/// simulators and the table count).
fn sum_shard_sizes(root: &std::path::Path, shards: u32, out: &std::path::Path) -> Result<()> {
    let mut total: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for s in 0..shards {
        let path = replica::shard_dir(root, s).join("sizes.parquet");
        let table = data::sizes::SizeTable::read_parquet(&path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        for (term, bytes) in table.sorted() {
            *total.entry(term.to_owned()).or_insert(0) += bytes;
        }
    }
    data::sizes::SizeTable::from_pairs(total)
        .write_parquet(out)
        .with_context(|| format!("{}: cannot write", out.display()))
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> Result<()> {
    args.validate()?;
    let live_policies = parse_policies(&args.live_policies, true).context("--live-policies")?;
    let split = SplitArgs {
        split: 0.8,
        shuffle_seed: 1,
        split_time: args.split_time.clone(),
    };
    // The live part's queries, checked before any work: the last train queries warm, the
    // first test queries are counted.
    let live_queries = if args.no_live {
        None
    } else {
        let dataset = args.log.load()?;
        let order = split.apply(&dataset)?;
        let test = order.test().len();
        if test < args.live_saturate + args.live_steady {
            bail!(
                "{}: the test part has {test} queries; --live-saturate {} + --live-steady {} \
                 need more (lower them, or use a larger log)",
                dataset.label,
                args.live_saturate,
                args.live_steady
            );
        }
        Some((dataset, order))
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create output directory", args.out.display()))?;
    let index = args.out.join("index");
    let table = args.out.join("table.parquet");

    // 1. A replica index (or one per shard); its stored sizes are what every later step
    // counts.
    build_index::run_sharded(
        &BuildIndexArgs {
            log: args.log.clone(),
            sizes: SizeArgs {
                sizes: args.sizes.clone(),
                freq: args.freq.clone(),
                docs: args.docs,
                doc_len: args.doc_len,
            },
            output: index.clone(),
        },
        args.shards,
    )?;
    let sizes_path = index.join("sizes.parquet");
    if args.shards > 1 {
        sum_shard_sizes(&index, args.shards, &sizes_path)?;
    }
    let sizes = SizeArgs {
        sizes: Some(sizes_path.clone()),
        freq: None,
        docs: args.docs,
        doc_len: args.doc_len,
    };

    // 2. Train, 3. simulate every policy.
    let defaults = RefineConfig::default();
    let train_on = |sizes: &SizeArgs, output: &std::path::Path, report: bool| {
        train::run(&TrainArgs {
            log: args.log.clone(),
            sizes: sizes.clone(),
            split: split.clone(),
            replicas: args.replicas,
            cache_frac: args.train_cache_frac,
            eviction: args.eviction,
            eps: balancer::policy::DEFAULT_EPS,
            iterations: defaults.iterations,
            seed: 1,
            min_term_freqs: vec![2, 3],
            ufactors: vec![10, 30, 60],
            move_margin: defaults.move_margin,
            price_step: defaults.price_step,
            secondary: defaults.secondary,
            patience: defaults.patience,
            flash_price: args.flash_price,
            routing: args.routing.clone(),
            validation_frac: 0.1,
            refine_sample: learner::train::DEFAULT_REPLAY_FIT_MAX,
            virtual_homes: None,
            engine: None,
            output: output.to_owned(),
            report: report.then(|| args.out.join("train.json")),
            svg: report.then(|| args.out.join("train.svg")),
        })
    };
    train_on(&sizes, &table, true)?;
    let eval = EvalArgs {
        log: args.log.clone(),
        sizes: sizes.clone(),
        split: split.clone(),
        routing: args.routing.clone(),
        replicas: args.replicas,
        cache_frac: args.cache_frac.clone(),
        policies: "all".into(),
        table: Some(table.clone()),
        eviction: args.eviction,
        eps: balancer::policy::DEFAULT_EPS,
        window: cache_sim::sim::replay::DEFAULT_WINDOW,
        seed: 1,
        cache_admission: args.cache_admission,
        breakdown: None,
        movement_from: None,
        json: Some(args.out.join("eval.json")),
        svg: Some(args.out.join("eval.svg")),
    };
    let eval_report = run_eval(&eval)?;
    write_json(&args.out.join("config.json"), &eval_report.config)?;

    // 4. Live.
    let live_report = if let Some((dataset, order)) = live_queries {
        let loaded = sizes.load(&dataset)?;
        let all =
            cache_sim::sim::Trace::build(dataset.ordered(&order), order.train().len(), &loaded);
        // Each shard's replica caches its share of the lists: 1/S of the whole's capacity.
        let cache_bytes = all.capacity_for(args.train_cache_frac) / u64::from(args.shards);
        drop(all);
        let pick = |ids: &[u32]| -> Vec<String> {
            ids.iter()
                .map(|&i| dataset.queries.get(i as usize).to_owned())
                .collect()
        };
        let train_ids = order.train();
        let warm = pick(&train_ids[train_ids.len().saturating_sub(args.live_warm)..]);
        let test = order.test();
        let n_sat = args.live_saturate;
        let n_steady = args.live_steady;
        let setup = live::LiveSetup {
            replicas: args.replicas,
            shards: live::ShardSetup {
                count: args.shards as usize,
                route: args.shard_route.clone(),
            },
            index: index.clone(),
            sizes_path,
            sizes: &loaded,
            table: table.clone(),
            cache_bytes,
            eviction: args.eviction,
            flash_read_mbps: Some(args.flash_read_mbps),
            eps: args.live_eps,
            routing: args.routing.clone(),
            cache_admission: crate::routing_args::cache_admission(args.cache_admission)?,
            warm,
            saturate: pick(&test[..n_sat]),
            steady: pick(&test[n_sat..n_sat + n_steady]),
            concurrency: args.live_concurrency,
            balancers: args.balancers as usize,
            backlog_reports_ms: args.live_backlog_reports_ms,
            slots: args.live_slots,
            steal_after_ms: args.live_steal_after_ms,
            rate: args.live_rate,
            others_load: args.live_others_load,
            sim_cpu_us: args.sim_cpu_us,
            sim_cores: args.sim_cores.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
            }),
            load_frac: args.live_load,
            policies: live_policies,
            rounds: args.live_rounds as usize,
            work_dir: args.out.join("live"),
        };
        let r = live::run(&setup)?;
        live::write_json(&args.out.join("live.json"), &r)?;
        report::live_charts(&args.out, &r)?;
        Some(r)
    } else {
        None
    };

    let md = report::render(&eval_report, live_report.as_ref())?;
    let md_path = args.out.join("report.md");
    std::fs::write(&md_path, md).with_context(|| format!("{}: cannot write", md_path.display()))?;
    if let Some(r) = &live_report {
        report::print_live_table(r);
    }
    println!("report: {}", md_path.display());
    Ok(())
}
