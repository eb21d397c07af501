//! The live half of `ballot demo`: the same log, sizes, cache and policies as the
//! simulation, but served by real processes over real HTTP on loopback.
//!
//! For each policy, in order: start R fresh replicas (cold caches of the simulated capacity,
//! flash bandwidth emulated per replica with `--flash-read-mbps` so that flash is the
//! bottleneck) and a balancer routing by that policy; warm the caches with the last
//! `warm` queries of the train part; replay the first part of the test queries closed-loop
//! (`concurrency` clients: throughput at saturation); replay the rest open-loop at one fixed
//! rate shared by every policy (latency at the same offered load); read every replica's
//! `/stats` around both; stop everything.
//!
//! The simulator replays exactly the same query sequence (warm queries as its warm-up, the
//! measured ones counted) with the same policy, sizes and capacity, so the simulated and
//! measured miss bytes ratios compare like for like. The balancer bounds load the way the
//! simulator does (`--load auto`: the table's flash work, the others' queries routed per
//! replica, over the last 10,000 decisions, [`DEFAULT_WINDOW`]); what differs is only what
//! a live system adds: concurrent queries interleave their cache accesses, and a replica
//! falling behind (at the balancer's default stall cap, twice the mean of requests in
//! flight plus 2) sheds queries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use balancer::policy::admission::CacheAdmission;
use balancer::policy::{build_policy, PolicyKind, PolicyParams};
use cache_sim::sim::admission::Admission;
use cache_sim::sim::replay::{replay, NoObserver, SimConfig, DEFAULT_WINDOW};
use cache_sim::sim::{SimLoad, Trace};
use data::sizes::Sizes;
use data::table::VotingTable;
use eviction::EvictionKind;
use serde::Serialize;

use super::cluster::{
    start_balancer, start_replica, stop_children_on_signal, BalancerSpec, Proc, ReplicaSpec,
    ShardsSpec,
};
use crate::cmd::replay::stats::ClusterStats;
use crate::cmd::replay::{replay_queries, Measured, Mode};

/// The shards of a sharded demo.
#[derive(Clone, Debug)]
pub struct ShardSetup {
    /// Shards S (1: one index).
    pub count: usize,
    /// The balancer's `[shards] route`.
    pub route: String,
}

/// Everything the live run needs.
pub struct LiveSetup<'a> {
    /// Replica count R (of each shard).
    pub replicas: usize,
    /// The index's shards.
    pub shards: ShardSetup,
    /// Index directory (built by the demo; with shards, the directory of `shard-<s>`).
    pub index: PathBuf,
    /// The index's stored sizes (what the replicas cache and the simulator counts).
    pub sizes_path: PathBuf,
    /// The same sizes, loaded.
    pub sizes: &'a Sizes,
    /// The learned voting table.
    pub table: PathBuf,
    /// Per-replica cache bytes (of one shard's replica).
    pub cache_bytes: u64,
    /// Eviction policy of every replica's cache (live and simulated).
    pub eviction: EvictionKind,
    /// Emulated flash bandwidth per replica, MB/s.
    pub flash_read_mbps: Option<f64>,
    /// Load-bound slack.
    pub eps: f64,
    /// What the load bound counts, in the balancer and the simulator alike.
    pub routing: crate::routing_args::RoutingArgs,
    /// The table's cache admission rule (live: the balancer's `[policy] cache_admission`).
    pub cache_admission: Option<CacheAdmission>,
    /// Queries that warm the caches (not counted).
    pub warm: Vec<String>,
    /// Queries replayed closed-loop (counted).
    pub saturate: Vec<String>,
    /// Queries replayed open-loop at the shared rate (counted).
    pub steady: Vec<String>,
    /// Closed-loop clients.
    pub concurrency: usize,
    /// Balancer processes per policy (same table and config, each on its own port); the
    /// clients are spread over them.
    pub balancers: usize,
    /// The balancers' `backlog_reports_ms`.
    pub backlog_reports_ms: u64,
    /// The balancers' `replica_max_in_flight`.
    pub slots: u64,
    /// The balancers' `steal_after_ms` (late binding; `None`: off).
    pub steal_after_ms: Option<u64>,
    /// Open-loop rate in queries/s; `None`: `load_frac` × the first policy's saturation
    /// throughput.
    pub rate: Option<f64>,
    /// Live and predicted: the load of every policy but the table, overriding
    /// `routing` (`None`: `routing`'s).
    pub others_load: Option<balancer::LoadKind>,
    /// See `rate`.
    pub load_frac: f64,
    /// Queueing prediction: CPU microseconds per query outside flash.
    pub sim_cpu_us: f64,
    /// Queueing prediction: cores every replica's CPU work shares.
    pub sim_cores: usize,
    /// Policies, in run order (of the first round).
    pub policies: Vec<PolicyKind>,
    /// Rounds over the policies, round `k` in the order rotated by `k`.
    pub rounds: usize,
    /// Where the processes' logs and configs go.
    pub work_dir: PathBuf,
}

