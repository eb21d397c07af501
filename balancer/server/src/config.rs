//! The balancer's TOML configuration: parsed with `deny_unknown_fields` and validated once
//! at start, so a typo or an impossible value stops the process with an error that names
//! the file (the way HAProxy and Envoy refuse a bad config instead of guessing).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! admin_listen = "127.0.0.1:8081"     # default 127.0.0.1:8081 (loopback)
//! admin_token = "secret"              # or: admin_token_env = "BALLOT_ADMIN_TOKEN"
//! eps = 0.05
//! load = "in-flight"                  # or "window": queries routed over the last load_window
//! load_window = 10000
//! stall_eps = 1.0                     # window: full anyway at ceil((1+stall_eps)·mean in flight)
//! stall_slack = 8                     #   + stall_slack requests in flight
//! request_timeout_ms = 1000           # one upstream attempt
//! deadline_ms = 3000                  # the whole client request, retries included
//! retries = 2
//! ramp_secs = 30.0
//! max_query_bytes = 4096             # at most data::query::MAX_QUERY_BYTES (4096)
//!
//! [health]
//! interval_ms = 1000
//! timeout_ms = 500
//! fall = 3
//! rise = 2
//!
//! [policy]
//! name = "table"                      # any of balancer::PolicyKind
//! table = "table.parquet"             # required by `table`; relative to this file
//! sizes = "sizes.parquet"             # optional postings sizes (term-vote, table)
//! vnodes = 160                        # consistent-hashing policies
//!
//! [[replicas]]
//! name = "r0"
//! address = "127.0.0.1:9000"
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use balancer::load::MAX_REPLICAS;
use balancer::policy::{PolicyKind, DEFAULT_EPS};
use balancer::ring::{DEFAULT_VNODES, MAX_VNODES, MIN_VNODES};

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
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval_ms: default_interval_ms(),
            timeout_ms: default_check_timeout_ms(),
            fall: default_fall(),
            rise: default_rise(),
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
}

/// One replica: its index in the voting table is its position in the list.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaConfig {
    /// Unique name (metrics, headers, admin API).
    pub name: String,
    /// `host:port` of its HTTP server.
    pub address: String,
}

/// The load the bounded-load rule compares.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LoadKind {
    /// Requests in flight per replica, HAProxy's `hash-balance-factor` load.
    #[default]
    InFlight,
    /// Queries routed per replica over the last `load_window` decisions, the simulator's
    /// load. A replica holding at least
    /// `ceil((1 + stall_eps)·(in-flight total + 1)/live) + stall_slack` requests in flight
    /// still counts as full, so a stalled replica sheds its queries. The load-aware policies read this load too: `least-loaded` and `p2c`
    /// then pick the replica that received the fewest recent queries.
    Window,
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
    /// What the load bound compares: requests in flight (as HAProxy), or the queries routed
    /// to each replica over the last `load_window` decisions (as the simulator).
    #[serde(default)]
    pub load: LoadKind,
    /// Decisions in the trailing window of `load = "window"`.
    #[serde(default = "default_load_window")]
    pub load_window: usize,
    /// With `load = "window"`, a replica also counts as full while it holds at least
    /// `ceil((1 + stall_eps) * (in-flight total + 1) / live) + stall_slack` requests in
    /// flight: it is falling behind (a slow disk, a hot spot), and its queries overflow.
    #[serde(default = "default_stall_eps")]
    pub stall_eps: f64,
    /// See `stall_eps`.
    #[serde(default = "default_stall_slack")]
    pub stall_slack: u64,
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
    /// Seconds over which a reloaded table ramps in (0: at once).
    #[serde(default = "default_ramp_secs")]
    pub ramp_secs: f64,
    /// Longest accepted `q`, in bytes after percent-decoding: at most (and by default)
    /// [`data::query::MAX_QUERY_BYTES`], the replica's limit.
    #[serde(default = "default_max_query_bytes")]
    pub max_query_bytes: usize,
    /// Health checks.
    #[serde(default)]
    pub health: HealthConfig,
    /// Routing.
    pub policy: PolicyConfig,
    /// Replicas, in table-index order.
    pub replicas: Vec<ReplicaConfig>,
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
    1.0
}
fn default_stall_slack() -> u64 {
    8
}
fn default_vnodes() -> usize {
    DEFAULT_VNODES
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
fn default_ramp_secs() -> f64 {
    30.0
}
fn default_max_query_bytes() -> usize {
    data::query::MAX_QUERY_BYTES
}

/// A config after validation, with paths resolved and the token read.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The parsed file (paths resolved against its directory).
    pub config: Config,
    /// The config file.
    pub path: PathBuf,
    /// The routing policy.
    pub policy: PolicyKind,
    /// The admin token (`None`: the admin API refuses every request).
    pub admin_token: Option<String>,
}

