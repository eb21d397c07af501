//! The balancer's TOML configuration (every key with its default: docs/balancer.md),
//! parsed with `deny_unknown_fields` and validated once at start: each value's range and
//! name are checked by its serde field (the `bounded!` deserializers and the parsed types), the few rules
//! that tie fields together by [`Config::parse`], so a typo or an impossible value stops
//! the process with an error that names the file and the field (the way HAProxy and Envoy
//! refuse a bad config instead of guessing).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use balancer::load::{LoadKind, WorkSource, MAX_REPLICAS};
use balancer::policy::admission::CacheAdmission;
use balancer::policy::{
    CacheScorer, PeerParams, PolicyKind, DEFAULT_EPS, DEFAULT_EVIDENCE, DEFAULT_HOMES,
};
use balancer::ring::{DEFAULT_VNODES, MAX_VNODES, MIN_VNODES};
use balancer_routes::{Fallback, RouteConfig, Routes};
use eviction::EvictionKind;

/// Why a configuration was rejected. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read config: {source}")]
    Io {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema, or a value is out of its range.
    #[error("{path}: {source}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The TOML error (with line and column).
        source: toml::de::Error,
    },
    /// Values are inconsistent with each other.
    #[error("{path}: {detail}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Defines a deserializer per bounded numeric field: `name("label"): type = [lo, hi]`
/// refuses a value outside the range with a message naming the field.
macro_rules! bounded {
    ($($name:ident($label:literal): $ty:ty = [$lo:expr, $hi:expr];)+) => {
        $(fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
            let v = <$ty>::deserialize(d)?;
            match (($lo..=$hi).contains(&v), $hi == <$ty>::MAX) {
                (true, _) => Ok(v),
                (false, true) => Err(serde::de::Error::custom(format!(
                    concat!($label, " must be at least {}, got {}"), $lo, v
                ))),
                (false, false) => Err(serde::de::Error::custom(format!(
                    concat!($label, " must be between {} and {}, got {}"), $lo, $hi, v
                ))),
            }
        })+
    };
}

bounded! {
    load_window("load_window"): usize = [1, balancer::load::window::MAX_WINDOW];
    backlog_reports_ms("backlog_reports_ms"): u64 = [0, MAX_BACKLOG_REPORTS_MS];
    retries("retries"): u32 = [0, 16];
    ramp_queries("ramp_queries"): u64 = [0, 1u64 << 40];
    max_query_bytes("max_query_bytes (the replicas' limit)"): usize = [1, data::query::MAX_QUERY_BYTES];
    max_in_flight("max_in_flight"): usize = [1, 1_000_000];
    replica_max_in_flight("replica_max_in_flight (0: no cap)"): u64 = [0, 1_000_000];
    queue_timeout_ms("queue_timeout_ms"): u64 = [0, 60_000];
    steal_after_ms_value("steal_after_ms"): u64 = [0, 60_000];
    steal_share("steal_share"): f64 = [0.0, 1.0];
    homes("policy.homes"): f64 = [0.0, 1.0];
    admin_max_upload_bytes("admin_max_upload_bytes"): u64 = [1024, 1u64 << 32];
    max_body_bytes("max_body_bytes"): u64 = [1024, 64 << 20];
    vnodes("policy.vnodes"): usize = [MIN_VNODES, MAX_VNODES];
    cache_bytes("shadow.cache_bytes"): u64 = [1024, 1u64 << 40];
    positive_ms("a time in milliseconds"): u64 = [1, u64::MAX];
    positive_count("a count"): u32 = [1, u32::MAX];
}

fn default_steal_share() -> f64 {
    balancer::policy::DEFAULT_STEAL_SHARE
}

/// `steal_after_ms`: 0 to 60,000 milliseconds when set.
fn steal_after_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    steal_after_ms_value(d).map(Some)
}

/// `deadline_ms`: a positive number of milliseconds when set.
fn deadline_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    positive_ms(d).map(Some)
}

/// A field read by its type's `FromStr` (policy names, eviction kinds, work sources, the
/// fallback), with the parser's own message.
fn parsed<'de, D: Deserializer<'de>, T: FromStr>(d: D) -> Result<T, D::Error>
where
    T::Err: std::fmt::Display,
{
    String::deserialize(d)?
        .parse()
        .map_err(|e: T::Err| serde::de::Error::custom(e.to_string()))
}

/// A float of at least 0 (`eps`, `stall_eps`).
fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    (v >= 0.0)
        .then_some(v)
        .ok_or_else(|| serde::de::Error::custom(format!("must be >= 0, got {v}")))
}

/// `fallback`, when set.
fn fallback<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Fallback>, D::Error> {
    parsed(d).map(Some)
}

/// `policy.cache_evidence`: a finite weight of at least 0.
fn evidence<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    (v >= 0.0 && v.is_finite()).then_some(v).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "policy.cache_evidence must be a finite number of at least 0, got {v}"
        ))
    })
}

/// `policy.cache_admission`: a share in `(0, 1]`.
fn cache_admission<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CacheAdmission>, D::Error> {
    CacheAdmission::new(f64::deserialize(d)?)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("policy.cache_admission: {e}")))
}

/// `load`: `auto` (`None`) or a [`LoadKind`] name.
fn load_kind<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LoadKind>, D::Error> {
    let name = String::deserialize(d)?;
    if name == "auto" {
        return Ok(None);
    }
    name.parse().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "unknown load {name:?} (expected one of: auto, window, work, in-flight)"
        ))
    })
}