impl LiveSetup<'_> {
    /// Replica processes: replicas × shards.
    fn servers(&self) -> usize {
        self.replicas * self.shards.count
    }

    /// The index directory of shard `s`.
    fn shard_index(&self, s: usize) -> PathBuf {
        if self.shards.count > 1 {
            replica::shard_dir(&self.index, s as u32)
        } else {
            self.index.clone()
        }
    }

    /// The table's weight of the shadow caches' evidence: `--cache-evidence`, or 0 with
    /// shards (the balancer keeps no shadow caches for a sharded backend).
    fn cache_evidence(&self) -> f64 {
        if self.shards.count > 1 {
            0.0
        } else {
            self.routing.cache_evidence
        }
    }

    /// The load the live balancer and the queueing prediction bound `kind` by.
    fn live_load_for(&self, kind: PolicyKind) -> balancer::LoadKind {
        match self.others_load {
            Some(load) if !kind.needs_table() => load,
            _ => self.routing.load_for(kind),
        }
    }
}

/// One policy's live result next to the simulator's prediction.
#[derive(Clone, Debug, Serialize)]
pub struct LiveRow {
    /// Policy name.
    pub policy: String,
    /// The round it ran in (1-based).
    pub round: usize,
    /// Simulated miss bytes ratio over the counted queries.
    pub simulated_miss_bytes_ratio: f64,
    /// Simulated max/mean queries per replica.
    pub simulated_imbalance: f64,
    /// Simulated share of queries routed away from their first choice (load bound).
    pub simulated_overflow_share: f64,
    /// Measured over HTTP: Σ miss bytes / Σ requested bytes from the replicas' `/stats`.
    pub measured_miss_bytes_ratio: f64,
    /// Measured miss bytes ratio of the closed-loop and of the open-loop phase.
    pub measured_by_phase: [f64; 2],
    /// Measured max/mean queries per replica.
    pub measured_imbalance: f64,
    /// Share of the counted phases' first attempts the balancer routed by `overflow` (its
    /// `/metrics` before and after).
    pub measured_overflow_share: f64,
    /// Measured flash bytes per counted query.
    pub flash_bytes_per_query: f64,
    /// Closed loop: the replicas' flash use, their flash bytes over the emulated bandwidth
    /// times the phase's wall time (0 without a bandwidth limit).
    pub saturation_flash_use: f64,
    /// Share of the counted phases' first attempts that late binding moved to another
    /// replica (`stolen`).
    pub measured_stolen_share: f64,
    /// Simulated: the busiest replica's share of the flash bytes read.
    pub simulated_flash_share_max: f64,
    /// Measured: the busiest replica's share of the flash bytes read (each replica's
    /// `/stats` `flash_bytes`, before and after the counted phases). With flash the
    /// bottleneck, throughput follows it; 1/R is perfect balance.
    pub measured_flash_share_max: f64,
    /// Closed loop: answers per second at saturation.
    pub saturation_qps: f64,
    /// Closed loop: p99 latency, ms.
    pub saturation_p99_ms: f64,
    /// Open loop: the offered rate, queries/s.
    pub offered_qps: f64,
    /// Open loop: answers per second.
    pub steady_qps: f64,
    /// Open loop: p50 latency from the intended send time, ms.
    pub steady_p50_ms: f64,
    /// Open loop: p99 latency from the intended send time, ms.
    pub steady_p99_ms: f64,
    /// The queueing simulator's prediction of the same three phases
    /// (`cache_sim::queueing::simulate_live`), at the same offered rate.
    pub predicted: Predicted,
    /// Lists the replicas read from flash and did not cache, over both counted phases (the
    /// table's cache admission rule).
    pub uncached_reads: u64,
    /// Requests sent over both counted phases (warm-up excluded).
    pub sent: u64,
    /// Failed requests over warm-up and both phases.
    pub errors: u64,
    /// The same failures by kind (`http_400`, `timeout`, ...).
    pub errors_by_kind: BTreeMap<String, u64>,
}