impl Validated {
    /// One upstream attempt.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// The whole client request.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.config.deadline_ms.unwrap_or_else(|| {
            self.config
                .request_timeout_ms
                .saturating_mul(u64::from(self.config.retries) + 1)
        }))
    }

    /// The table ramp.
    pub fn ramp(&self) -> Duration {
        Duration::from_secs_f64(self.config.ramp_secs)
    }
}

/// Checks that `address` is a `host:port` an HTTP URI can hold.
pub fn check_address(address: &str) -> Result<(), String> {
    let ok = !address.is_empty()
        && address.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
        })
        && address.parse::<axum::http::uri::Authority>().is_ok()
        && !address.contains('@');
    if ok {
        Ok(())
    } else {
        Err(format!("address `{address}` must be host:port"))
    }
}

/// Checks that `name` can label a replica (non-empty, no spaces, no slashes).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "replica name `{name}` must be 1 to 64 characters of [A-Za-z0-9._-]"
        ))
    }
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Validated, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path, |name| std::env::var(name).ok())
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
        if config.replicas.is_empty() || config.replicas.len() > MAX_REPLICAS {
            return Err(invalid(format!(
                "replicas: need 1 to {MAX_REPLICAS}, got {}",
                config.replicas.len()
            )));
        }
        for (i, r) in config.replicas.iter().enumerate() {
            check_name(&r.name).map_err(|e| invalid(format!("replicas[{i}]: {e}")))?;
            check_address(&r.address).map_err(|e| invalid(format!("replicas[{i}]: {e}")))?;
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
        if config.stall_eps.is_nan() || config.stall_eps < 0.0 {
            return Err(invalid(format!(
                "stall_eps must be >= 0, got {}",
                config.stall_eps
            )));
        }
        if !(1..=crate::window::MAX_WINDOW).contains(&config.load_window) {
            return Err(invalid(format!(
                "load_window must be between 1 and {}, got {}",
                crate::window::MAX_WINDOW,
                config.load_window
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
        if !config.ramp_secs.is_finite() || config.ramp_secs < 0.0 || config.ramp_secs > 86_400.0 {
            return Err(invalid(format!(
                "ramp_secs must be between 0 and 86400, got {}",
                config.ramp_secs
            )));
        }
        if !(1..=data::query::MAX_QUERY_BYTES).contains(&config.max_query_bytes) {
            return Err(invalid(format!(
                "max_query_bytes must be between 1 and {} (the replicas' limit), got {}",
                data::query::MAX_QUERY_BYTES,
                config.max_query_bytes
            )));
        }
        let h = &config.health;
        if h.interval_ms == 0 || h.timeout_ms == 0 || h.fall == 0 || h.rise == 0 {
            return Err(invalid(
                "health: interval_ms, timeout_ms, fall and rise must be > 0".into(),
            ));
        }
        if policy.needs_table() && config.policy.table.is_none() {
            return Err(invalid(format!(
                "policy `{policy}` needs policy.table (a voting-table Parquet path)"
            )));
        }
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
        Ok(Validated {
            config,
            path: path.to_owned(),
            policy,
            admin_token,
        })
    }
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
    fn minimal_config_gets_defaults() {
        let v = parse(BASE).expect("valid");
        assert_eq!(v.policy, PolicyKind::TermVote);
        assert_eq!(v.config.health.fall, 3);
        assert_eq!(v.deadline(), Duration::from_millis(3000));
        assert!(v.config.admin_listen.ip().is_loopback());
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
            (format!("max_query_bytes = 4097\n{BASE}"), "max_query_bytes"),
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
            .replace("admin_token = \"t\"", "admin_token_env = \"TOK\"");
        let v = parse(&text).expect("valid");
        assert_eq!(
            v.config.policy.table.as_deref(),
            Some(Path::new("/etc/b/t.parquet"))
        );
        assert_eq!(v.admin_token.as_deref(), Some("from-env"));
    }
}
