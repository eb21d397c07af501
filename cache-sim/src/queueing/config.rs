//! What the queueing simulator simulates: the replicas (flash emulation, CPU, admission and
//! worker limits, mirroring the `replica` binary's flags), the balancer's load view
//! (mirroring `balancer-server`'s config), the service-time model, the fan-out over shards
//! and the arrival process. Validated once, by [`QueueConfig::validate`] and
//! [`Arrivals::validate`], before anything runs.

use std::sync::Arc;

use balancer::load::{LoadKind, MAX_REPLICAS};
use balancer::policy::RoutingPolicy;
use serde::Serialize;

use eviction::EvictionKind;

use crate::sim::admission::Admission;

use balancer::load::{DEFAULT_STALL_EPS, DEFAULT_STALL_SLACK, DEFAULT_WORK_QUERY_BYTES};
/// The replica's default `--max-inflight`.
pub const DEFAULT_MAX_INFLIGHT: u64 = 256;
/// Blocking threads the replica starts beyond `--max-inflight` (its tokio runtime's
/// `max_blocking_threads(max_inflight + 4)`).
pub const EXTRA_WORKERS: usize = 4;
/// The most servers (shards × replicas) a simulation may have.
pub const MAX_SERVERS: usize = 1 << 20;

/// Why a simulation could not be set up or run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueueError {
    /// A numeric parameter is out of its range.
    #[error("{name} = {value} is invalid: it must be {rule}")]
    Param {
        /// The parameter.
        name: &'static str,
        /// Its value, as text.
        value: String,
        /// What it must be.
        rule: &'static str,
    },
    /// Policy routing picks one replica index for every shard, so it cannot spread a
    /// query's chunks over a pool.
    #[error("a routing policy cannot route a pool with {0} chunks per query; use power of d")]
    PolicyPool(usize),
    /// The phase's queries are not in the trace.
    #[error("queries {start}..{end} are outside the trace of {len} queries")]
    Range {
        /// First query.
        start: usize,
        /// One past the last query.
        end: usize,
        /// Trace length.
        len: usize,
    },
    /// The cache admission rule reads one table's votes per replica index: it needs one
    /// policy routing every shard.
    #[error("cache admission needs one routing policy over shards (not power of d, per-shard policies or a pool)")]
    Admission,
    /// An arrival schedule does not match its phase.
    #[error("arrival schedule: {0}")]
    Schedule(String),
}

fn param(name: &'static str, value: impl ToString, rule: &'static str) -> QueueError {
    QueueError::Param {
        name,
        value: value.to_string(),
        rule,
    }
}

fn positive(name: &'static str, v: f64) -> Result<(), QueueError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(param(name, v, "finite and > 0"))
    }
}

fn non_negative(name: &'static str, v: f64) -> Result<(), QueueError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(param(name, v, "finite and >= 0"))
    }
}

/// One replica, as the `replica` binary runs it (`replica/src/cli.rs`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplicaModel {
    /// `--flash-read-mbps`: emulated flash bandwidth (10^6 bytes/s) shared by every read
    /// of the replica; `None`: unlimited.
    pub flash_read_mbps: Option<f64>,
    /// `--flash-latency-us`: fixed latency of every flash read, microseconds.
    pub flash_latency_us: f64,
    /// Per-query time outside flash (HTTP, parsing, intersection), microseconds, spent
    /// after the query's lists are fetched.
    pub cpu_us: f64,
    /// `--max-inflight`: searches admitted at once; past it a query is shed (HTTP 503).
    pub max_inflight: u64,
    /// Blocking worker threads: admitted searches beyond it wait, first come first served.
    /// The replica starts `max_inflight + 4`, so by default no admitted query waits.
    pub workers: usize,
}

impl Default for ReplicaModel {
    fn default() -> Self {
        ReplicaModel {
            flash_read_mbps: None,
            flash_latency_us: 0.0,
            cpu_us: 0.0,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            workers: DEFAULT_MAX_INFLIGHT as usize + EXTRA_WORKERS,
        }
    }
}

