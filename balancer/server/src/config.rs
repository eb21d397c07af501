//! The balancer's TOML configuration: parsed with `deny_unknown_fields` and validated once
//! at start, so a typo or an impossible value stops the process with an error that names
//! the file (the way HAProxy and Envoy refuse a bad config instead of guessing).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! admin_listen = "127.0.0.1:8081"     # default 127.0.0.1:8081 (loopback)
//! admin_token = "secret"              # or: admin_token_env = "BALLOT_ADMIN_TOKEN"
//! eps = 0.05
//! load = "auto"                       # work for table, in-flight for every other policy; or
//!                                     # "in-flight", "window" (queries routed over the last
//!                                     # load_window) or "work" (their flash bytes + a fixed cost)
//! load_window = 10000
//! work_query_bytes = 4096             # work: the fixed per-query cost, in flash bytes
//! work_source = "auto"                # work: a query's flash bytes from the replica's
//!                                     # x-ballot-miss-bytes ("header"), its ORCA load report
//!                                     # ("orca"), the [shadow] caches ("shadow"), or "auto":
//!                                     # header, else report, else shadow, else none
//! stall_eps = 1.0                     # window, work: full anyway at a backlog (in flight +
//! stall_slack = 2                     #   queued) of ceil((1+stall_eps)·mean backlog) + stall_slack
//! backlog_reports_ms = 0              # > 0: a replica's backlog report (ORCA named_metrics.backlog)
//!                                     #   counts this long: what other balancers have there
//! slow_start_queries = 2000           # a replica that comes back ramps its share up over these
//! request_timeout_ms = 1000           # one upstream attempt
//! deadline_ms = 3000                  # the whole client request, retries included
//! retries = 2
//! ramp_queries = 2000                # routed queries over which a reloaded table ramps in
//! max_query_bytes = 4096              # at most data::query::MAX_QUERY_BYTES (4096)
//! header_timeout_ms = 10000           # client: send a request head within this
//! idle_timeout_ms = 60000             # client: keep-alive connection idle at most this
//! max_connections = 10000             # open client connections (lowered to fit ulimit -n)
//! max_in_flight = 4096                # client requests in flight; past it 503 + Retry-After
//! replica_max_in_flight = 128         # requests in flight per replica (0: no cap); past it a
//!                                     # request waits in that replica's queue for a place
//! queue_timeout_ms = 2000             #   at most this long (within the deadline), then 503
//! admin_max_upload_bytes = 67108864   # largest POST /admin/table body
//! max_body_bytes = 65536              # largest client request body (read whole, then forwarded)
//! fallback = "refuse"                 # no route, or no query read: refuse (4xx), or route by
//!                                     # "round-robin", "random", "least-loaded" or "p2c"
//! tables_dir = "tables"               # {"path": ...} reloads only read tables in here
//! access_log = false                  # one log line per client request
//! routing_headers = false             # answers name their replica and routing reason
//!
//! [health]
//! interval_ms = 1000
//! timeout_ms = 500
//! fall = 3
//! rise = 2
//! path = "/healthz"                   # GET this; 2xx passes (Solr: "/solr/core/admin/ping")
//!
//! [policy]
//! name = "table"                      # any of balancer::PolicyKind
//! table = "table.parquet"             # required by `table`; relative to this file
//! sizes = "sizes.parquet"             # optional postings sizes (term-vote, table)
//! vnodes = 160                        # consistent-hashing policies
//! homes = 0.85                        # table: votes within 85% of the top are homes too
//! cache_admission = 0.5               # table: the chosen replica caches a query's list only
//!                                     #   where the term votes for it with at least this share
//!                                     #   of its top vote (ballot's replica and [shadow] follow
//!                                     #   it, up to the cache size the table was trained for)
//!
//! # Shadow caches (crate::shadow): the balancer's estimate of each replica's flash bytes,
//! # for backends that report none. Needs [policy] sizes.
//! [shadow]
//! cache_bytes = 26214400              # each replica's RAM cache (its page cache, say)
//! eviction = "sieve"                  # the replica's eviction policy (eviction crate names)
//!
//! [[replicas]]
//! name = "r0"
//! address = "127.0.0.1:9000"
//!
//! # Where the query text is (routes::Preset; none: preset "ballot", GET /search?q=).
//! # Tried in order, the first match wins; for read-only search endpoints only.
//! [[routes]]
//! preset = "solr"                     # GET /solr/<core>/select?q=, or a POSTed form field q
//! [[routes]]
//! preset = "elasticsearch-match"      # POST /<index>/_search {"query":{"match":{"title":...}}}
//! field = "title"
//! [[routes]]
//! method = ["GET", "POST"]            # explicit: method(s) and path (path, or path_prefix
//! path_suffix = "/_search"            #   and/or path_suffix), and one query source:
//! query = { json = "/query/query_string/query" }   # param = "q", form = "q" or an RFC 6901 pointer
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use balancer::load::{LoadKind, WorkSource, MAX_REPLICAS};
use balancer::policy::admission::CacheAdmission;
use balancer::policy::{PolicyKind, DEFAULT_EPS, DEFAULT_HOMES};
use balancer::ring::{DEFAULT_VNODES, MAX_VNODES, MIN_VNODES};
use eviction::EvictionKind;