/// `[health] path`: an absolute request path.
fn request_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let path = String::deserialize(d)?;
    if is_request_path(&path) {
        Ok(path)
    } else {
        Err(serde::de::Error::custom(format!(
            "health: path {path:?} is not an absolute request path like \"/healthz\""
        )))
    }
}

/// Health-check settings (HAProxy's `inter`, `timeout check`, `fall`, `rise`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Time between two checks of one replica.
    #[serde(default = "u::<1000>", deserialize_with = "positive_ms")]
    pub interval_ms: u64,
    /// Timeout of one check.
    #[serde(default = "u::<500>", deserialize_with = "positive_ms")]
    pub timeout_ms: u64,
    /// Consecutive failed checks that eject a replica.
    #[serde(default = "c::<3>", deserialize_with = "positive_count")]
    pub fall: u32,
    /// Consecutive passed checks that re-admit an ejected replica.
    #[serde(default = "c::<2>", deserialize_with = "positive_count")]
    pub rise: u32,
    /// The path checked with `GET` (an engine's own: Solr's `/solr/<core>/admin/ping`).
    #[serde(default = "default_health_path", deserialize_with = "request_path")]
    pub path: String,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval_ms: 1000,
            timeout_ms: 500,
            fall: 3,
            rise: 2,
            path: default_health_path(),
        }
    }
}

/// The routing policy and the files it reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The policy.
    #[serde(deserialize_with = "parsed")]
    pub name: PolicyKind,
    /// Voting table (Parquet), required by `table`; SIGHUP re-reads it.
    #[serde(default)]
    pub table: Option<PathBuf>,
    /// Postings-size table (Parquet `term, bytes`); terms absent weigh 21 bytes.
    #[serde(default)]
    pub sizes: Option<PathBuf>,
    /// Virtual nodes per replica for the consistent-hashing policies.
    #[serde(default = "z::<DEFAULT_VNODES>", deserialize_with = "vnodes")]
    pub vnodes: usize,
    /// `table`: a replica whose votes reach this share of the chosen one's is a home of
    /// the query too, and the least loaded home takes it (0: always the top vote).
    #[serde(default = "default_homes", deserialize_with = "homes")]
    pub homes: f64,
    /// `table`: the cache admission rule (`balancer::policy::admission`); none: every
    /// replica caches every list it reads.
    #[serde(default, deserialize_with = "cache_admission")]
    pub cache_admission: Option<CacheAdmission>,
    /// `table`: the weight of the shadow caches' evidence beside the table's votes
    /// (`balancer::policy::vote::add_cache_evidence`; 0: the table alone). Read only with
    /// a `[shadow]` section, whose caches are the evidence.
    #[serde(default = "default_evidence", deserialize_with = "evidence")]
    pub cache_evidence: f64,
    /// `[policy.peers]`: the parameters of the peers' policies (`ars`, `prequal`,
    /// `cache-aware`), each defaulting to what its source ships.
    #[serde(default)]
    pub peers: PeersConfig,
}

/// The `[policy.peers]` table ([`PeerParams`]; docs/balancer.md names each source).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeersConfig {
    /// `prequal`: replicas probed per query.
    pub probes: usize,
    /// `prequal`: the RIF quantile above which a probed replica is hot.
    pub q_rif: f64,
    /// `cache-aware`: the share of the query's bytes the best replica must hold.
    pub cache_threshold: f64,
    /// `cache-aware`: loads are imbalanced when max − min exceeds this...
    pub balance_abs: u64,
    /// ...and max exceeds this times min.
    pub balance_rel: f64,
    /// `cache-aware`: `"sglang"` (the threshold rule) or `"llm-d"` (a weighted score).
    pub scorer: String,
    /// `llm-d`: the weights of the cache match, the queue and the free cache.
    pub weights: [f64; 3],
}

impl Default for PeersConfig {
    fn default() -> Self {
        let p = PeerParams::default();
        let CacheScorer::LlmD { prefix, queue, kv } = CacheScorer::LLM_D else {
            unreachable!("LLM_D is the llm-d scorer")
        };
        PeersConfig {
            probes: p.probes,
            q_rif: p.q_rif,
            cache_threshold: p.cache_threshold,
            balance_abs: p.balance_abs,
            balance_rel: p.balance_rel,
            scorer: "sglang".to_owned(),
            weights: [prefix, queue, kv],
        }
    }
}

impl PeersConfig {
    /// The policy parameters, or what is wrong with them.
    pub fn params(&self) -> Result<PeerParams, String> {
        let [prefix, queue, kv] = self.weights;
        let scorer = match self.scorer.as_str() {
            "sglang" => CacheScorer::Sglang,
            "llm-d" => CacheScorer::LlmD { prefix, queue, kv },
            other => {
                return Err(format!(
                    "policy.peers.scorer: unknown scorer `{other}` (sglang, llm-d)"
                ))
            }
        };
        let p = PeerParams {
            probes: self.probes,
            q_rif: self.q_rif,
            cache_threshold: self.cache_threshold,
            balance_abs: self.balance_abs,
            balance_rel: self.balance_rel,
            scorer,
        };
        p.validate().map_err(|e| format!("policy.peers: {e}"))?;
        Ok(p)
    }
}