/// The queueing simulator's prediction of one policy's live phases.
#[derive(Clone, Debug, Serialize)]
pub struct Predicted {
    /// Closed loop: answers per simulated second.
    pub saturation_qps: f64,
    /// Closed loop: p99 latency, ms.
    pub saturation_p99_ms: f64,
    /// Open loop: p50 latency from the intended send time, ms.
    pub steady_p50_ms: f64,
    /// Open loop: p99 latency from the intended send time, ms.
    pub steady_p99_ms: f64,
    /// Share of the counted phases' decisions made by overflow.
    pub overflow_share: f64,
    /// Miss bytes ratio over the counted phases.
    pub miss_bytes_ratio: f64,
    /// The busiest replica's share of the counted phases' flash bytes.
    pub flash_share_max: f64,
    /// Closed loop: the replicas' mean flash use.
    pub saturation_flash_use: f64,
    /// Share of the counted queries late binding moved.
    pub stolen_share: f64,
    /// Simulated queries per second of wall time (the simulator's own speed).
    pub simulated_queries_per_sec: f64,
}

/// What the live run measured.
#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    /// One row per policy and round, in run order.
    pub rows: Vec<LiveRow>,
    /// Rounds over the policies (each in an order rotated by one).
    pub rounds: usize,
    /// Replicas started per policy (of each shard).
    pub replicas: usize,
    /// Shards.
    pub shards: usize,
    /// The balancer's `[shards] route` (with shards).
    pub shard_route: String,
    /// Per-replica cache bytes.
    pub cache_bytes: u64,
    /// Eviction policy of every replica's cache.
    pub eviction: EvictionKind,
    /// Emulated flash MB/s per replica.
    pub flash_read_mbps: Option<f64>,
    /// Warm-up, closed-loop and open-loop query counts.
    pub warm_queries: usize,
    /// See `warm_queries`.
    pub saturate_queries: usize,
    /// See `warm_queries`.
    pub steady_queries: usize,
    /// Closed-loop clients.
    pub concurrency: usize,
    /// Where the balancer's `work` load read each query's flash bytes (a
    /// [`balancer::WorkSource`] name).
    pub work_source: &'static str,
    /// Balancer processes per policy.
    pub balancers: usize,
    /// Their `backlog_reports_ms`.
    pub backlog_reports_ms: u64,
    /// The table's `[policy] cache_admission` share (`None`: not set).
    pub cache_admission: Option<f32>,
}

/// Longest open-loop phase the demo accepts (queries / rate).
const MAX_STEADY_SECS: f64 = 600.0;