use crate::routes::{Fallback, RouteConfig, Routes};

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
    /// The file is not valid TOML for this schema.
    #[error("{path}: {source}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The TOML error (with line and column).
        source: toml::de::Error,
    },
    /// A value is out of range or inconsistent.
    #[error("{path}: {detail}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Health-check settings (HAProxy's `inter`, `timeout check`, `fall`, `rise`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Time between two checks of one replica.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Timeout of one check.
    #[serde(default = "default_check_timeout_ms")]
    pub timeout_ms: u64,
    /// Consecutive failed checks that eject a replica.
    #[serde(default = "default_fall")]
    pub fall: u32,
    /// Consecutive passed checks that re-admit an ejected replica.
    #[serde(default = "default_rise")]
    pub rise: u32,
    /// The path checked with `GET` (a search engine's own: Solr's
    /// `/solr/<core>/admin/ping`, Elasticsearch's `/_cluster/health`).
    #[serde(default = "default_health_path")]
    pub path: String,
}

fn default_health_path() -> String {
    "/healthz".to_owned()
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval_ms: default_interval_ms(),
            timeout_ms: default_check_timeout_ms(),
            fall: default_fall(),
            rise: default_rise(),
            path: default_health_path(),
        }
    }
}

/// The routing policy and the files it reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// A [`PolicyKind`] name.
    pub name: String,
    /// Voting table (Parquet), required by `table`; SIGHUP re-reads it.
    #[serde(default)]
    pub table: Option<PathBuf>,
    /// Postings-size table (Parquet `term, bytes`); terms absent weigh 21 bytes.
    #[serde(default)]
    pub sizes: Option<PathBuf>,
    /// Virtual nodes per replica for the consistent-hashing policies.
    #[serde(default = "default_vnodes")]
    pub vnodes: usize,
    /// `table`: a replica whose votes reach this share of the chosen one's is a home of
    /// the query too, and the least loaded home takes it (0: always the top vote).
    #[serde(default = "default_homes")]
    pub homes: f64,
    /// `table`: the cache admission share (`balancer::policy::admission`); none: every
    /// replica caches every list it reads.
    #[serde(default)]
    pub cache_admission: Option<f64>,
}

/// The `[shadow]` section: one cache per replica in the balancer, of the replica's size and
/// eviction policy, fed with the terms of the queries routed there ([`crate::shadow`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// Each replica's cache, in postings bytes (1 KiB to 1 TiB).
    pub cache_bytes: u64,
    /// Its eviction policy, by name (`lru`, `sieve`, ...).
    #[serde(default = "default_shadow_eviction")]
    pub eviction: String,
}

fn default_shadow_eviction() -> String {
    "sieve".to_owned()
}