/// The `[shadow]` section: one cache per replica in the balancer, of the replica's size and
/// eviction policy, fed with the terms of the queries routed there ([`balancer::shadow`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// Each replica's cache, in postings bytes (1 KiB to 1 TiB).
    #[serde(deserialize_with = "cache_bytes")]
    pub cache_bytes: u64,
    /// Its eviction policy.
    #[serde(default = "default_shadow_eviction", deserialize_with = "parsed")]
    pub eviction: EvictionKind,
}

/// One replica: its index in the voting table is its position in the list (among the
/// replicas of its shard, with `[shards]`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaConfig {
    /// Unique name (metrics, headers, admin API).
    pub name: String,
    /// `host:port` of its HTTP server.
    pub address: String,
    /// The shard of a document-partitioned index this replica serves (`[shards]`).
    #[serde(default)]
    pub shard: usize,
}

/// How a sharded balancer routes in its shards ([`crate::fanout`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ShardRoute {
    /// One decision, in shard 0, picks the replica column every shard's part of the query
    /// goes to; a shard whose replica of that column is not live routes its part itself.
    #[default]
    SameColumn,
    /// Each shard routes its part of the query with the policy over its own loads.
    PerShard,
}

/// What a query gets when a shard has no replica left to answer it.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum MissingShard {
    /// An error (502, naming the shards that failed).
    #[default]
    Error,
    /// The answers of the other shards, merged, flagged `"partial": true`.
    Partial,
}

/// The `[shards]` section: a document-partitioned index of S shards, each served by the
/// replicas with that `shard`; a query fans out to one replica of every shard and the
/// answers are merged ([`crate::fanout`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShardsConfig {
    /// How each shard's replica is picked.
    #[serde(default)]
    pub route: ShardRoute,
    /// A shard with no replica left: error or partial answer.
    #[serde(default)]
    pub missing: MissingShard,
}

/// The load `auto` picks for `policy`: a learned table bounds the work each replica does
/// (the bottleneck, and what `ballot train` trains it under), every other policy the
/// requests in flight (HAProxy's and Envoy's rule for bounded-load hashing).
pub fn auto_load(policy: PolicyKind) -> LoadKind {
    if policy.needs_table() {
        LoadKind::Work
    } else {
        LoadKind::InFlight
    }
}

/// The whole file (each key's meaning: docs/balancer.md, "Configuration").
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Client listener.
    pub listen: SocketAddr,
    /// Admin and metrics listener.
    #[serde(default = "default_admin_listen")]
    pub admin_listen: SocketAddr,
    /// Bearer token of the admin API.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// Environment variable holding the admin token (used when `admin_token` is absent).
    #[serde(default)]
    pub admin_token_env: Option<String>,
    /// Load-bound slack.
    #[serde(default = "default_eps", deserialize_with = "non_negative")]
    pub eps: f64,
    /// What the load bound compares (`None`: `auto`, [`auto_load`]).
    #[serde(default, deserialize_with = "load_kind")]
    pub load: Option<LoadKind>,
    /// Decisions in the trailing window of `load = "window"` and `"work"`.
    #[serde(default = "z::<10_000>", deserialize_with = "load_window")]
    pub load_window: usize,
    /// With `load = "work"`: the fixed cost of one query, in flash bytes.
    #[serde(default = "u::<{ balancer::load::DEFAULT_WORK_QUERY_BYTES }>")]
    pub work_query_bytes: u64,
    /// With `load = "work"`: where a query's flash bytes come from ([`WorkSource`]).
    #[serde(default, deserialize_with = "parsed")]
    pub work_source: WorkSource,
    /// The shadow caches (`None`: none kept).
    #[serde(default)]
    pub shadow: Option<ShadowConfig>,
    /// The stall guard of `window` and `work` (`balancer::load::Stall`).
    #[serde(default = "default_stall_eps", deserialize_with = "non_negative")]
    pub stall_eps: f64,
    /// See `stall_eps`.
    #[serde(default = "u::<{ balancer::load::DEFAULT_STALL_SLACK }>")]
    pub stall_slack: u64,
    /// How long a replica's backlog report counts (0: reports are not used).
    #[serde(default, deserialize_with = "backlog_reports_ms")]
    pub backlog_reports_ms: u64,
    /// Timeout of one upstream attempt (until the response headers).
    #[serde(default = "u::<1000>", deserialize_with = "positive_ms")]
    pub request_timeout_ms: u64,
    /// Deadline of a whole client request, retries included; default
    /// `request_timeout_ms * (retries + 1)`.
    #[serde(default, deserialize_with = "deadline_ms")]
    pub deadline_ms: Option<u64>,
    /// Extra attempts on other replicas after a connect failure or timeout.
    #[serde(default = "c::<2>", deserialize_with = "retries")]
    pub retries: u32,
    /// Routed queries over which a reloaded table ramps in (0: at once), and over which a
    /// replica coming back takes its share (its cache refills meanwhile).
    #[serde(default = "u::<2000>", deserialize_with = "ramp_queries")]
    pub ramp_queries: u64,
    /// Longest accepted query text, in bytes after decoding.
    #[serde(
        default = "z::<{ data::query::MAX_QUERY_BYTES }>",
        deserialize_with = "max_query_bytes"
    )]
    pub max_query_bytes: usize,
    /// Milliseconds a client has to send a request head.
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Milliseconds a client keep-alive connection may sit idle between requests.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Open client connections at most (default 10,000, lowered to fit the open-file limit).
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Client requests in flight at most; past it a request gets 503 with `Retry-After`.
    #[serde(default = "z::<4096>", deserialize_with = "max_in_flight")]
    pub max_in_flight: usize,
    /// Requests in flight on one replica at most (HAProxy's server `maxconn`; 0: no cap).
    #[serde(default = "u::<128>", deserialize_with = "replica_max_in_flight")]
    pub replica_max_in_flight: u64,
    /// Longest wait in a replica's queue (HAProxy's `timeout queue`).
    #[serde(default = "u::<2000>", deserialize_with = "queue_timeout_ms")]
    pub queue_timeout_ms: u64,
    /// Late binding: a request that waited this long in its replica's queue may go to
    /// another live replica with a free place and nobody waiting (delay scheduling;
    /// `crate::admit`'s `steal`). Needs `replica_max_in_flight`; unset: it waits.
    #[serde(default, deserialize_with = "steal_after_ms")]
    pub steal_after_ms: Option<u64>,
    /// With `steal_after_ms`: a request moves only to a replica whose votes reach this
    /// share of its top vote (a voting table's; any replica under the other policies).
    #[serde(default = "default_steal_share", deserialize_with = "steal_share")]
    pub steal_share: f64,
    /// Largest accepted `POST /admin/table` body (and table file read by a path reload).
    #[serde(
        default = "u::<{ 64 << 20 }>",
        deserialize_with = "admin_max_upload_bytes"
    )]
    pub admin_max_upload_bytes: u64,
    /// Largest client request body, read whole (and decoded) before routing.
    #[serde(default = "u::<{ 64 << 10 }>", deserialize_with = "max_body_bytes")]
    pub max_body_bytes: u64,
    /// What becomes of a request whose query cannot be read ([`Fallback`]; none: forwarded
    /// by [`DEFAULT_FALLBACK`], or refused by a sharded balancer).
    #[serde(default, deserialize_with = "fallback")]
    pub fallback: Option<Fallback>,
    /// Which requests are searches and where their query text is ([`balancer_routes`]).
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// The directory `{"path": ...}` table reloads may read from (relative to this file).
    #[serde(default)]
    pub tables_dir: Option<PathBuf>,
    /// Log one line per client request.
    #[serde(default)]
    pub access_log: bool,
    /// Add `x-ballot-replica` and `x-ballot-reason` to every relayed answer.
    #[serde(default)]
    pub routing_headers: bool,
    /// Health checks.
    #[serde(default)]
    pub health: HealthConfig,
    /// Routing.
    pub policy: PolicyConfig,
    /// Replicas, in table-index order.
    pub replicas: Vec<ReplicaConfig>,
    /// A sharded backend (`None`: one shard).
    #[serde(default)]
    pub shards: Option<ShardsConfig>,
}