/// Runs every policy live and simulated; see the module docs.
pub fn run(setup: &LiveSetup<'_>) -> Result<LiveReport> {
    if setup.saturate.is_empty() || setup.steady.is_empty() {
        bail!("the live run needs test queries for both the closed- and the open-loop phase");
    }
    stop_children_on_signal();
    std::fs::create_dir_all(&setup.work_dir)
        .with_context(|| format!("{}: cannot create", setup.work_dir.display()))?;
    let table = Arc::new(crate::inputs::read_table(&setup.table, setup.replicas)?);
    let simulated = simulate(setup, &table)?;

    let mut rows = Vec::new();
    let mut rate = setup.rate;
    let n = setup.policies.len();
    let mut predictions = vec![None; n];
    let order =
        (0..setup.rounds.max(1)).flat_map(|round| (0..n).map(move |i| (round, (i + round) % n)));
    for (round, i) in order {
        let (kind, sim) = (setup.policies[i], &simulated[i]);
        println!(
            "live: {kind} (round {}): starting {} replicas and the balancer (load {}, work \
             from {})",
            round + 1,
            setup.servers(),
            setup.live_load_for(kind),
            setup.routing.work_source
        );
        let run = serve_policy(setup, kind, round, &mut rate)?;
        // Every round serves at the one rate the first run fixed: one prediction per policy.
        let predicted = match &predictions[i] {
            Some(p) => Predicted::clone(p),
            None => {
                let p = predict(setup, &table, kind, run.offered_qps)?;
                predictions[i] = Some(p.clone());
                p
            }
        };
        let (Some(s1), Some(s2)) = (&run.saturate.stats, &run.steady.stats) else {
            bail!("no /stats were read");
        };
        let (miss, hit) = (s1.miss_bytes + s2.miss_bytes, s1.hit_bytes + s2.hit_bytes);
        let queries = s1.queries + s2.queries;
        let max_share = (0..setup.servers())
            .map(|i| delta(s1, i, "queries") + delta(s2, i, "queries"))
            .max()
            .unwrap_or(0);
        let flash = |i: usize| delta(s1, i, "flash_bytes") + delta(s2, i, "flash_bytes");
        // The busiest replica's share of its own shard's flash bytes (1/R is balance).
        let flash_share_max = (0..setup.shards.count)
            .map(|s| {
                let shard = (s * setup.replicas..(s + 1) * setup.replicas).map(flash);
                let (max, sum) = shard.fold((0, 0), |(m, t), b| (m.max(b), t + b));
                ratio(max, sum)
            })
            .fold(0.0, f64::max);
        let row = LiveRow {
            policy: kind.name().to_owned(),
            round: round + 1,
            simulated_miss_bytes_ratio: sim.miss_bytes_ratio,
            simulated_imbalance: sim.imbalance,
            simulated_overflow_share: sim.overflow_share,
            measured_miss_bytes_ratio: ratio(miss, miss + hit),
            measured_by_phase: [
                s1.miss_bytes_ratio.unwrap_or(0.0),
                s2.miss_bytes_ratio.unwrap_or(0.0),
            ],
            measured_overflow_share: run.overflow_share,
            measured_imbalance: ratio(max_share * setup.servers() as u64, queries),
            flash_bytes_per_query: ratio(s1.flash_bytes + s2.flash_bytes, queries),
            saturation_flash_use: flash_use(setup, s1.flash_bytes, run.saturate.elapsed),
            measured_stolen_share: run.stolen_share,
            simulated_flash_share_max: sim.flash_share_max,
            measured_flash_share_max: flash_share_max,
            saturation_qps: run.saturate.throughput(),
            saturation_p99_ms: run.saturate.latency_ms(99.0),
            offered_qps: run.offered_qps,
            steady_qps: run.steady.throughput(),
            steady_p50_ms: run.steady.latency_ms(50.0),
            steady_p99_ms: run.steady.latency_ms(99.0),
            predicted,
            uncached_reads: (0..setup.servers())
                .map(|i| delta(s1, i, "uncached_reads") + delta(s2, i, "uncached_reads"))
                .sum(),
            sent: run.saturate.sent + run.steady.sent,
            errors: run.warm_errors.values().sum::<u64>()
                + run.saturate.error_total()
                + run.steady.error_total(),
            errors_by_kind: merge_counts([
                &run.warm_errors,
                &run.saturate.errors,
                &run.steady.errors,
            ]),
        };
        println!(
            "live: {kind}: miss bytes ratio simulated {:.4} measured {:.4}; busiest flash \
             share simulated {:.3} measured {:.3}; {:.1} queries/s at saturation (predicted \
             {:.1}); p99 {:.1} ms at {:.1} queries/s offered (predicted {:.1}); overflow \
             {:.3} (predicted {:.3}); {}",
            row.simulated_miss_bytes_ratio,
            row.measured_miss_bytes_ratio,
            row.simulated_flash_share_max,
            row.measured_flash_share_max,
            row.saturation_qps,
            row.predicted.saturation_qps,
            row.steady_p99_ms,
            row.offered_qps,
            row.predicted.steady_p99_ms,
            row.measured_overflow_share,
            row.predicted.overflow_share,
            if row.errors == 0 {
                "0 errors".to_owned()
            } else {
                format!("errors {:?}", row.errors_by_kind)
            }
        );
        rows.push(row);
    }
    Ok(LiveReport {
        rows,
        rounds: setup.rounds.max(1),
        replicas: setup.replicas,
        shards: setup.shards.count,
        shard_route: setup.shards.route.clone(),
        cache_bytes: setup.cache_bytes,
        eviction: setup.eviction,
        flash_read_mbps: setup.flash_read_mbps,
        warm_queries: setup.warm.len(),
        saturate_queries: setup.saturate.len(),
        steady_queries: setup.steady.len(),
        concurrency: setup.concurrency,
        work_source: setup.routing.work_source.name(),
        balancers: setup.balancers.max(1),
        backlog_reports_ms: setup.backlog_reports_ms,
        cache_admission: setup.cache_admission.map(CacheAdmission::share),
    })
}