impl ReplicaModel {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), QueueError> {
        if let Some(m) = self.flash_read_mbps {
            positive("flash_read_mbps", m)?;
        }
        non_negative("flash_latency_us", self.flash_latency_us)?;
        non_negative("cpu_us", self.cpu_us)?;
        if self.max_inflight == 0 {
            return Err(param("max_inflight", 0, "at least 1"));
        }
        if self.workers == 0 {
            return Err(param("workers", 0, "at least 1"));
        }
        Ok(())
    }
}

/// Where the per-query CPU time runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cores {
    /// Every query's CPU part runs at once (a pure delay).
    #[default]
    Unlimited,
    /// Each replica has this many cores; CPU parts beyond wait first come first served.
    PerReplica(usize),
    /// All replicas share this many cores (one machine, as in `ballot demo`).
    Shared(usize),
}

/// The service-time model of a task (one query at one replica).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// The replica model: the query's terms looked up in the replica's RAM cache one after
    /// another, each miss read from emulated flash (single-flight), then `cpu_us`.
    Flash,
    /// Exponential with this mean (seconds).
    Exp {
        /// Mean, seconds.
        mean: f64,
    },
    /// `shift` plus an exponential of mean `mean - shift` (seconds).
    ShiftedExp {
        /// The deterministic part, seconds.
        shift: f64,
        /// The whole mean, seconds (more than `shift`).
        mean: f64,
    },
    /// Weibull with this shape `k` and scale `λ` (mean `λ Γ(1 + 1/k)`).
    Weibull {
        /// Shape `k`.
        shape: f64,
        /// Scale `λ`, seconds.
        scale: f64,
    },
}

impl Service {
    /// A Weibull of shape `shape` whose mean is `mean`.
    pub fn weibull_with_mean(shape: f64, mean: f64) -> Service {
        Service::Weibull {
            shape,
            scale: mean / gamma(1.0 + 1.0 / shape),
        }
    }

    /// The mean service time (None for [`Service::Flash`], which depends on the trace).
    pub fn mean(&self) -> Option<f64> {
        match *self {
            Service::Flash => None,
            Service::Exp { mean } | Service::ShiftedExp { mean, .. } => Some(mean),
            Service::Weibull { shape, scale } => Some(scale * gamma(1.0 + 1.0 / shape)),
        }
    }

    /// The second moment `E[S²]` (None for [`Service::Flash`]).
    pub fn second_moment(&self) -> Option<f64> {
        match *self {
            Service::Flash => None,
            Service::Exp { mean } => Some(2.0 * mean * mean),
            Service::ShiftedExp { shift, mean } => {
                let e = mean - shift;
                Some(shift * shift + 2.0 * shift * e + 2.0 * e * e)
            }
            Service::Weibull { shape, scale } => Some(scale * scale * gamma(1.0 + 2.0 / shape)),
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), QueueError> {
        match *self {
            Service::Flash => Ok(()),
            Service::Exp { mean } => positive("service mean", mean),
            Service::ShiftedExp { shift, mean } => {
                non_negative("service shift", shift)?;
                positive("service mean", mean)?;
                if shift < mean {
                    Ok(())
                } else {
                    Err(param("service shift", shift, "below the mean"))
                }
            }
            Service::Weibull { shape, scale } => {
                positive("weibull shape", shape)?;
                positive("weibull scale", scale)
            }
        }
    }
}

/// The Gamma function for `x > 0` (Lanczos, g = 7, 9 terms; relative error below 1e-13).
pub fn gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection.
        return std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * gamma(1.0 - x));
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * a
}