fn default_health_path() -> String {
    "/healthz".to_owned()
}
fn default_shadow_eviction() -> EvictionKind {
    EvictionKind::Sieve
}
fn default_stall_eps() -> f64 {
    balancer::load::DEFAULT_STALL_EPS
}
fn default_homes() -> f64 {
    DEFAULT_HOMES
}
fn default_evidence() -> f64 {
    DEFAULT_EVIDENCE
}
fn default_admin_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}
fn default_eps() -> f64 {
    DEFAULT_EPS
}
fn default_header_timeout_ms() -> u64 {
    serving::limits::DEFAULT_HEADER_TIMEOUT.as_millis() as u64
}
fn default_idle_timeout_ms() -> u64 {
    serving::limits::DEFAULT_IDLE_TIMEOUT.as_millis() as u64
}

/// The default of a `u64` field.
const fn u<const N: u64>() -> u64 {
    N
}
/// The default of a `usize` field.
const fn z<const N: usize>() -> usize {
    N
}
/// The default of a `u32` field.
const fn c<const N: u32>() -> u32 {
    N
}

/// What a request whose query cannot be read gets by default: forwarded, as every other
/// load balancer forwards what it does not understand, by round-robin (HAProxy's default
/// `balance`), and counted in `ballot_client_errors_total{kind}` and as reason `fallback`.
pub const DEFAULT_FALLBACK: Fallback = Fallback::Policy(PolicyKind::RoundRobin);

/// Longest a replica's backlog report may count (a minute: older, it says nothing).
pub const MAX_BACKLOG_REPORTS_MS: u64 = 60_000;
/// Longest accepted admin token: the comparison pads both sides to this length.
pub const MAX_TOKEN_BYTES: usize = 256;
/// Open file descriptors one client connection may need (its own and one to a replica).
pub const FDS_PER_CONNECTION: u64 = 2;
/// The most shards a balancer fans out to.
pub const MAX_SHARDS: usize = 64;

/// A config after validation, with paths resolved and the token read.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The parsed file (paths resolved against its directory).
    pub config: Config,
    /// The config file.
    pub path: PathBuf,
    /// The load the bound compares (`load`, with `auto` resolved for the policy).
    pub load: LoadKind,
    /// The admin token (`None`: the admin API refuses every request).
    pub admin_token: Option<String>,
    /// The compiled `routes`.
    pub routes: Routes,
    /// Shards of the backend (1 without `[shards]`).
    pub shards: usize,
    /// `fallback`, or its default.
    pub fallback: Fallback,
}

impl Validated {
    /// The routing policy.
    pub fn policy(&self) -> PolicyKind {
        self.config.policy.name
    }