/// What serving one policy measured.
struct PolicyRun {
    /// The closed-loop phase.
    saturate: Measured,
    /// The open-loop phase.
    steady: Measured,
    /// Failed requests of the warm-up, by kind.
    warm_errors: BTreeMap<String, u64>,
    /// The open-loop rate.
    offered_qps: f64,
    /// Share of the counted phases' first attempts routed by `overflow`.
    overflow_share: f64,
    /// Share of them moved by late binding.
    stolen_share: f64,
}

/// Serves one policy (fixing the shared open-loop `rate` on the first call); see the
/// module docs.
fn serve_policy(
    setup: &LiveSetup<'_>,
    kind: PolicyKind,
    round: usize,
    rate: &mut Option<f64>,
) -> Result<PolicyRun> {
    let logs = match round {
        0 => setup.work_dir.join(kind.name()),
        r => setup
            .work_dir
            .join(format!("{}-round{}", kind.name(), r + 1)),
    };
    std::fs::create_dir_all(&logs).with_context(|| format!("{}: cannot create", logs.display()))?;
    let mut replicas = Vec::with_capacity(setup.servers());
    for s in 0..setup.shards.count {
        let spec = ReplicaSpec {
            index: setup.shard_index(s),
            cache_bytes: setup.cache_bytes,
            eviction: setup.eviction,
            flash_read_mbps: setup.flash_read_mbps,
        };
        for j in 0..setup.replicas {
            replicas.push(start_replica(&spec, &replica_name(setup, s, j), &logs)?);
        }
    }
    let spec = BalancerSpec {
        policy: kind.name().to_owned(),
        table: kind.needs_table().then(|| setup.table.clone()),
        sizes: Some(setup.sizes_path.clone()),
        eps: setup.eps,
        load: setup.live_load_for(kind),
        work_query_bytes: setup.routing.work_query_bytes,
        work_source: setup.routing.work_source,
        // `cache-aware`, and `table` with evidence, route by the shadow caches too.
        shadow: (setup.routing.work_source == balancer::WorkSource::Shadow
            || kind == PolicyKind::CacheAware
            || (kind == PolicyKind::Table && setup.cache_evidence() > 0.0))
            .then_some((setup.cache_bytes, setup.eviction)),
        homes: setup.routing.homes,
        cache_evidence: setup.cache_evidence(),
        cache_admission: setup
            .cache_admission
            .filter(|_| kind == PolicyKind::Table)
            .map(CacheAdmission::share),
        load_window: DEFAULT_WINDOW,
        backlog_reports_ms: setup.backlog_reports_ms,
        replica_max_in_flight: setup.slots,
        steal_after_ms: setup.steal_after_ms,
        shards: (setup.shards.count > 1).then(|| ShardsSpec {
            count: setup.shards.count,
            route: setup.shards.route.clone(),
        }),
    };
    let members: Vec<&Proc> = replicas.iter().collect();
    let balancers = (0..setup.balancers.max(1))
        .map(|j| start_balancer(&spec, j, &members, &logs))
        .collect::<Result<Vec<_>>>()?;
    let targets: Vec<String> = balancers.iter().map(Proc::url).collect();
    let stats: Vec<String> = replicas.iter().map(|r| r.url()).collect();
    let closed = Mode::Closed {
        workers: setup.concurrency,
    };
    let warm = replay_queries(&targets, &[], closed, Arc::new(setup.warm.clone()))?;
    fail_if_interrupted(&warm)?;
    println!(
        "live: {kind}: warmed with {} queries ({:.1} queries/s)",
        warm.ok,
        warm.throughput()
    );
    let before = routing_reasons(&balancers)?;
    let saturate = replay_queries(&targets, &stats, closed, Arc::new(setup.saturate.clone()))?;
    fail_if_interrupted(&saturate)?;
    if saturate.ok == 0 || saturate.error_total() * 100 > saturate.sent {
        bail!(
            "{kind}: {} of {} requests failed in the closed-loop phase ({:?}); see the logs in {}",
            saturate.error_total(),
            saturate.sent,
            saturate.errors,
            logs.display()
        );
    }
    let offered_qps = *rate.get_or_insert(saturate.throughput() * setup.load_frac);
    let steady_secs = setup.steady.len() as f64 / offered_qps;
    if steady_secs > MAX_STEADY_SECS {
        bail!(
            "the open-loop phase would take {steady_secs:.0} s ({} queries at {offered_qps:.1} \
             queries/s); raise --live-rate or --live-load, or lower --live-steady",
            setup.steady.len()
        );
    }
    let steady = replay_queries(
        &targets,
        &stats,
        Mode::Open { rate: offered_qps },
        Arc::new(setup.steady.clone()),
    )?;
    fail_if_interrupted(&steady)?;
    let after = routing_reasons(&balancers)?;
    drop(balancers);
    drop(replicas);
    Ok(PolicyRun {
        saturate,
        steady,
        warm_errors: warm.errors.clone(),
        offered_qps,
        overflow_share: after.share_since(&before, |r| r.overflow),
        stolen_share: after.share_since(&before, |r| r.stolen),
    })
}

