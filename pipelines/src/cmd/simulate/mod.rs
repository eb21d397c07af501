//! `ballot simulate`: the queueing simulator ([`cache_sim::queueing`]) on a log: for every
//! requested policy, the throughput at saturation (closed loop), the latency at one offered
//! load shared by all policies (open loop), the replicas' utilisation, flash shares and
//! queues, the overflow and shed shares; with `--sweep`, latency against offered load (one
//! curve per policy, SVG).
//!
//! Phases, per policy, on one simulated cluster: the train part (or its last `--warm`
//! queries) warms the caches (`--warmup instant`: replayed without time, as `ballot eval`
//! does; `closed`: closed loop with `--concurrency` clients, as `ballot demo` warms); the
//! first `--saturate` test queries run closed loop with `--concurrency` clients
//! (throughput at saturation); the next `--steady` (default: the rest) run open loop at
//! `--rate` (default: `--load-frac` × the first policy's saturation throughput, as the
//! demo sets its rate) on a fixed schedule (`--arrivals`). `--warm 5000 --saturate 5000
//! --steady 3000 --warmup closed` are `ballot demo`'s live phases. The sweep warms the same
//! way and runs the whole measured test range open loop at each rate.

mod report;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use balancer::policy::{build_policy, PolicyKind, PolicyParams, RoutingPolicy};
use cache_sim::queueing::{
    latency_sweep, Arrivals, BalancerModel, Cores, Fanout, PhaseResult, QueueConfig, ReplicaModel,
    Router, Service, Simulator, SweepPoint,
};
use cache_sim::sim::admission::Admission;
use cache_sim::sim::replay::DEFAULT_WINDOW;
use cache_sim::sim::Trace;
use clap::{Args, ValueEnum};
use eviction::EvictionKind;
use serde::Serialize;

use super::eval::parse_policies;
use crate::inputs::{CacheSizeArgs, Dataset, LogArgs, SizeArgs, SplitArgs};
use crate::progress::Stage;
use crate::routing_args::RoutingArgs;

/// How the train part warms the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Warmup {
    /// Replayed without time (as `ballot eval`).
    Instant,
    /// Closed loop with `--concurrency` clients (as `ballot demo`).
    Closed,
}

/// Open-loop arrival process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ArrivalKind {
    /// Query i leaves at i / rate (`ballot replay --rate`).
    Fixed,
    /// Poisson arrivals.
    Poisson,
    /// The log's own timestamps, scaled to the rate (needs `--split-time`).
    Log,
}

/// The service-time model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServiceKind {
    /// The replica: RAM cache, emulated flash, CPU.
    Flash,
    /// Exponential of mean `--service-mean-us`.
    Exp,
    /// `--service-shift-us` plus an exponential, mean `--service-mean-us`.
    ShiftedExp,
    /// Weibull of shape `--weibull-shape`, mean `--service-mean-us`.
    Weibull,
}

/// How a query's replica is chosen in each shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShardRouting {
    /// The policy's replica index in every shard (one vote for all shards).
    Vote,
    /// Power of `--d` choices per shard (by tasks in flight); replaces the policies.
    Pod,
    /// Each shard routes its task with a policy of its own over its own loads (the
    /// balancer's `[shards] route = "per-shard"`).
    PerShard,
}