    /// One upstream attempt.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Longest wait for a replica slot.
    pub fn queue_timeout(&self) -> Duration {
        Duration::from_millis(self.config.queue_timeout_ms)
    }

    /// The whole client request.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.config.deadline_ms.unwrap_or_else(|| {
            self.config
                .request_timeout_ms
                .saturating_mul(u64::from(self.config.retries) + 1)
        }))
    }

    /// The replicas of shard `s`, in table-index order.
    pub fn shard_replicas(&self, s: usize) -> impl Iterator<Item = &ReplicaConfig> {
        self.config.replicas.iter().filter(move |r| r.shard == s)
    }
}

impl Config {
    /// The client listener's limits, before the connection cap is fitted to the open-file
    /// limit.
    pub fn client_limits(&self) -> serving::Limits {
        serving::Limits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self
                .max_connections
                .unwrap_or(serving::limits::DEFAULT_MAX_CONNECTIONS),
        }
    }

    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Validated, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut v = Self::parse(&text, path, |name| std::env::var(name).ok())?;
        if let Some(dir) = &v.config.tables_dir {
            // Canonical once, so a reload compares real paths (no symlink escapes).
            let canonical = std::fs::canonicalize(dir)
                .ok()
                .filter(|d| d.is_dir())
                .ok_or_else(|| ConfigError::Invalid {
                    path: path.to_owned(),
                    detail: format!("tables_dir {} is not a directory", dir.display()),
                })?;
            v.config.tables_dir = Some(canonical);
        }
        Ok(v)
    }

    /// Parses and validates `text` (read from `path`, which labels errors and anchors
    /// relative paths); `env` looks up the admin-token variable.
    pub fn parse(
        text: &str,
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Validated, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |detail: String| ConfigError::Invalid {
            path: path.to_owned(),
            detail,
        };
        let shards = check_shards(&config).map_err(invalid)?;
        check_replicas(&config, shards).map_err(invalid)?;
        check_policy(&config).map_err(invalid)?;
        if config.steal_after_ms.is_some() && config.replica_max_in_flight == 0 {
            return Err(invalid(
                "steal_after_ms needs replica_max_in_flight > 0: without a cap no request \
                 waits, so none can move"
                    .into(),
            ));
        }
        config.client_limits().validate().map_err(|e| {
            invalid(format!(
                "header_timeout_ms, idle_timeout_ms, max_connections: {e}"
            ))
        })?;
        let routes = Routes::compile(&config.routes)
            .map_err(|(i, e)| invalid(format!("routes[{i}]: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [
            &mut config.policy.table,
            &mut config.policy.sizes,
            &mut config.tables_dir,
        ]
        .into_iter()
        .flatten()
        {
            *p = base.join(&*p);
        }
        let admin_token = admin_token(&config, env).map_err(invalid)?;
        let fallback = match (config.fallback, shards) {
            (Some(f), _) => f,
            (None, 1) => DEFAULT_FALLBACK,
            (None, _) => Fallback::Refuse,
        };
        Ok(Validated {
            fallback,
            load: config.load.unwrap_or_else(|| auto_load(config.policy.name)),
            config,
            path: path.to_owned(),
            admin_token,
            routes,
            shards,
        })
    }
}

/// The rules between `[policy]`, `[shadow]` and `work_source`.
fn check_policy(config: &Config) -> Result<(), String> {
    let p = &config.policy;
    let policy = p.name;
    if policy.needs_table() != p.table.is_some() {
        return Err(if p.table.is_some() {
            format!("policy.table is only read by policy `table`, not `{policy}`")
        } else {
            format!("policy `{policy}` needs policy.table (a voting-table Parquet path)")
        });
    }
    if p.cache_admission.is_some() && policy != PolicyKind::Table {
        return Err(format!(
            "policy.cache_admission is only read by policy `table`, not `{policy}`"
        ));
    }
    p.peers.params()?;
    match &config.shadow {
        None if policy == PolicyKind::CacheAware => Err(
            "policy `cache-aware` routes by what the shadow caches hold: it needs a [shadow] \
             section (cache_bytes, eviction)"
                .into(),
        ),
        None if config.work_source == WorkSource::Shadow => {
            Err("work_source = \"shadow\" needs a [shadow] section (cache_bytes, eviction)".into())
        }
        Some(_) if p.sizes.is_none() => {
            Err("[shadow] needs [policy] sizes: the postings bytes \
                                             of each term are what a shadow cache holds and misses"
                .into())
        }
        _ => Ok(()),
    }
}

/// Each replica's name and address, unique names, and 1 to [`MAX_REPLICAS`] per shard.
fn check_replicas(config: &Config, shards: usize) -> Result<(), String> {
    let n = config.replicas.len();
    if n == 0 || n / shards > MAX_REPLICAS {
        return Err(format!(
            "replicas: need 1 to {MAX_REPLICAS} (per shard), got {n}"
        ));
    }
    for (i, r) in config.replicas.iter().enumerate() {
        crate::replicas::check_name(&r.name)
            .and_then(|()| crate::replicas::check_address(&r.address))
            .map_err(|e| format!("replicas[{i}]: {e}"))?;
        if config.replicas[..i].iter().any(|o| o.name == r.name) {
            return Err(format!("replicas[{i}]: duplicate name `{}`", r.name));
        }
    }
    Ok(())
}

/// The admin token: `admin_token`, or the variable `admin_token_env` names.
fn admin_token(
    config: &Config,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let token = match (&config.admin_token, &config.admin_token_env) {
        (Some(_), Some(_)) => return Err("set admin_token or admin_token_env, not both".into()),
        (Some(t), None) => Some(t.clone()),
        (None, Some(var)) => Some(
            env(var)
                .ok_or_else(|| format!("admin_token_env: environment variable {var} is not set"))?,
        ),
        (None, None) => None,
    };
    match token.as_deref() {
        Some("") => Err("the admin token is empty".into()),
        Some(t) if t.len() > MAX_TOKEN_BYTES => Err(format!(
            "the admin token is longer than {MAX_TOKEN_BYTES} bytes"
        )),
        _ => Ok(token),
    }
}

/// Checks `[shards]` against the replicas and the policy; returns the number of shards
/// (1 without `[shards]`).
fn check_shards(config: &Config) -> Result<usize, String> {
    let count = config
        .replicas
        .iter()
        .map(|r| r.shard + 1)
        .max()
        .unwrap_or(1);
    if config.shards.is_none() {
        return match config.replicas.iter().position(|r| r.shard > 0) {
            Some(i) => Err(format!(
                "replicas[{i}]: shard = {} needs a [shards] section",
                config.replicas[i].shard
            )),
            None => Ok(1),
        };
    }
    if count > MAX_SHARDS {
        return Err(format!("shards: at most {MAX_SHARDS}, got {count}"));
    }
    let per_shard = |s: usize| config.replicas.iter().filter(|r| r.shard == s).count();
    let columns = per_shard(0);
    for s in 0..count {
        match per_shard(s) {
            0 => {
                return Err(format!(
                    "shards: shard {s} has no replica (shards are numbered 0 to {})",
                    count - 1
                ))
            }
            n if n != columns => {
                return Err(format!(
                    "shards: every shard needs as many replicas as the others (a voting \
                     table's columns): shard 0 has {columns}, shard {s} has {n}"
                ))
            }
            _ => {}
        }
    }
    // The answers are merged as the ballot replica writes them.
    if let Some(i) = config
        .routes
        .iter()
        .position(|r| r.preset.as_deref() != Some("ballot"))
    {
        return Err(format!(
            "routes[{i}]: a sharded balancer merges ballot replicas' answers; its routes \
             must be the `ballot` preset"
        ));
    }
    if config.shadow.is_some() {
        // A shadow cache would price a shard's replica with the whole index's list sizes.
        return Err("[shadow] is not supported with [shards]".into());
    }
    if config.policy.cache_admission.is_some() {
        // Its bound is the cache size the table was trained for over the whole index, not
        // a shard replica's; the rule is unmeasured there.
        return Err("policy.cache_admission is not supported with [shards]".into());
    }
    if config.fallback.is_some_and(|f| f != Fallback::Refuse) {
        return Err("a sharded balancer routes searches only: fallback must be \"refuse\"".into());
    }
    Ok(count)
}

/// True when `s` is an absolute request path (an optional query included) that an HTTP
/// request line can carry: `[health] path` and `ballot replay --search-path` are checked by
/// it.
pub fn is_request_path(s: &str) -> bool {
    s.starts_with('/') && s.parse::<axum::http::uri::PathAndQuery>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
listen = "127.0.0.1:0"
admin_token = "t"
[policy]
name = "term-vote"
[[replicas]]
name = "a"
address = "127.0.0.1:9000"
"#;

    fn parse(text: &str) -> Result<Validated, ConfigError> {
        Config::parse(text, Path::new("/etc/b/balancer.toml"), |v| {
            (v == "TOK").then(|| "from-env".to_owned())
        })
    }

    #[test]
    fn health_path_is_an_absolute_request_path() {
        let with = |path: &str| parse(&format!("{BASE}[health]\npath = \"{path}\"\n"));
        let v = with("/solr/core/admin/ping?wt=json").expect("valid");
        assert_eq!(v.config.health.path, "/solr/core/admin/ping?wt=json");
        for bad in ["healthz", "", "/a b"] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.contains("health: path"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn cache_admission_is_a_share_for_a_table() {
        let table = |extra: &str| {
            parse(&BASE.replace(
                "name = \"term-vote\"",
                &format!("name = \"table\"\ntable = \"t.parquet\"\n{extra}"),
            ))
        };
        assert_eq!(
            table("").expect("valid").config.policy.cache_admission,
            None
        );
        let v = table("cache_admission = 0.5").expect("valid");
        assert_eq!(
            v.config.policy.cache_admission.map(CacheAdmission::share),
            Some(0.5)
        );
        for bad in ["0", "1.5", "-0.1"] {
            let err = table(&format!("cache_admission = {bad}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("policy.cache_admission") && err.contains("(0, 1]"),
                "{bad}: {err}"
            );
        }
        let err = parse(&BASE.replace(
            "name = \"term-vote\"",
            "name = \"term-vote\"\ncache_admission = 0.5",
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("only read by policy `table`"), "{err}");
    }

    /// Replicas `(name, shard)` after a `[policy]` of `policy` and `shards` as written.
    fn sharded(policy: &str, shards: &str, replicas: &[(&str, usize)]) -> String {
        let mut t = format!("listen = \"127.0.0.1:0\"\n[policy]\n{policy}\n{shards}\n");
        for (i, (name, shard)) in replicas.iter().enumerate() {
            t += &format!(
                "[[replicas]]\nname = \"{name}\"\naddress = \"127.0.0.1:{}\"\nshard = {shard}\n",
                9000 + i
            );
        }
        t
    }

    #[test]
    fn shards_split_the_replicas_and_are_checked() {
        let four = [("a", 0), ("b", 0), ("c", 1), ("d", 1)];
        let v = parse(&sharded("name = \"ch-bl\"", "[shards]", &four)).expect("valid");
        assert_eq!(v.shards, 2);
        let names: Vec<&str> = v.shard_replicas(1).map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["c", "d"]);
        let sh = v.config.shards.as_ref().unwrap();
        assert_eq!(
            (sh.route, sh.missing),
            (ShardRoute::SameColumn, MissingShard::Error)
        );
        let v = parse(&sharded(
            "name = \"table\"\ntable = \"t.parquet\"",
            "[shards]\nroute = \"per-shard\"\nmissing = \"partial\"",
            &four,
        ))
        .expect("valid");
        assert_eq!(v.config.policy.table, Some("/etc/b/t.parquet".into()));
        assert_eq!(v.config.shards.unwrap().missing, MissingShard::Partial);
        for (policy, shards, replicas, expect) in [
            (
                "name = \"ch-bl\"",
                "",
                &four[..],
                "shard = 1 needs a [shards] section",
            ),
            (
                "name = \"ch-bl\"",
                "[shards]",
                &[("a", 0), ("b", 2)][..],
                "shard 1 has no replica",
            ),
            (
                "name = \"ch-bl\"",
                "[shards]",
                &four[..3],
                "shard 0 has 2, shard 1 has 1",
            ),
            (
                "name = \"ch-bl\"",
                "fallback = \"random\"\n[shards]",
                &four[..],
                "fallback must be",
            ),
            (
                "name = \"ch-bl\"",
                "[shards]\nmissing = \"maybe\"",
                &four[..],
                "unknown variant",
            ),
        ] {
            let text = if let Some(rest) = shards.strip_prefix("fallback = \"random\"\n") {
                format!("fallback = \"random\"\n{}", sharded(policy, rest, replicas))
            } else {
                sharded(policy, shards, replicas)
            };
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(expect), "{shards:?}: {err}");
        }
        // The admission rule's bound is a size for the whole index: refused with shards.
        let rule = "name = \"table\"\ntable = \"t\"\ncache_admission = 0.5";
        let err = parse(&sharded(rule, "[shards]", &four)).unwrap_err();
        assert!(
            err.to_string()
                .contains("policy.cache_admission is not supported with [shards]"),
            "{err}"
        );
        let shadow = "[shadow]\ncache_bytes = 100000\n[shards]";
        let text = sharded("name = \"ch-bl\"\nsizes = \"s.parquet\"", shadow, &four);
        let err = parse(&text).unwrap_err();
        assert!(
            err.to_string().contains("[shadow] is not supported"),
            "{err}"
        );
        let routes = "[shards]\n[[routes]]\npreset = \"solr\"";
        let err = parse(&sharded("name = \"ch-bl\"", routes, &four)).unwrap_err();
        assert!(
            err.to_string().contains("must be the `ballot` preset"),
            "{err}"
        );
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let v = parse(BASE).expect("valid");
        assert_eq!(v.policy(), PolicyKind::TermVote);
        assert_eq!(v.config.health.fall, 3);
        assert_eq!(v.config.health.path, "/healthz");
        // `auto`: a hashing/voting policy without a table bounds requests in flight.
        assert_eq!(v.load, LoadKind::InFlight);
        let v = parse(&format!("load = \"window\"\n{BASE}")).expect("valid");
        assert_eq!(v.load, LoadKind::Window);
        assert_eq!(v.deadline(), Duration::from_millis(3000));
        assert!(v.config.admin_listen.ip().is_loopback());
        assert_eq!(v.config.client_limits(), serving::Limits::default());
        assert_eq!(v.config.max_in_flight, 4096);
        assert_eq!(v.config.replica_max_in_flight, 128);
        assert_eq!(v.queue_timeout(), Duration::from_millis(2000));
        assert_eq!(v.config.admin_max_upload_bytes, 64 << 20);
        assert!(v.config.tables_dir.is_none() && !v.config.access_log);
        assert!(!v.config.routing_headers);
        // No routes: ballot's own `GET /search?q=`, refused when unreadable.
        assert_eq!(v.routes, Routes::default());
        assert_eq!(v.fallback, DEFAULT_FALLBACK);
        assert_eq!(v.config.max_body_bytes, 64 << 10);
    }

    #[test]
    fn routes_and_the_fallback_are_compiled_at_load() {
        let text = format!(
            "fallback = \"round-robin\"\nmax_body_bytes = 2048\n{BASE}\
             [[routes]]\npreset = \"elasticsearch-match\"\nfield = \"title\"\n\
             [[routes]]\nmethod = [\"GET\", \"POST\"]\npath_prefix = \"/v1\"\n\
             query = {{ form = \"text\" }}\n"
        );
        let v = parse(&text).expect("valid");
        assert_eq!(v.fallback, Fallback::Policy(PolicyKind::RoundRobin));
        assert_eq!(v.config.max_body_bytes, 2048);
        let post = axum::http::Method::POST;
        assert_eq!(v.routes.find(&post, "/books/_search"), Some(0));
        assert_eq!(v.routes.find(&post, "/v1/x"), Some(1));
        assert_eq!(v.routes.find(&axum::http::Method::GET, "/search"), None);
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let cases = [
            (BASE.replace("term-vote", "nope"), "unknown routing policy"),
            (BASE.replace("listen =", "lisen ="), "unknown field"),
            (BASE.replace("term-vote", "table"), "policy.table"),
            (BASE.replace("127.0.0.1:9000", "nowhere"), "host:port"),
            (format!("eps = -1.0\n{BASE}"), "eps"),
            (format!("load_window = 0\n{BASE}"), "load_window"),
            (format!("stall_eps = -0.5\n{BASE}"), "stall_eps"),
            (format!("load = \"queue\"\n{BASE}"), "load"),
            (format!("retries = 99\n{BASE}"), "retries"),
            (format!("ramp_secs = 30.0\n{BASE}"), "ramp_queries"),
            (format!("header_timeout_ms = 0\n{BASE}"), "header timeout"),
            (format!("idle_timeout_ms = 0\n{BASE}"), "idle timeout"),
            (format!("max_connections = 0\n{BASE}"), "connection cap"),
            (format!("max_in_flight = 0\n{BASE}"), "max_in_flight"),
            (
                format!("replica_max_in_flight = 2000000\n{BASE}"),
                "replica_max_in_flight",
            ),
            (
                format!("queue_timeout_ms = 60001\n{BASE}"),
                "queue_timeout_ms",
            ),
            (
                format!("admin_max_upload_bytes = 10\n{BASE}"),
                "admin_max_upload_bytes",
            ),
            (
                BASE.replace(
                    "admin_token = \"t\"",
                    &format!("admin_token = \"{}\"", "x".repeat(257)),
                ),
                "longer than 256",
            ),
            (format!("max_query_bytes = 4097\n{BASE}"), "max_query_bytes"),
            (format!("max_body_bytes = 100\n{BASE}"), "max_body_bytes"),
            (format!("fallback = \"table\"\n{BASE}"), "needs no query"),
            (
                format!("{BASE}[[routes]]\npreset = \"opensolr\"\n"),
                "routes[0]: unknown preset",
            ),
            (
                format!("{BASE}[[routes]]\npreset = \"ballot\"\nfield = \"query\"\n"),
                "routes[0]: preset `ballot` takes no `field`",
            ),
            (
                format!("{BASE}[[routes]]\npreset = \"solr\"\n[[routes]]\npreset = \"solr\"\npath_suffix = \"/query\"\n"),
                "routes[1]: preset `solr` sets the method, path and query itself",
            ),
            (
                format!("{BASE}[[routes]]\nmethod = \"GET\"\npath = \"\"\nquery = {{ param = \"q\" }}\n"),
                "routes[0]: `path` is empty",
            ),
            (
                format!("{BASE}[[routes]]\nmethod = \"POST\"\npath = \"/s\"\nquery = {{ json = \"query.text\" }}\n"),
                "routes[0]: query.json: a JSON pointer starts with `/`",
            ),
            (
                format!("{BASE}[[routes]]\nmethod = \"POST\"\npath = \"/s\"\nquery = {{ json = \"/q~x\" }}\n"),
                "escapes `~` as `~0`",
            ),
            (
                format!("{BASE}[[routes]]\nmethod = \"GET\"\npath = \"/s\"\nquery = {{ body = \"q\" }}\n"),
                "unknown field `body`",
            ),
            (
                format!("{BASE}[[routes]]\nmethod = 3\npath = \"/s\"\nquery = {{ param = \"q\" }}\n"),
                "a method (\"GET\" or \"POST\") or a list of them",
            ),
            (
                BASE.replace("admin_token = \"t\"", "admin_token_env = \"NOPE\""),
                "NOPE",
            ),
            (
                format!("{BASE}[[replicas]]\nname = \"a\"\naddress = \"h:1\"\n"),
                "duplicate",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).expect_err(want).to_string();
            assert!(err.contains("/etc/b/balancer.toml"), "{err}");
            assert!(err.contains(want), "{want}: {err}");
        }
    }

    #[test]
    fn paths_resolve_against_the_file_and_token_from_env() {
        let text = BASE
            .replace("term-vote\"", "table\"\ntable = \"t.parquet\"")
            .replace(
                "admin_token = \"t\"",
                "admin_token_env = \"TOK\"\ntables_dir = \"tables\"",
            );
        let v = parse(&text).expect("valid");
        assert_eq!(
            v.config.tables_dir.as_deref(),
            Some(Path::new("/etc/b/tables"))
        );
        assert_eq!(
            v.config.policy.table.as_deref(),
            Some(Path::new("/etc/b/t.parquet"))
        );
        assert_eq!(v.admin_token.as_deref(), Some("from-env"));
        // `auto`: a learned table bounds work.
        assert_eq!(v.load, LoadKind::Work);
    }

    #[test]
    fn tables_dir_must_be_a_directory_and_is_made_canonical() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("b.toml");
        std::fs::write(&path, format!("tables_dir = \"nope\"\n{BASE}")).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("tables_dir") && err.contains("b.toml"),
            "{err}"
        );
        std::fs::create_dir(tmp.path().join("t")).unwrap();
        std::fs::write(&path, format!("tables_dir = \"./t/../t\"\n{BASE}")).unwrap();
        let v = Config::load(&path).expect("valid");
        let want = std::fs::canonicalize(tmp.path().join("t")).unwrap();
        assert_eq!(v.config.tables_dir, Some(want));
    }
}