/// The replicas' flash use over `elapsed`: `flash_bytes` over the emulated bandwidth of
/// every replica times the wall time (0 without a bandwidth limit).
fn flash_use(setup: &LiveSetup<'_>, flash_bytes: u64, elapsed: std::time::Duration) -> f64 {
    let capacity =
        setup.flash_read_mbps.unwrap_or(0.0) * 1e6 * setup.servers() as f64 * elapsed.as_secs_f64();
    if capacity > 0.0 {
        flash_bytes as f64 / capacity
    } else {
        0.0
    }
}

/// The name of replica `j` of shard `s` (`r<j>` without shards).
fn replica_name(setup: &LiveSetup<'_>, s: usize, j: usize) -> String {
    if setup.shards.count > 1 {
        format!("s{s}r{j}")
    } else {
        format!("r{j}")
    }
}

fn fail_if_interrupted(m: &Measured) -> Result<()> {
    if m.interrupted {
        bail!("interrupted");
    }
    Ok(())
}

/// The balancer's `ballot_requests_total`, summed over replicas by reason.
#[derive(Clone, Debug, Default)]
struct Reasons {
    overflow: f64,
    stolen: f64,
    first_attempts: f64,
}

impl Reasons {
    /// The share of the first attempts routed between `before` and `self` that `counted`
    /// counts (`|r| r.overflow`, `|r| r.stolen`).
    fn share_since(&self, before: &Reasons, counted: fn(&Reasons) -> f64) -> f64 {
        let all = self.first_attempts - before.first_attempts;
        if all > 0.0 {
            (counted(self) - counted(before)) / all
        } else {
            0.0
        }
    }
}

/// Reads the routing reasons from the balancers' admin `/metrics`, summed. Retries
/// (`failover`) are not first attempts and are left out.
fn routing_reasons(balancers: &[Proc]) -> Result<Reasons> {
    let mut r = Reasons::default();
    for balancer in balancers {
        let admin = balancer.printed("admin on ").with_context(|| {
            format!(
                "the balancer printed no admin address ({})",
                balancer.log.display()
            )
        })?;
        add_reasons(&http_get(&admin, "/metrics")?, &mut r);
    }
    Ok(r)
}