fn work_source<'de, D: serde::Deserializer<'de>>(d: D) -> Result<WorkSource, D::Error> {
    let name = String::deserialize(d)?;
    name.parse()
        .map_err(|e: balancer::load::UnknownWorkSource| serde::de::Error::custom(e.to_string()))
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

/// How a sharded balancer routes in its shards ([`crate::shards`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ShardRoute {
    /// One decision, in shard 0, picks the replica column every shard's part of the query
    /// goes to (the table's vote for every shard); a shard whose replica of that column is
    /// not live routes its part itself.
    #[default]
    SameColumn,
    /// Each shard routes its part of the query with its own policy, load and table (with
    /// `tables`, a table of its own).
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
/// answers are merged ([`crate::shards`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShardsConfig {
    /// How each shard's replica is picked.
    #[serde(default)]
    pub route: ShardRoute,
    /// A shard with no replica left: error or partial answer.
    #[serde(default)]
    pub missing: MissingShard,
    /// Policy `table` with `route = "per-shard"`: one voting table per shard, in shard
    /// order (relative to this file), in place of `[policy] table`; without it every shard
    /// reads `[policy] table`.
    #[serde(default)]
    pub tables: Vec<PathBuf>,
}

/// Reads `load`: `auto` (`None`) or a [`LoadKind`] name.
fn load_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<LoadKind>, D::Error> {
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

/// The whole file.
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
    #[serde(default = "default_eps")]
    pub eps: f64,
    /// What the load bound compares: each replica's backlog, requests in flight plus
    /// requests queued for it (`in-flight`, as HAProxy counts a server's queue), the
    /// queries routed to each replica over the last `load_window` decisions (`window`, as
    /// the simulator), or their work (`work`: each query's flash bytes missed at its
    /// replica, reported by the replica in `x-ballot-miss-bytes`, plus `work_query_bytes`).
    #[serde(default, deserialize_with = "load_kind")]
    pub load: Option<LoadKind>,
    /// Decisions in the trailing window of `load = "window"` and `"work"`.
    #[serde(default = "default_load_window")]
    pub load_window: usize,
    /// With `load = "work"`: the fixed cost of one query, in flash bytes (its CPU time
    /// times the flash bandwidth, roughly).
    #[serde(default = "default_work_query_bytes")]
    pub work_query_bytes: u64,
    /// With `load = "work"`: where a query's flash bytes come from ([`WorkSource`]).
    #[serde(default, deserialize_with = "work_source")]
    pub work_source: WorkSource,
    /// The shadow caches (`None`: none kept).
    #[serde(default)]
    pub shadow: Option<ShadowConfig>,
    /// A replica that becomes live again (re-admitted by health checks, enabled after a
    /// drain, added) takes a share of the load that grows linearly from 0 to its full
    /// share over this many routed queries (HAProxy's `slowstart`, counted in queries), so
    /// it does not absorb the whole backlog at once. 0 disables slow start.
    #[serde(default = "default_slow_start_queries")]
    pub slow_start_queries: u64,
    /// With `load = "window"` or `"work"`, a replica also counts as full while its backlog
    /// (requests in flight plus queued) is at least
    /// `ceil((1 + stall_eps) * (backlog total + 1) / live) + stall_slack`: it is falling
    /// behind (a slow disk, a hot spot), and its queries overflow.
    #[serde(default = "default_stall_eps")]
    pub stall_eps: f64,
    /// See `stall_eps`.
    #[serde(default = "default_stall_slack")]
    pub stall_slack: u64,
    /// With several balancers in front of the same replicas: each answer's ORCA load
    /// report (`named_metrics.backlog`, the searches in flight at the replica, as ballot's
    /// replica sends it) tells how many requests the other balancers have there (its
    /// backlog less this balancer's at that moment), and that count is added to this
    /// balancer's own for this many milliseconds, or until the next report: in the
    /// `in-flight` load, the stall guard and the choice among homes. 0 (the default): each
    /// balancer counts only its own requests.
    #[serde(default)]
    pub backlog_reports_ms: u64,
    /// Timeout of one upstream attempt (until the response headers).
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Deadline of a whole client request, retries included; default
    /// `request_timeout_ms * (retries + 1)`.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Extra attempts on other replicas after a connect failure or timeout.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Routed queries over which a reloaded table ramps in (0: at once). About one cache
    /// refill of traffic: the simulations put the best ramp near 2,000 queries at R = 8.
    #[serde(default = "default_ramp_queries")]
    pub ramp_queries: u64,
    /// Replaced by `ramp_queries`; rejected with a message saying so.
    #[serde(default)]
    pub ramp_secs: Option<f64>,
    /// Longest accepted `q`, in bytes after percent-decoding: at most (and by default)
    /// [`data::query::MAX_QUERY_BYTES`], the replica's limit.
    #[serde(default = "default_max_query_bytes")]
    pub max_query_bytes: usize,
    /// Milliseconds a client has to send a request head, from the connection's start or
    /// from the first byte of a later request.
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: u64,
    /// Milliseconds a client keep-alive connection may sit idle between requests.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Open client connections at most (default 10,000, lowered to fit the open-file
    /// limit); past it new connections wait in the listen backlog, as with HAProxy's
    /// `maxconn`.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Client requests in flight at most; past it a request gets 503 with `Retry-After`.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Requests in flight on one replica at most (HAProxy's server `maxconn`; 0: no cap).
    /// A request routed to a replica at its cap waits in that replica's queue for a place
    /// there (first come, first served), instead of piling onto a replica that would shed
    /// it or taking another replica's place (and cache). Keep it below the
    /// replicas' own `--max-inflight` (256 by default) divided by the balancers in front.
    #[serde(default = "default_replica_max_in_flight")]
    pub replica_max_in_flight: u64,
    /// Longest wait in that queue (HAProxy's `timeout queue`), within the request's
    /// deadline; past it the answer is 503 with `Retry-After`.
    #[serde(default = "default_queue_timeout_ms")]
    pub queue_timeout_ms: u64,
    /// Largest accepted `POST /admin/table` body (and table file read by a path reload).
    #[serde(default = "default_admin_max_upload_bytes")]
    pub admin_max_upload_bytes: u64,
    /// Largest client request body (on the client listener): read whole within the
    /// request's deadline, for a form or JSON route to find its query in, and forwarded
    /// unchanged; past it 413, whatever the fallback. 1 KiB to 64 MiB.
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: u64,
    /// What becomes of a request that matches no route or whose query cannot be read:
    /// `refuse` (404 or 405 for no route, 400 for an unreadable query) or a policy that
    /// needs no query (`round-robin`, `random`, `least-loaded`, `p2c`) that routes it.
    #[serde(default = "default_fallback")]
    pub fallback: String,
    /// Which requests are searches and where their query text is, tried in order (none:
    /// the `ballot` preset, `GET /search?q=`). See [`crate::routes`].
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// The directory `{"path": ...}` table reloads may read from (relative to this file);
    /// without it path reloads are refused (uploads still work).
    #[serde(default)]
    pub tables_dir: Option<PathBuf>,
    /// Log one line per client request (target `access`: time, replica, reason, status,
    /// latency, attempts, request id).
    #[serde(default)]
    pub access_log: bool,
    /// Add `x-ballot-replica` (the replica's name) and `x-ballot-reason` (the routing rule:
    /// `vote`, `home`, `overflow`, `stall-guard`, `no-vote` or `failover`) to every relayed
    /// answer. Off by default: they tell clients
    /// the names of the replicas behind the balancer, and an answer without them is what
    /// HAProxy or nginx send; turn them on to debug routing from the client side (the
    /// access log records the same two fields).
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

fn default_interval_ms() -> u64 {
    1000
}
fn default_check_timeout_ms() -> u64 {
    500
}
fn default_fall() -> u32 {
    3
}
fn default_rise() -> u32 {
    2
}
fn default_load_window() -> usize {
    10_000
}
fn default_stall_eps() -> f64 {
    balancer::load::DEFAULT_STALL_EPS
}
/// Longest a replica's backlog report may count (a minute: older, it says nothing).
pub const MAX_BACKLOG_REPORTS_MS: u64 = 60_000;

fn default_stall_slack() -> u64 {
    balancer::load::DEFAULT_STALL_SLACK
}
fn default_vnodes() -> usize {
    DEFAULT_VNODES
}
fn default_homes() -> f64 {
    DEFAULT_HOMES
}
fn default_admin_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}
fn default_eps() -> f64 {
    DEFAULT_EPS
}
fn default_request_timeout_ms() -> u64 {
    1000
}
fn default_retries() -> u32 {
    2
}
fn default_ramp_queries() -> u64 {
    2_000
}
fn default_slow_start_queries() -> u64 {
    2_000
}
fn default_work_query_bytes() -> u64 {
    balancer::load::DEFAULT_WORK_QUERY_BYTES
}
fn default_max_query_bytes() -> usize {
    data::query::MAX_QUERY_BYTES
}
fn default_header_timeout_ms() -> u64 {
    serving::limits::DEFAULT_HEADER_TIMEOUT.as_millis() as u64
}
fn default_idle_timeout_ms() -> u64 {
    serving::limits::DEFAULT_IDLE_TIMEOUT.as_millis() as u64
}
fn default_max_in_flight() -> usize {
    4096
}
fn default_replica_max_in_flight() -> u64 {
    128
}
fn default_queue_timeout_ms() -> u64 {
    2000
}
fn default_admin_max_upload_bytes() -> u64 {
    64 << 20
}
fn default_max_body_bytes() -> u64 {
    64 << 10
}
fn default_fallback() -> String {
    "refuse".to_owned()
}