/// How a query fans out to servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fanout {
    /// A document-partitioned index of this many shards, each with `replicas` replicas:
    /// a query sends one task to every shard (each holding `1/shards` of every postings
    /// list) and completes when the slowest answers. 1 is the plain replicated backend.
    Shards(usize),
    /// Split-and-replicate over one pool of `replicas` servers: a query is `chunks`
    /// tasks, each free to go to any server of the pool (Ghosh and Ramchandran, "Faster
    /// data-access in large-scale systems", 2018).
    Pool {
        /// Tasks per query.
        chunks: usize,
    },
}

impl Fanout {
    /// Tasks per query.
    pub fn tasks(self) -> usize {
        match self {
            Fanout::Shards(s) => s,
            Fanout::Pool { chunks } => chunks,
        }
    }
}

/// The balancer's load view (`balancer-server`'s `load`, `load_window`,
/// `work_query_bytes`, `stall_eps`, `stall_slack`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BalancerModel {
    /// What the bounded-load rule compares.
    #[serde(serialize_with = "load_name")]
    pub load: LoadKind,
    /// Decisions in the trailing window of `window` and `work`.
    pub window: usize,
    /// `work`: the fixed cost of one query, in flash bytes.
    pub work_query_bytes: u64,
    /// Stall guard of `window` and `work`: a replica holding at least
    /// `ceil((1 + stall_eps)(in flight + 1)/R) + stall_slack` requests counts as full.
    pub stall_eps: f64,
    /// See `stall_eps`.
    pub stall_slack: u64,
    /// Balancer processes in front of the same replicas, each with its own view: its own
    /// requests in flight and its own window of the queries it routed (no load reports
    /// from the replicas). Query `i` (open loop), or client `i` (closed loop), goes to
    /// balancer `i mod count`, as `ballot replay` spreads them over several targets.
    pub count: usize,
    /// With several balancers: each counts every balancer's requests in flight at a
    /// replica, not only its own, in the `in-flight` load, the stall guard and the choice
    /// among homes: the replicas' backlog reports (`backlog_reports_ms`), taken as fresh.
    pub reports: bool,
    /// Late binding: the queries each balancer sends one replica at once (the balancer's
    /// `replica_max_in_flight`); a query routed to a replica holding that many waits in
    /// the balancer's queue for it. 0: no cap (every routed query is sent at once).
    pub slots: u32,
    /// With `slots`: a query held at least this many seconds may go to any replica with a
    /// free slot and nobody waiting for it (delay scheduling; the balancer's
    /// `steal_after_ms`). `None`: it waits for its replica.
    pub steal_after: Option<f64>,
    /// With `steal_after`: a held query moves only to a replica whose real votes reach
    /// this share of its top vote ([`balancer::RoutingPolicy::alternatives`]; the
    /// balancer's `steal_share`).
    pub steal_share: f64,
}

fn load_name<S: serde::Serializer>(k: &LoadKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

impl Default for BalancerModel {
    fn default() -> Self {
        BalancerModel {
            load: LoadKind::Window,
            window: crate::sim::replay::DEFAULT_WINDOW,
            work_query_bytes: DEFAULT_WORK_QUERY_BYTES,
            stall_eps: DEFAULT_STALL_EPS,
            stall_slack: DEFAULT_STALL_SLACK,
            count: 1,
            reports: false,
            slots: 0,
            steal_after: None,
            steal_share: balancer::policy::DEFAULT_STEAL_SHARE,
        }
    }
}

/// Everything a simulation needs besides the trace, the router and the arrivals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueConfig {
    /// Replicas per shard (policy routing: at most [`MAX_REPLICAS`]); the pool size for
    /// [`Fanout::Pool`].
    pub replicas: usize,
    /// Shards, or the split-and-replicate pool.
    pub fanout: Fanout,
    /// RAM cache bytes of every server.
    pub capacity_bytes: u64,
    /// Eviction policy of every server's cache.
    pub eviction: EvictionKind,
    /// The balancer's load view.
    pub balancer: BalancerModel,
    /// The replicas.
    pub replica: ReplicaModel,
    /// Where the CPU part runs.
    pub cores: Cores,
    /// The service-time model.
    pub service: Service,
    /// Seed of every random choice (routing, arrivals, service times).
    pub seed: u64,
    /// The table's cache admission rule ([`Admission`]): a server caches a list it read
    /// only where the rule lets its replica index cache it (`None`: every list it reads).
    /// Policy routing over shards only; the rule applies when the servers' caches are no
    /// larger than the table was trained for ([`Admission::applies`]).
    #[serde(skip)]
    pub admission: Option<Arc<Admission>>,
}