/// Adds the `ballot_requests_total` first attempts of the metrics `text` to `r`.
fn add_reasons(text: &str, r: &mut Reasons) {
    for s in data::prometheus::samples(text) {
        let reason = s.label("reason").unwrap_or("");
        if s.name != "ballot_requests_total" || reason == "failover" {
            continue;
        }
        r.first_attempts += s.value;
        // Over the load bound, or full by the stall guard.
        if matches!(reason, "overflow" | "stall-guard") {
            r.overflow += s.value;
        }
        if reason == "stolen" {
            r.stolen += s.value;
        }
    }
}

/// GET `path` on `addr`, expecting 200; returns the body.
fn http_get(addr: &str, path: &str) -> Result<String> {
    crate::client::get_text(addr, path, std::time::Duration::from_secs(10))
}

/// The simulator's prediction for one policy.
struct Simulated {
    miss_bytes_ratio: f64,
    imbalance: f64,
    overflow_share: f64,
    flash_share_max: f64,
}

/// The queueing simulator's prediction of `kind`'s live phases at the offered `rate`:
/// the same queries, replicas, caches, flash emulation, load bound and clients, with the
/// CPU work of every process on `sim_cores` shared cores.
fn predict(
    setup: &LiveSetup<'_>,
    table: &Arc<VotingTable>,
    kind: PolicyKind,
    rate: f64,
) -> Result<Predicted> {
    use cache_sim::queueing::{simulate_live, Cores, LivePlan, QueueConfig, Router};
    let queries = setup
        .warm
        .iter()
        .chain(&setup.saturate)
        .chain(&setup.steady)
        .map(String::as_str);
    let trace = Trace::build(queries, setup.warm.len(), setup.sizes);
    let params = PolicyParams {
        eps: setup.eps,
        homes: setup.routing.homes,
        evidence: setup.cache_evidence(),
        term_bytes: Arc::new(trace.term_bytes_map()),
        table: Some(table.clone()),
        ..PolicyParams::new(setup.replicas)
    };
    // Per shard: each shard routes its part with the policy over its own loads; otherwise
    // one decision picks the column of every shard.
    let per_shard = setup.shards.count > 1 && setup.shards.route == "per-shard";
    let mut policies = Vec::new();
    for _ in 0..if per_shard { setup.shards.count } else { 1 } {
        policies.push(build_policy(kind, &params)?);
    }
    let refs: Vec<&dyn balancer::RoutingPolicy> = policies.iter().map(|p| p.as_ref()).collect();
    let router = if per_shard {
        Router::PerShard(&refs)
    } else {
        Router::Policy(refs[0])
    };
    let mut cfg = QueueConfig::new(setup.replicas, setup.cache_bytes);
    cfg.fanout = cache_sim::queueing::Fanout::Shards(setup.shards.count);
    cfg.eviction = setup.eviction;
    cfg.balancer.load = setup.live_load_for(kind);
    cfg.balancer.work_query_bytes = setup.routing.work_query_bytes;
    // Several balancers, each routing on its own counts, or with the replicas' backlog
    // reports on every balancer's (taken as fresh).
    cfg.balancer.count = if per_shard { 1 } else { setup.balancers.max(1) };
    cfg.balancer.reports = setup.backlog_reports_ms > 0;
    cfg.balancer.slots = u32::try_from(setup.slots).unwrap_or(u32::MAX);
    cfg.balancer.steal_after = setup.steal_after_ms.map(|ms| ms as f64 / 1e3);
    cfg.replica.flash_read_mbps = setup.flash_read_mbps;
    cfg.replica.cpu_us = setup.sim_cpu_us;
    cfg.cores = Cores::Shared(setup.sim_cores);
    cfg.admission = admission(setup, &trace, table, kind)?;
    let started = std::time::Instant::now();
    let plan = LivePlan {
        saturate: setup.saturate.len(),
        concurrency: setup.concurrency,
        rate,
    };
    let p = simulate_live(&trace, router, &cfg, &plan)
        .with_context(|| format!("queueing prediction of {kind}"))?;
    let simulated = (p.warm.sent + p.saturate.sent + p.steady.sent) as f64;
    let counted = (p.saturate.sent + p.steady.sent).max(1) as f64;
    let weighted =
        |a: f64, b: f64| (a * p.saturate.sent as f64 + b * p.steady.sent as f64) / counted;
    Ok(Predicted {
        saturation_qps: p.saturate.throughput_qps,
        saturation_p99_ms: p.saturate.latency_ms.p99,
        steady_p50_ms: p.steady.latency_ms.p50,
        steady_p99_ms: p.steady.latency_ms.p99,
        overflow_share: weighted(p.saturate.overflow_share, p.steady.overflow_share),
        miss_bytes_ratio: weighted(p.saturate.miss_bytes_ratio, p.steady.miss_bytes_ratio),
        flash_share_max: p.saturate.flash_share_max.max(p.steady.flash_share_max),
        saturation_flash_use: p.saturate.flash_use_mean(),
        stolen_share: weighted(p.saturate.stolen_share, p.steady.stolen_share),
        simulated_queries_per_sec: simulated / started.elapsed().as_secs_f64().max(1e-9),
    })
}