/// Longest accepted admin token: the comparison pads both sides to this length.
pub const MAX_TOKEN_BYTES: usize = 256;
/// Open file descriptors one client connection may need (its own and one to a replica).
pub const FDS_PER_CONNECTION: u64 = 2;

/// A config after validation, with paths resolved and the token read.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The parsed file (paths resolved against its directory).
    pub config: Config,
    /// The config file.
    pub path: PathBuf,
    /// The routing policy.
    pub policy: PolicyKind,
    /// The load the bound compares (`load`, with `auto` resolved for the policy).
    pub load: LoadKind,
    /// The admin token (`None`: the admin API refuses every request).
    pub admin_token: Option<String>,
    /// The compiled `routes`.
    pub routes: Routes,
    /// `fallback`, parsed.
    pub fallback: Fallback,
    /// `[shadow] eviction`, parsed (`None`: no shadow caches).
    pub shadow_eviction: Option<EvictionKind>,
    /// `[policy] cache_admission`, checked (`None`: replicas cache all they read).
    pub cache_admission: Option<CacheAdmission>,
}

impl Validated {
    /// One upstream attempt.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Longest wait for a replica slot.
    pub fn queue_timeout(&self) -> Duration {
        Duration::from_millis(self.config.queue_timeout_ms)
    }