/// Arguments of `ballot simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    /// `all` or a comma-separated list of policy names.
    #[arg(long, default_value = "all")]
    pub policies: String,
    /// Voting table for the `table` policy (with `all`, `table` runs only if given).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// With `--table`: its replicas cache a list only where the list's term votes at least
    /// this share of its top vote, at cache sizes up to the one the table was trained for
    /// (the balancer's `[policy] cache_admission`; docs/learner.md, "Caching only at the
    /// homes"). One policy over shards only.
    #[arg(long, value_name = "SHARE", requires = "table")]
    pub cache_admission: Option<f64>,
    /// Replicas R (per shard).
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    #[command(flatten)]
    pub cache: CacheSizeArgs,
    /// Eviction policy of every cache: lru (the standard evaluation's), sieve (the replica's
    /// default, which `ballot train` trains for: pass it to predict a default deployment) or
    /// s3fifo.
    #[arg(long, default_value = "lru")]
    pub eviction: EvictionKind,
    /// Load-bound slack of the bounded policies.
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub eps: f64,
    #[command(flatten)]
    pub routing: RoutingArgs,
    /// Decisions in the trailing window of `window` and `work`.
    #[arg(long, default_value_t = DEFAULT_WINDOW)]
    pub window: usize,
    /// Stall guard of `window` and `work` (the balancer's `stall_eps`).
    #[arg(long, default_value_t = balancer::load::DEFAULT_STALL_EPS)]
    pub stall_eps: f64,
    /// Stall guard extra requests (the balancer's `stall_slack`).
    #[arg(long, default_value_t = balancer::load::DEFAULT_STALL_SLACK)]
    pub stall_slack: u64,
    /// Open-loop rate, queries/s (default: --load-frac × the first policy's saturation).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open-loop rate as a fraction of the first policy's saturation throughput.
    #[arg(long, default_value_t = 0.6)]
    pub load_frac: f64,
    /// Closed-loop clients (saturation phase, and the warm-up with `--warmup closed`).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Open-loop arrival process.
    #[arg(long, value_enum, default_value_t = ArrivalKind::Fixed)]
    pub arrivals: ArrivalKind,
    /// How the train part warms the caches.
    #[arg(long, value_enum, default_value_t = Warmup::Instant)]
    pub warmup: Warmup,
    /// Warm up with only the last N train queries (default: the whole train part; the
    /// demo warms with 5,000).
    #[arg(long)]
    pub warm: Option<usize>,
    /// Test queries run closed loop (default: half the test part; the demo runs 5,000).
    #[arg(long)]
    pub saturate: Option<usize>,
    /// Test queries run open loop after those (default: the rest; the demo runs 3,000).
    #[arg(long)]
    pub steady: Option<usize>,
    /// Emulated flash bandwidth per replica, MB/s (the replica's --flash-read-mbps; the
    /// demo's 4 by default); 0: unlimited.
    #[arg(long, default_value_t = 4.0)]
    pub flash_read_mbps: f64,
    /// Latency added to every flash read, µs (the replica's --flash-latency-us).
    #[arg(long, default_value_t = 0.0)]
    pub flash_latency_us: f64,
    /// Per-query time outside flash, µs (HTTP, parsing, intersection; see the calibration
    /// notes).
    #[arg(long, default_value_t = 0.0)]
    pub cpu_us: f64,
    /// Searches a replica admits at once; past it, 503 (the replica's --max-inflight).
    #[arg(long, default_value_t = cache_sim::queueing::config::DEFAULT_MAX_INFLIGHT)]
    pub max_inflight: u64,
    /// Worker threads per replica (default: --max-inflight + 4, as the replica starts).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Cores for the CPU parts (default: unlimited, a pure delay).
    #[arg(long)]
    pub cores: Option<usize>,
    /// With --cores: all replicas share them (one machine, as in the demo) instead of
    /// each replica having its own.
    #[arg(long)]
    pub cores_shared: bool,
    /// Balancer processes, each with its own view of the load (its own requests in flight
    /// and window); clients and queries are spread over them as `ballot replay` spreads
    /// them over several `--target`s.
    #[arg(long, default_value_t = 1)]
    pub balancers: usize,
    /// With --balancers: each counts every balancer's requests in flight (the replicas'
    /// backlog reports, taken as fresh), not only its own.
    #[arg(long)]
    pub backlog_reports: bool,
    /// Late binding: queries each balancer sends one replica at once (the balancer's
    /// `replica_max_in_flight`); past it they wait in the balancer's queue for that
    /// replica. 0: no cap.
    #[arg(long, default_value_t = 0)]
    pub slots: u32,
    /// With --slots: a query held this many milliseconds may go to any replica with a
    /// free slot and nobody waiting (the balancer's `steal_after_ms`).
    #[arg(long, value_name = "MS", requires = "slots")]
    pub steal_after_ms: Option<f64>,
    /// With --steal-after-ms: a query moves only to a replica whose votes reach this
    /// share of its top vote (the balancer's `steal_share`).
    #[arg(long, default_value_t = balancer::policy::DEFAULT_STEAL_SHARE)]
    pub steal_share: f64,
    /// Shards S: a query goes to one replica of every shard and waits for the slowest.
    #[arg(long, default_value_t = 1)]
    pub shards: usize,
    /// How each shard's replica is chosen.
    #[arg(long, value_enum, default_value_t = ShardRouting::Vote)]
    pub shard_routing: ShardRouting,
    /// Choices per shard with `--shard-routing pod`.
    #[arg(long, default_value_t = 2)]
    pub d: usize,
    /// Service-time model.
    #[arg(long, value_enum, default_value_t = ServiceKind::Flash)]
    pub service: ServiceKind,
    /// Mean service time of the drawn models, µs.
    #[arg(long, default_value_t = 1000.0)]
    pub service_mean_us: f64,
    /// Deterministic part of `shifted-exp`, µs.
    #[arg(long, default_value_t = 500.0)]
    pub service_shift_us: f64,
    /// Shape of `weibull`.
    #[arg(long, default_value_t = 0.8)]
    pub weibull_shape: f64,
    /// Latency against offered load at this many rates (up to the best saturation).
    #[arg(long)]
    pub sweep: Option<usize>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write all results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the sweep (p99 against offered load, one curve per policy) as SVG here.
    #[arg(long, requires = "sweep")]
    pub svg: Option<PathBuf>,
}