impl QueueConfig {
    /// `replicas` replicas of one shard with the replica binary's defaults, flash service,
    /// LRU caches of `capacity_bytes`, the balancer's default window load, seed 1.
    pub fn new(replicas: usize, capacity_bytes: u64) -> Self {
        QueueConfig {
            replicas,
            fanout: Fanout::Shards(1),
            capacity_bytes,
            eviction: EvictionKind::Lru,
            balancer: BalancerModel::default(),
            replica: ReplicaModel::default(),
            cores: Cores::Unlimited,
            service: Service::Flash,
            seed: 1,
            admission: None,
        }
    }

    /// Number of servers: shards × replicas, or the pool.
    pub fn servers(&self) -> usize {
        match self.fanout {
            Fanout::Shards(s) => s * self.replicas,
            Fanout::Pool { .. } => self.replicas,
        }
    }

    /// Checks the configuration for `router`.
    pub fn validate(&self, router: &Router<'_>) -> Result<(), QueueError> {
        if self.replicas == 0 {
            return Err(param("replicas", 0, "at least 1"));
        }
        let tasks = self.fanout.tasks();
        if tasks == 0 || tasks > u16::MAX as usize {
            return Err(param("shards/chunks", tasks, "between 1 and 65535"));
        }
        if self.servers() > MAX_SERVERS {
            return Err(param("servers", self.servers(), "at most 2^20"));
        }
        if self.admission.is_some()
            && !(matches!(router, Router::Policy(_)) && matches!(self.fanout, Fanout::Shards(_)))
        {
            return Err(QueueError::Admission);
        }
        match router {
            Router::Policy(_) => {
                if self.replicas > MAX_REPLICAS {
                    return Err(param("replicas", self.replicas, "at most 64 with a policy"));
                }
                if let Fanout::Pool { chunks } = self.fanout {
                    if chunks > 1 {
                        return Err(QueueError::PolicyPool(chunks));
                    }
                }
            }
            Router::PerShard(policies) => {
                if self.replicas > MAX_REPLICAS {
                    return Err(param("replicas", self.replicas, "at most 64 with a policy"));
                }
                if self.fanout != Fanout::Shards(policies.len()) {
                    return Err(param(
                        "per-shard policies",
                        policies.len(),
                        "one per shard of a sharded fan-out",
                    ));
                }
            }
            Router::PowerOfD { d } => {
                if *d == 0 {
                    return Err(param("d", 0, "at least 1"));
                }
            }
        }
        if self.balancer.count == 0 || self.balancer.count > usize::from(u16::MAX) {
            return Err(param(
                "balancers",
                self.balancer.count,
                "between 1 and 65535",
            ));
        }
        if self.balancer.count > 1 && !matches!(router, Router::Policy(_)) {
            return Err(param(
                "balancers",
                self.balancer.count,
                "1 unless one policy routes (several balancers of one policy)",
            ));
        }
        if self.balancer.window == 0 {
            return Err(param("window", 0, "at least 1"));
        }
        non_negative("stall_eps", self.balancer.stall_eps)?;
        let b = &self.balancer;
        if (b.slots > 0 || b.steal_after.is_some()) && !matches!(router, Router::Policy(_)) {
            return Err(param(
                "slots, steal_after",
                b.slots,
                "0 and unset unless one policy routes (the balancer's queues)",
            ));
        }
        if let Some(after) = b.steal_after {
            non_negative("steal_after", after)?;
            non_negative("steal_share", b.steal_share)?;
            if b.slots == 0 {
                return Err(param(
                    "steal_after",
                    after,
                    "with slots (the balancer's queues)",
                ));
            }
        }
        self.replica.validate()?;
        match self.cores {
            Cores::PerReplica(0) | Cores::Shared(0) => Err(param("cores", 0, "at least 1")),
            _ => Ok(()),
        }?;
        self.service.validate()
    }
}