    /// Shards of the backend (1 without `[shards]`).
    pub fn shard_count(&self) -> usize {
        self.config
            .replicas
            .iter()
            .map(|r| r.shard + 1)
            .max()
            .unwrap_or(1)
    }

    /// The config of shard `s` alone: its replicas, in order, and its table.
    pub fn shard(&self, s: usize) -> Validated {
        let mut v = self.clone();
        v.config.replicas.retain(|r| r.shard == s);
        if let Some(t) = self.config.shards.as_ref().and_then(|sh| sh.tables.get(s)) {
            v.config.policy.table = Some(t.clone());
        }
        v
    }

    /// The whole client request.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.config.deadline_ms.unwrap_or_else(|| {
            self.config
                .request_timeout_ms
                .saturating_mul(u64::from(self.config.retries) + 1)
        }))
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
        let policy: PolicyKind = config
            .policy
            .name
            .parse()
            .map_err(|e: balancer::policy::ParsePolicyKindError| invalid(format!("policy: {e}")))?;
        let shards = check_shards(&config, policy).map_err(invalid)?;
        if config.replicas.len() / shards > MAX_REPLICAS || config.replicas.is_empty() {
            return Err(invalid(format!(
                "replicas: need 1 to {MAX_REPLICAS} (per shard), got {}",
                config.replicas.len()
            )));
        }
        for (i, r) in config.replicas.iter().enumerate() {
            crate::replicas::check_name(&r.name)
                .map_err(|e| invalid(format!("replicas[{i}]: {e}")))?;
            crate::replicas::check_address(&r.address)
                .map_err(|e| invalid(format!("replicas[{i}]: {e}")))?;
            if config.replicas[..i].iter().any(|o| o.name == r.name) {
                return Err(invalid(format!(
                    "replicas[{i}]: duplicate name `{}`",
                    r.name
                )));
            }
        }
        if config.eps.is_nan() || config.eps < 0.0 {
            return Err(invalid(format!("eps must be >= 0, got {}", config.eps)));
        }
        if config.backlog_reports_ms > MAX_BACKLOG_REPORTS_MS {
            return Err(invalid(format!(
                "backlog_reports_ms must be at most {MAX_BACKLOG_REPORTS_MS}, got {}",
                config.backlog_reports_ms
            )));
        }
        if config.stall_eps.is_nan() || config.stall_eps < 0.0 {
            return Err(invalid(format!(
                "stall_eps must be >= 0, got {}",
                config.stall_eps
            )));
        }
        if !(1..=balancer::load::window::MAX_WINDOW).contains(&config.load_window) {
            return Err(invalid(format!(
                "load_window must be between 1 and {}, got {}",
                balancer::load::window::MAX_WINDOW,
                config.load_window
            )));
        }
        if !(0.0..=1.0).contains(&config.policy.homes) {
            return Err(invalid(format!(
                "policy.homes must be between 0 and 1, got {}",
                config.policy.homes
            )));
        }
        if !(MIN_VNODES..=MAX_VNODES).contains(&config.policy.vnodes) {
            return Err(invalid(format!(
                "policy.vnodes must be between {MIN_VNODES} and {MAX_VNODES}, got {}",
                config.policy.vnodes
            )));
        }
        if config.request_timeout_ms == 0 || config.deadline_ms == Some(0) {
            return Err(invalid(
                "request_timeout_ms and deadline_ms must be > 0".into(),
            ));
        }
        if config.retries > 16 {
            return Err(invalid(format!(
                "retries must be at most 16, got {}",
                config.retries
            )));
        }
        if config.ramp_secs.is_some() {
            return Err(invalid(
                "ramp_secs was replaced by ramp_queries: a reloaded table now ramps in over \
                 a number of routed queries (default 2000), as the simulator ramps it"
                    .into(),
            ));
        }
        if config.ramp_queries > 1 << 40 || config.slow_start_queries > 1 << 40 {
            return Err(invalid(
                "ramp_queries and slow_start_queries must be at most 2^40".into(),
            ));
        }
        if !(1..=data::query::MAX_QUERY_BYTES).contains(&config.max_query_bytes) {
            return Err(invalid(format!(
                "max_query_bytes must be between 1 and {} (the replicas' limit), got {}",
                data::query::MAX_QUERY_BYTES,
                config.max_query_bytes
            )));
        }
        config.client_limits().validate().map_err(|e| {
            invalid(format!(
                "header_timeout_ms, idle_timeout_ms, max_connections: {e}"
            ))
        })?;
        if config.max_in_flight == 0 || config.max_in_flight > 1_000_000 {
            return Err(invalid(format!(
                "max_in_flight must be between 1 and 1000000, got {}",
                config.max_in_flight
            )));
        }
        if config.replica_max_in_flight > 1_000_000 {
            return Err(invalid(format!(
                "replica_max_in_flight must be at most 1000000 (0: no cap), got {}",
                config.replica_max_in_flight
            )));
        }
        if config.queue_timeout_ms > 60_000 {
            return Err(invalid(format!(
                "queue_timeout_ms must be at most 60000, got {}",
                config.queue_timeout_ms
            )));
        }
        if !(1024..=1 << 32).contains(&config.admin_max_upload_bytes) {
            return Err(invalid(format!(
                "admin_max_upload_bytes must be between 1024 and 4294967296, got {}",
                config.admin_max_upload_bytes
            )));
        }
        if !(1024..=64 << 20).contains(&config.max_body_bytes) {
            return Err(invalid(format!(
                "max_body_bytes must be between 1024 and 67108864, got {}",
                config.max_body_bytes
            )));
        }
        let fallback: Fallback = config
            .fallback
            .parse()
            .map_err(|e: crate::routes::BadFallback| invalid(e.to_string()))?;
        let routes = Routes::compile(&config.routes)
            .map_err(|(i, e)| invalid(format!("routes[{i}]: {e}")))?;
        let h = &config.health;
        if h.interval_ms == 0 || h.timeout_ms == 0 || h.fall == 0 || h.rise == 0 {
            return Err(invalid(
                "health: interval_ms, timeout_ms, fall and rise must be > 0".into(),
            ));
        }
        if !is_request_path(&h.path) {
            return Err(invalid(format!(
                "health: path {:?} is not an absolute request path like \"/healthz\"",
                h.path
            )));
        }
        let shard_tables = config.shards.as_ref().is_some_and(|s| !s.tables.is_empty());
        if policy.needs_table() && config.policy.table.is_none() && !shard_tables {
            return Err(invalid(format!(
                "policy `{policy}` needs policy.table (a voting-table Parquet path)"
            )));
        }
        let cache_admission = match config.policy.cache_admission {
            None => None,
            Some(_) if policy != PolicyKind::Table => {
                return Err(invalid(format!(
                    "policy.cache_admission is only read by policy `table`, not `{policy}`"
                )))
            }
            Some(share) => Some(
                CacheAdmission::new(share)
                    .map_err(|e| invalid(format!("policy.cache_admission: {e}")))?,
            ),
        };
        if !policy.needs_table() && config.policy.table.is_some() {
            return Err(invalid(format!(
                "policy.table is only read by policy `table`, not `{policy}`"
            )));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                if p.is_relative() {
                    *p = base.join(&*p);
                }
            }
        };
        resolve(&mut config.policy.table);
        resolve(&mut config.policy.sizes);
        resolve(&mut config.tables_dir);
        for t in config.shards.iter_mut().flat_map(|s| s.tables.iter_mut()) {
            if t.is_relative() {
                *t = base.join(&*t);
            }
        }
        let admin_token = match (&config.admin_token, &config.admin_token_env) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "set admin_token or admin_token_env, not both".into(),
                ))
            }
            (Some(t), None) => Some(t.clone()),
            (None, Some(var)) => Some(env(var).ok_or_else(|| {
                invalid(format!(
                    "admin_token_env: environment variable {var} is not set"
                ))
            })?),
            (None, None) => None,
        };
        if admin_token.as_deref() == Some("") {
            return Err(invalid("the admin token is empty".into()));
        }
        if admin_token
            .as_ref()
            .is_some_and(|t| t.len() > MAX_TOKEN_BYTES)
        {
            return Err(invalid(format!(
                "the admin token is longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let load = config.load.unwrap_or_else(|| auto_load(policy));
        let shadow_eviction = match &config.shadow {
            None if config.work_source == WorkSource::Shadow => {
                return Err(invalid(
                    "work_source = \"shadow\" needs a [shadow] section (cache_bytes, eviction)"
                        .into(),
                ))
            }
            None => None,
            Some(sh) => {
                if !(1024..=1 << 40).contains(&sh.cache_bytes) {
                    return Err(invalid(format!(
                        "shadow.cache_bytes must be between 1024 and 2^40, got {}",
                        sh.cache_bytes
                    )));
                }
                if config.policy.sizes.is_none() {
                    return Err(invalid(
                        "[shadow] needs [policy] sizes: the postings bytes of each term are \
                         what a shadow cache holds and misses"
                            .into(),
                    ));
                }
                let kind = sh
                    .eviction
                    .parse::<EvictionKind>()
                    .map_err(|e| invalid(format!("shadow.eviction: {e}")))?;
                Some(kind)
            }
        };
        Ok(Validated {
            config,
            path: path.to_owned(),
            policy,
            load,
            admin_token,
            routes,
            fallback,
            shadow_eviction,
            cache_admission,
        })
    }
}

/// The most shards a balancer fans out to.
pub const MAX_SHARDS: usize = 64;

/// Checks `[shards]` against the replicas and the policy; returns the number of shards
/// (1 without `[shards]`).
fn check_shards(config: &Config, policy: PolicyKind) -> Result<usize, String> {
    let count = config
        .replicas
        .iter()
        .map(|r| r.shard + 1)
        .max()
        .unwrap_or(1);
    let Some(sh) = &config.shards else {
        return match config.replicas.iter().position(|r| r.shard > 0) {
            Some(i) => Err(format!(
                "replicas[{i}]: shard = {} needs a [shards] section",
                config.replicas[i].shard
            )),
            None => Ok(1),
        };
    };
    if count > MAX_SHARDS {
        return Err(format!("shards: at most {MAX_SHARDS}, got {count}"));
    }
    let per_shard = |s: usize| config.replicas.iter().filter(|r| r.shard == s).count();
    let columns = per_shard(0);
    for s in 0..count {
        let n = per_shard(s);
        if n == 0 {
            return Err(format!(
                "shards: shard {s} has no replica (shards are numbered 0 to {})",
                count - 1
            ));
        }
        if n != columns {
            return Err(format!(
                "shards: every shard needs as many replicas as the others (a voting table's \
                 columns): shard 0 has {columns}, shard {s} has {n}"
            ));
        }
    }
    if !sh.tables.is_empty() {
        if !policy.needs_table() {
            return Err(format!(
                "shards.tables is only read by policy `table`, not `{policy}`"
            ));
        }
        if sh.route != ShardRoute::PerShard {
            return Err("shards.tables needs route = \"per-shard\"".into());
        }
        if sh.tables.len() != count {
            return Err(format!(
                "shards.tables: one table per shard, {count} shards, got {} tables",
                sh.tables.len()
            ));
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
    if config.fallback != "refuse" {
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
        assert_eq!(table("").expect("valid").cache_admission, None);
        let v = table("cache_admission = 0.5").expect("valid");
        assert_eq!(v.cache_admission.map(CacheAdmission::share), Some(0.5));
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
        assert_eq!(v.shard_count(), 2);
        let s1 = v.shard(1);
        let names: Vec<&str> = s1.config.replicas.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["c", "d"]);
        let sh = v.config.shards.as_ref().unwrap();
        assert_eq!(
            (sh.route, sh.missing),
            (ShardRoute::SameColumn, MissingShard::Error)
        );
        // Per-shard tables, resolved against the file's directory, each shard its own.
        let tables = "[shards]\nroute = \"per-shard\"\nmissing = \"partial\"\n\
                      tables = [\"t0.parquet\", \"/abs/t1.parquet\"]";
        let v = parse(&sharded(
            "name = \"table\"\ntable = \"t.parquet\"",
            tables,
            &four,
        ))
        .expect("valid");
        assert_eq!(
            v.shard(0).config.policy.table,
            Some("/etc/b/t0.parquet".into())
        );
        assert_eq!(
            v.shard(1).config.policy.table,
            Some("/abs/t1.parquet".into())
        );
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
                "[shards]\ntables = [\"x\"]",
                &four[..],
                "only read by policy `table`",
            ),
            (
                "name = \"table\"\ntable = \"t\"",
                "[shards]\ntables = [\"x\", \"y\"]",
                &four[..],
                "route = \"per-shard\"",
            ),
            (
                "name = \"table\"\ntable = \"t\"",
                "[shards]\nroute = \"per-shard\"\ntables = [\"x\"]",
                &four[..],
                "2 shards, got 1 tables",
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
        // Per-shard tables stand in for [policy] table; shadow caches are refused.
        let own = "[shards]\nroute = \"per-shard\"\ntables = [\"t0\", \"t1\"]";
        let v = parse(&sharded("name = \"table\"", own, &four)).expect("valid");
        assert_eq!(v.shard(1).config.policy.table, Some("/etc/b/t1".into()));
        // The admission rule's bound is a size for the whole index: refused with shards.
        let rule = "name = \"table\"\ncache_admission = 0.5";
        let err = parse(&sharded(rule, own, &four)).unwrap_err();
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
        assert_eq!(v.policy, PolicyKind::TermVote);
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
        assert_eq!(v.fallback, Fallback::Refuse);
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