/// The admission rule `kind`'s replicas follow over `trace`: the table's, when asked for.
fn admission(
    setup: &LiveSetup<'_>,
    trace: &Trace,
    table: &VotingTable,
    kind: PolicyKind,
) -> Result<Option<Arc<Admission>>> {
    match setup.cache_admission {
        Some(rule) if kind == PolicyKind::Table => Ok(Some(Arc::new(Admission::for_table(
            trace,
            table,
            setup.replicas,
            rule,
        )?))),
        _ => Ok(None),
    }
}

/// Simulates every policy over warm + counted queries.
fn simulate(setup: &LiveSetup<'_>, table: &Arc<VotingTable>) -> Result<Vec<Simulated>> {
    let queries = setup
        .warm
        .iter()
        .chain(&setup.saturate)
        .chain(&setup.steady)
        .map(String::as_str);
    let trace = Trace::build(queries, setup.warm.len(), setup.sizes);
    let params = PolicyParams {
        eps: setup.eps,
        homes: setup.routing.homes,
        evidence: setup.cache_evidence(),
        term_bytes: Arc::new(trace.term_bytes_map()),
        table: Some(table.clone()),
        ..PolicyParams::new(setup.replicas)
    };
    // One column of replicas (one per shard) caches what one replica of the whole index
    // would: S times a shard replica's bytes, of lists S times as long.
    let cfg = SimConfig {
        admission: None,
        replicas: setup.replicas,
        capacity_bytes: setup.cache_bytes * setup.shards.count as u64,
        eviction: setup.eviction,
        window: DEFAULT_WINDOW,
        seed: 1,
        load: SimLoad::Queries,
    };
    setup
        .policies
        .iter()
        .map(|&kind| {
            let policy = build_policy(kind, &params)?;
            let cfg = SimConfig {
                admission: admission(setup, &trace, table, kind)?
                    .filter(|a| a.applies(cfg.capacity_bytes)),
                load: setup.routing.sim_load_for(kind)?,
                ..cfg.clone()
            };
            let r = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
            Ok(Simulated {
                miss_bytes_ratio: r.miss_bytes_ratio,
                imbalance: r.imbalance,
                overflow_share: r.overflow_share,
                flash_share_max: r.flash_share_max,
            })
        })
        .collect()
}

/// Sums counts by key.
fn merge_counts<'a>(
    maps: impl IntoIterator<Item = &'a BTreeMap<String, u64>>,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            *out.entry(k.clone()).or_insert(0) += v;
        }
    }
    out
}

fn delta(s: &ClusterStats, i: usize, key: &str) -> u64 {
    s.replicas
        .get(i)
        .and_then(|r| r.delta.get(key))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Writes the live report as JSON.
pub fn write_json(path: &Path, report: &LiveReport) -> Result<()> {
    crate::json::write_json(path, &serde_json::to_value(report)?)
}