/// Who decides where a query goes.
#[derive(Clone, Copy)]
pub enum Router<'a> {
    /// A `balancer` routing policy over the simulated balancer's load view; its replica
    /// index serves the query in every shard (one vote for all shards, as the voting
    /// backend does).
    Policy(&'a dyn RoutingPolicy),
    /// Each shard's task is routed by that shard's policy (one per shard, in shard order)
    /// over that shard's own load view: its replicas' tasks in flight, and its own window
    /// of their work (`balancer-server`'s `[shards] route = "per-shard"`, where each shard
    /// is a proxy of its own, with `tables` a table of its own).
    PerShard(&'a [&'a dyn RoutingPolicy]),
    /// Each task goes to the server with the fewest tasks in flight among `d` drawn
    /// uniformly at random (with replacement) from its shard or pool (Mitzenmacher's
    /// power of d choices; `d = 1` is random assignment).
    PowerOfD {
        /// Choices per task.
        d: usize,
    },
}

impl std::fmt::Debug for Router<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Router::Policy(p) => write!(f, "Policy({})", p.kind()),
            Router::PerShard(ps) => write!(f, "PerShard({})", ps.len()),
            Router::PowerOfD { d } => write!(f, "PowerOfD({d})"),
        }
    }
}

impl Router<'_> {
    /// The name in reports: the policy's, or `pod-d<d>`.
    pub fn name(&self) -> String {
        match self {
            Router::Policy(p) => p.kind().name().to_owned(),
            Router::PerShard(ps) => {
                let name = ps.first().map_or("none", |p| p.kind().name());
                format!("{name}-per-shard")
            }
            Router::PowerOfD { d } => format!("pod-d{d}"),
        }
    }
}

/// How queries arrive in a phase.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// No time: each query is routed and looked up in the caches at once, as the trace
    /// replay does (a fast warm-up).
    Instant,
    /// Closed loop: this many clients, each sending its next query when its previous one
    /// is answered (`ballot replay --concurrency`).
    Closed {
        /// Clients.
        clients: usize,
    },
    /// Open loop, Poisson arrivals at this rate (queries/s).
    Poisson {
        /// Queries per second.
        rate: f64,
    },
    /// Open loop on a fixed schedule: query `i` leaves at `i / rate` (`ballot replay
    /// --rate`, what `ballot demo` offers).
    Fixed {
        /// Queries per second.
        rate: f64,
    },
    /// Open loop at given offsets (seconds from the phase start, non-decreasing), one per
    /// query: a log's own timestamps, scaled.
    Schedule(Arc<[f64]>),
}

impl Arrivals {
    /// Checks the arrivals for a phase of `queries` queries.
    pub fn validate(&self, queries: usize) -> Result<(), QueueError> {
        match self {
            Arrivals::Instant => Ok(()),
            Arrivals::Closed { clients } => {
                if *clients == 0 {
                    Err(param("clients", 0, "at least 1"))
                } else {
                    Ok(())
                }
            }
            Arrivals::Poisson { rate } | Arrivals::Fixed { rate } => positive("rate", *rate),
            Arrivals::Schedule(times) => {
                if times.len() != queries {
                    return Err(QueueError::Schedule(format!(
                        "{} offsets for {queries} queries",
                        times.len()
                    )));
                }
                let mut prev = 0.0;
                for (i, &t) in times.iter().enumerate() {
                    if !(t.is_finite() && t >= prev) {
                        return Err(QueueError::Schedule(format!(
                            "offset {i} is {t}, not finite and at least the previous {prev}"
                        )));
                    }
                    prev = t;
                }
                Ok(())
            }
        }
    }