/// One router's results.
#[derive(Clone, Debug, Serialize)]
pub struct RouterResult {
    /// Policy name (or `pod-d<d>`).
    pub policy: String,
    /// The train part.
    pub warmup: PhaseResult,
    /// Closed loop on the first test queries.
    pub saturation: PhaseResult,
    /// Open loop on the rest.
    pub latency: PhaseResult,
    /// The sweep, when asked for.
    pub sweep: Vec<SweepPoint>,
}

impl SimulateArgs {
    fn validate(&self) -> Result<()> {
        self.cache.validate()?;
        if !(self.load_frac > 0.0 && self.load_frac.is_finite()) {
            bail!("--load-frac must be a positive number");
        }
        if self.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            bail!("--rate must be a positive number of queries per second");
        }
        if self.concurrency == 0 {
            bail!("--concurrency must be at least 1");
        }
        if !(self.flash_read_mbps.is_finite() && self.flash_read_mbps >= 0.0) {
            bail!("--flash-read-mbps must be a non-negative number (0: unlimited)");
        }
        if self.sweep == Some(0) {
            bail!("--sweep must be at least 1 point");
        }
        crate::routing_args::cache_admission(self.cache_admission)?;
        crate::routing_args::cache_admission_needs_table(self.cache_admission, || {
            crate::cmd::eval::parse_policies(&self.policies, self.table.is_some())
        })?;
        if self.cache_admission.is_some() && self.shard_routing != ShardRouting::Vote {
            bail!("--cache-admission needs --shard-routing vote (one table routes every shard)");
        }
        if self.arrivals == ArrivalKind::Log && self.split.split_time.is_none() {
            bail!("--arrivals log needs --split-time: a shuffled test part is not in time order");
        }
        Ok(())
    }

    /// The simulator's configuration for a trace whose caches hold `capacity` bytes.
    fn config(&self, capacity: u64) -> Result<QueueConfig> {
        let us = |v: f64| v * 1e-6;
        let service = match self.service {
            ServiceKind::Flash => Service::Flash,
            ServiceKind::Exp => Service::Exp {
                mean: us(self.service_mean_us),
            },
            ServiceKind::ShiftedExp => Service::ShiftedExp {
                shift: us(self.service_shift_us),
                mean: us(self.service_mean_us),
            },
            ServiceKind::Weibull => {
                Service::weibull_with_mean(self.weibull_shape, us(self.service_mean_us))
            }
        };
        let cfg = QueueConfig {
            replicas: self.replicas,
            fanout: Fanout::Shards(self.shards),
            capacity_bytes: capacity,
            eviction: self.eviction,
            balancer: BalancerModel {
                load: self.routing.load_for(balancer::PolicyKind::RoundRobin),
                window: self.window,
                work_query_bytes: self.routing.work_query_bytes,
                stall_eps: self.stall_eps,
                stall_slack: self.stall_slack,
                count: self.balancers,
                reports: self.backlog_reports,
                slots: self.slots,
                steal_after: self.steal_after_ms.map(|ms| ms / 1e3),
                steal_share: self.steal_share,
            },
            replica: ReplicaModel {
                flash_read_mbps: (self.flash_read_mbps > 0.0).then_some(self.flash_read_mbps),
                flash_latency_us: self.flash_latency_us,
                cpu_us: self.cpu_us,
                max_inflight: self.max_inflight,
                workers: self.workers.unwrap_or(
                    (self.max_inflight as usize)
                        .saturating_add(cache_sim::queueing::config::EXTRA_WORKERS),
                ),
            },
            cores: match (self.cores, self.cores_shared) {
                (None, false) => Cores::Unlimited,
                (None, true) => bail!("--cores-shared needs --cores N"),
                (Some(n), false) => Cores::PerReplica(n),
                (Some(n), true) => Cores::Shared(n),
            },
            service,
            seed: self.seed,
            admission: None,
        };
        Ok(cfg)
    }
}