    /// Offsets from a log's timestamps (unix ms, in query order), scaled so that their
    /// mean rate is `rate` queries/s. Errors when they are not non-decreasing or span no
    /// time.
    pub fn from_timestamps(ts_ms: &[i64], rate: f64) -> Result<Arrivals, QueueError> {
        positive("rate", rate)?;
        let (Some(&first), Some(&last)) = (ts_ms.first(), ts_ms.last()) else {
            return Err(QueueError::Schedule("no timestamps".into()));
        };
        if let Some(i) = ts_ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(QueueError::Schedule(format!(
                "timestamp {} goes back in time (split by time to keep log order)",
                i + 1
            )));
        }
        let span = (last - first) as f64;
        if span <= 0.0 || ts_ms.len() < 2 {
            return Err(QueueError::Schedule("the timestamps span no time".into()));
        }
        // Natural rate (n - 1) / span; scale offsets by natural / wanted.
        let scale = (ts_ms.len() - 1) as f64 / span / rate;
        Ok(Arrivals::Schedule(
            ts_ms.iter().map(|&t| (t - first) as f64 * scale).collect(),
        ))
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            Arrivals::Instant => "instant".into(),
            Arrivals::Closed { clients } => format!("closed loop, {clients} clients"),
            Arrivals::Poisson { rate } => format!("Poisson at {rate:.1} queries/s"),
            Arrivals::Fixed { rate } => format!("fixed schedule at {rate:.1} queries/s"),
            Arrivals::Schedule(t) => format!("log schedule of {} queries", t.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_matches_known_values() {
        assert!((gamma(1.0) - 1.0).abs() < 1e-12);
        assert!((gamma(5.0) - 24.0).abs() < 1e-10);
        assert!((gamma(0.5) - std::f64::consts::PI.sqrt()).abs() < 1e-12);
        assert!((gamma(1.5) - std::f64::consts::PI.sqrt() / 2.0).abs() < 1e-12);
    }

    #[test]
    fn moments() {
        let s = Service::ShiftedExp {
            shift: 1.0,
            mean: 3.0,
        };
        // 1 + Exp(2): E[S²] = 1 + 2·1·2 + 2·4 = 13.
        assert_eq!(s.second_moment(), Some(13.0));
        let w = Service::weibull_with_mean(1.0, 2.0);
        // Shape 1 is the exponential.
        assert!((w.mean().unwrap() - 2.0).abs() < 1e-12);
        assert!((w.second_moment().unwrap() - 8.0).abs() < 1e-9);
    }

    #[test]
    fn validation_names_the_parameter() {
        let mut c = QueueConfig::new(8, 100);
        c.replica.max_inflight = 0;
        let err = c.validate(&Router::PowerOfD { d: 2 }).unwrap_err();
        assert!(err.to_string().contains("max_inflight"), "{err}");
        let c = QueueConfig {
            fanout: Fanout::Pool { chunks: 3 },
            ..QueueConfig::new(1000, 0)
        };
        assert!(c.validate(&Router::PowerOfD { d: 2 }).is_ok());
        assert!(Arrivals::Fixed { rate: 0.0 }.validate(3).is_err());
        assert!(Arrivals::Schedule(vec![0.0, 1.0, 0.5].into())
            .validate(3)
            .is_err());
    }

    #[test]
    fn timestamps_scale_to_the_rate() {
        let a = Arrivals::from_timestamps(&[1000, 2000, 2000, 5000], 3.0).unwrap();
        // Natural rate 3 queries over 4 s = 0.75/s; scaled to 3/s: offsets / 4.
        assert_eq!(a, Arrivals::Schedule(vec![0.0, 0.25, 0.25, 1.0].into()));
        assert!(Arrivals::from_timestamps(&[5, 4], 1.0).is_err());
    }
}