/// Runs `ballot simulate`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    args.validate()?;
    let dataset = args.log.load_reported()?;
    let sizes = args.sizes.load(&dataset)?;
    let order = args.split.apply(&dataset)?;
    let stage = Stage::start("tokenizing");
    let trace = Trace::build(dataset.ordered(&order), order.train_len, &sizes);
    stage.finish(&format!(
        "{} train + {} test queries, {} distinct terms",
        trace.train_len,
        trace.test_len(),
        trace.dict.len()
    ));
    if trace.test_len() < 2 {
        bail!("{}: the test part has fewer than 2 queries", dataset.label);
    }
    let saturate = args.saturate.unwrap_or(trace.test_len() / 2);
    if saturate == 0 || saturate >= trace.test_len() {
        bail!(
            "--saturate {saturate} must leave queries for both phases (the test part has {})",
            trace.test_len()
        );
    }
    let cfg = args.config(args.cache.capacity(&trace))?;
    // One policy per kind, or with per-shard routing one per kind and shard.
    let copies = match args.shard_routing {
        ShardRouting::PerShard => args.shards,
        _ => 1,
    };
    // The table's cache admission rule, for the table's runs.
    let mut admission = None;
    let policies: Vec<Vec<Box<dyn RoutingPolicy>>> = match args.shard_routing {
        ShardRouting::Pod => Vec::new(),
        ShardRouting::Vote | ShardRouting::PerShard => {
            let kinds = parse_policies(&args.policies, args.table.is_some())?;
            let table = match &args.table {
                Some(p) => Some(Arc::new(crate::inputs::read_table(p, args.replicas)?)),
                None => None,
            };
            admission = match (
                crate::routing_args::cache_admission(args.cache_admission)?,
                &table,
            ) {
                (Some(rule), Some(t)) => Some(Arc::new(Admission::for_table(
                    &trace,
                    t,
                    args.replicas,
                    rule,
                )?)),
                _ => None,
            };
            let params = PolicyParams {
                eps: args.eps,
                homes: args.routing.homes,
                // The balancer keeps no shadow caches for a sharded backend.
                evidence: if args.shards > 1 {
                    0.0
                } else {
                    args.routing.cache_evidence
                },
                term_bytes: Arc::new(trace.term_bytes_map()),
                table,
                ..PolicyParams::new(args.replicas)
            };
            kinds
                .into_iter()
                .map(|k| {
                    (0..copies)
                        .map(|_| build_policy(k, &params).with_context(|| format!("policy {k}")))
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<_>>()?
        }
    };
    let refs: Vec<Vec<&dyn RoutingPolicy>> = policies
        .iter()
        .map(|ps| ps.iter().map(|p| p.as_ref()).collect())
        .collect();
    let routers: Vec<Router<'_>> = match args.shard_routing {
        ShardRouting::Pod => vec![Router::PowerOfD { d: args.d }],
        ShardRouting::Vote => refs.iter().map(|ps| Router::Policy(ps[0])).collect(),
        ShardRouting::PerShard => refs.iter().map(|ps| Router::PerShard(ps)).collect(),
    };
    // Fail on a bad configuration before any work.
    cfg.validate(&routers[0])
        .context("simulator configuration")?;

    let warm = trace.train_len - args.warm.unwrap_or(trace.train_len).min(trace.train_len);
    let warm = warm..trace.train_len;
    let split = trace.train_len + saturate;
    let end = match args.steady {
        Some(0) => bail!("--steady must be at least 1"),
        Some(n) => (split + n).min(trace.len()),
        None => trace.len(),
    };
    let test = trace.train_len..end;
    let warm_arrivals = match args.warmup {
        Warmup::Instant => Arrivals::Instant,
        Warmup::Closed => Arrivals::Closed {
            clients: args.concurrency,
        },
    };
    let closed = Arrivals::Closed {
        clients: args.concurrency,
    };
    let log_times = match args.arrivals {
        ArrivalKind::Log => Some(log_times(&dataset, &order.order[split..end])?),
        _ => None,
    };
    let mut rate = args.rate;
    let mut results = Vec::new();
    for router in &routers {
        let name = router.name();
        let stage = Stage::start(&format!("simulating {name}"));
        // Each policy under its own bound (`--load auto`: a table under work).
        let mut cfg = cfg.clone();
        match router {
            Router::Policy(p) => {
                cfg.balancer.load = args.routing.load_for(p.kind());
                cfg.admission = admission.clone().filter(|_| p.kind() == PolicyKind::Table);
            }
            Router::PerShard(ps) => cfg.balancer.load = args.routing.load_for(ps[0].kind()),
            Router::PowerOfD { .. } => {}
        }
        let mut sim = Simulator::new(Some(&trace), *router, &cfg)?;
        let warmup = sim.run(warm.clone(), &warm_arrivals)?;
        let saturation = sim.run(test.start..split, &closed)?;
        let r = *rate.get_or_insert(saturation.throughput_qps * args.load_frac);
        if !(r.is_finite() && r > 0.0) {
            bail!(
                "{name}: no throughput at saturation to set the open-loop rate from; pass --rate"
            );
        }
        let open = match (args.arrivals, &log_times) {
            (ArrivalKind::Poisson, _) => Arrivals::Poisson { rate: r },
            (ArrivalKind::Log, Some(ts)) => Arrivals::from_timestamps(ts, r)?,
            _ => Arrivals::Fixed { rate: r },
        };
        let latency = sim.run(split..end, &open)?;
        stage.finish(&format!(
            "{:.1} queries/s at saturation, p99 {:.2} ms at {r:.1} queries/s",
            saturation.throughput_qps, latency.latency_ms.p99
        ));
        results.push(RouterResult {
            policy: name,
            warmup,
            saturation,
            latency,
            sweep: Vec::new(),
        });
    }
    if let Some(points) = args.sweep {
        let best = results
            .iter()
            .map(|r| r.saturation.throughput_qps)
            .fold(0.0, f64::max);
        let rates: Vec<f64> = (1..=points)
            .map(|i| best * i as f64 / points as f64)
            .collect();
        let stage = Stage::start(&format!(
            "sweeping {} rates x {} policies",
            points,
            routers.len()
        ));
        for (router, result) in routers.iter().zip(&mut results) {
            result.sweep = latency_sweep(
                &trace,
                *router,
                &cfg,
                (warm.clone(), &warm_arrivals),
                test.clone(),
                &rates,
                args.arrivals == ArrivalKind::Poisson,
            )?;
        }
        stage.finish("done");
    }
    report::print_table(&results);
    if let Some(path) = &args.json {
        report::write_json(path, args, &dataset.label, &trace, &cfg, &results)?;
    }
    if let Some(path) = &args.svg {
        report::draw_sweep(path, args, &results)?;
    }
    Ok(())
}

/// The log times of the queries at `ids` (dataset indices, in order), checked to be a
/// usable arrival schedule.
fn log_times(dataset: &Dataset, ids: &[u32]) -> Result<Vec<i64>> {
    let ts = ids
        .iter()
        .map(|&i| dataset.timestamps.get(i as usize))
        .collect::<Option<Vec<i64>>>()
        .with_context(|| {
            format!(
                "--arrivals log: {} has queries without a time",
                dataset.label
            )
        })?;
    Arrivals::from_timestamps(&ts, 1.0)
        .with_context(|| format!("--arrivals log on {}", dataset.label))?;
    Ok(ts)
}
