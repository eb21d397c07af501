//! `balancer-server`: the HTTP load balancer behind the `balancer` binary: an axum server whose `/search`
//! proxies to replicas chosen by a routing policy (pooled keep-alive HTTP/1.1), with active
//! and passive health checking, retries on the next-ranked replica, hot voting-table reload
//! with a ramp, run-time membership, and Prometheus metrics. Its shape follows HAProxy and
//! Envoy: a client listener, a separate admin listener, bounded-load hashing
//! (`hash-balance-factor`), `fall`/`rise` health checks and `redispatch` retries.
//!
//! * [`config`]: the TOML file, validated once.
//! * [`replicas`]: the replica set and its health. [`view`]: the server-side `LoadView`.
//! * [`state`]: the loads, the routing policy (the simulator's own) and table swaps.
//! * [`front`]: the client listener (the `serving` crate's hardened loop). [`routes`]:
//!   which requests are searches and where their query text is (a URL parameter such as
//!   ballot's `q`, decoded by [`data::query`], the replica's decoder too; a form field; a
//!   JSON field). [`body`]: a request's body, read whole within its limits. [`proxy`]: the
//!   request path. [`fallback`]: requests routed without a query. [`admit`]: the bounds
//!   on requests in flight. [`forward`]: the headers sent upstream. [`access`]: the
//!   access log.
//! * [`work`]: each answer's flash bytes for the `work` load, from the replica's header,
//!   its ORCA load report, or [`shadow`]: the balancer's own estimate of each replica's
//!   flash bytes, for backends that report none (`work_source`).
//! * [`upstream`]: keep-alive connections to replicas and the HTTP/1.1 exchange on them.
//! * [`health`]: active checks. [`reload`]: table reload. [`admin`]: the admin API.
//!   [`tables`]: the files a path reload may read. [`status`]: the status page.
//!   [`explain`]: a query's routing explained.
//! * [`shards`]: a sharded backend: each query fans out to one replica of every shard, and
//!   the answers are merged.
//! * [`metrics`]: metric names and the recorder.
//! * [`cli`]: the command line, run by the `balancer` binary and by `ballot balancer`.

pub mod access;
pub mod admin;
pub mod admit;
pub mod body;
pub mod cache_hint;
pub mod cli;
pub mod config;
pub mod explain;
pub mod fallback;
pub mod forward;
pub mod front;
pub mod health;
pub mod metrics;
pub mod proxy;
pub mod reload;
pub mod replicas;
pub mod routes;
pub mod shadow;
pub mod shards;
pub mod state;
pub mod status;
pub mod tables;
pub mod upstream;
pub mod view;
pub mod work;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::Validated;
use crate::proxy::Proxy;
use crate::shadow::Shadow;
use crate::state::State;
use balancer::policy::TermBytes;

/// The background ticker's period.
const TICK: Duration = Duration::from_millis(100);
/// Ticks between two status samples.
const SAMPLE_TICKS: u64 = (status::history::SAMPLE_EVERY.as_millis() / TICK.as_millis()) as u64;

/// Why the balancer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The admin token is longer than the comparison handles.
    #[error("{0}: the admin token is too long (at most 256 bytes)")]
    TokenTooLong(std::path::PathBuf),
    /// The size table could not be read.
    #[error(transparent)]
    Sizes(#[from] data::sizes::SizesError),
    /// The voting table could not be read.
    #[error(transparent)]
    Table(#[from] data::table::TableError),
    /// The policy could not be built.
    #[error("{path}: {source}")]
    Policy {
        /// The config file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: crate::state::StateError,
    },
}

/// Everything the handlers share.
pub struct App {
    /// Routing state (shard 0's, with `[shards]`).
    pub state: Arc<State>,
    /// The proxy (shard 0's, with `[shards]`).
    pub proxy: Proxy,
    /// With `[shards]`: the fan-out over every shard.
    pub fanout: Option<shards::Fanout>,
    /// The metrics recorder.
    pub prom: PrometheusHandle,
    /// The admin token, ready for a constant-time comparison (`None`: admin API off).
    pub admin_token: Option<admin::Token>,
    /// The status page's ten minutes of samples.
    pub status: status::history::History,
    /// The login form's sessions.
    pub sessions: status::login::Sessions,
}

/// Builds one shard's proxy (the only one without `[shards]`): its sizes, shadow caches,
/// table and state.
fn build_proxy(cfg: Validated) -> Result<Proxy, StartError> {
    let mut term_bytes = TermBytes::default();
    let mut shadow = None;
    if let Some(p) = &cfg.config.policy.sizes {
        let sizes = data::sizes::SizeTable::read_parquet(p)?;
        for (term, bytes) in sizes.sorted() {
            term_bytes.insert(data::hash::term_hash(term), bytes);
        }
        if let (Some(sh), Some(eviction)) = (&cfg.config.shadow, cfg.shadow_eviction) {
            let default_bytes = term_bytes.default_bytes();
            shadow = Some(Shadow::new(&sizes, default_bytes, sh.cache_bytes, eviction));
        }
    }
    let table = match (&cfg.config.policy.table, cfg.policy.needs_table()) {
        (Some(p), true) => {
            let start = std::time::Instant::now();
            let expected = u16::try_from(cfg.config.replicas.len()).ok();
            let t = data::table::VotingTable::read_parquet(p, expected)?;
            reload::record_load(1, start.elapsed().as_secs_f64());
            Some(t)
        }
        _ => None,
    };
    let path = cfg.path.clone();
    let state = State::new(cfg, Arc::new(term_bytes), table.as_ref()).map_err(|source| {
        StartError::Policy {
            path: path.clone(),
            source,
        }
    })?;
    Proxy::new(Arc::new(state), shadow).map_err(|e| StartError::Policy {
        path,
        source: e.into(),
    })
}

impl App {
    /// Loads the sizes and the table named by `cfg` and builds the state (one per shard
    /// with `[shards]`).
    pub fn build(cfg: Validated) -> Result<Arc<App>, StartError> {
        let prom = metrics::install();
        let path = cfg.path.clone();
        let admin_token = match cfg.admin_token.as_deref() {
            Some(t) => {
                Some(admin::Token::new(t).ok_or_else(|| StartError::TokenTooLong(path.clone()))?)
            }
            None => None,
        };
        let (proxy, fanout) = match &cfg.config.shards {
            None => (build_proxy(cfg)?, None),
            Some(sh) => {
                let mut others = Vec::new();
                for s in 1..cfg.shard_count() {
                    others.push(build_proxy(cfg.shard(s))?);
                }
                let fanout = shards::Fanout::new(others, sh);
                (build_proxy(cfg.shard(0))?, Some(fanout))
            }
        };
        let state = Arc::clone(&proxy.state);
        if let Some(t) = &state.routing().table {
            crate::state::publish_content_hash(None, t.content_hash);
        }
        Ok(Arc::new(App {
            proxy,
            state,
            fanout,
            prom,
            admin_token,
            status: status::history::History::new(status::unix_now()),
            sessions: status::login::Sessions::default(),
        }))
    }

    /// Every shard's proxy, shard 0's first (one without `[shards]`).
    pub fn proxies(&self) -> impl Iterator<Item = &Proxy> {
        std::iter::once(&self.proxy).chain(self.fanout.iter().flat_map(|f| f.others.iter()))
    }

    /// Starts the health checkers and the ramp ticker, which also closes the idle upstream
    /// connections the replicas closed, every second, and samples the status page's
    /// counters (inside a Tokio runtime).
    pub fn spawn_background(self: &Arc<Self>) {
        for proxy in self.proxies() {
            for rep in proxy.state.members.load().slots.iter().flatten() {
                health::spawn(Arc::clone(rep), proxy.state.cfg.config.health.clone());
            }
        }
        let app = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            let mut n = 0u64;
            loop {
                tick.tick().await;
                for proxy in app.proxies() {
                    proxy.state.tick();
                }
                n += 1;
                if n.is_multiple_of(10) {
                    for proxy in app.proxies() {
                        for rep in proxy.state.members.load().slots.iter().flatten() {
                            rep.pool.sweep();
                        }
                    }
                }
                if n.is_multiple_of(50) {
                    app.prom.run_upkeep();
                }
                if n.is_multiple_of(SAMPLE_TICKS) {
                    status::record_sample(&app);
                }
            }
        });
    }
}

/// The client router, for `/healthz` (every other path goes to the proxy): `GET` and
/// `HEAD` answer `ok`, other methods a JSON 405.
pub fn client_router(app: Arc<App>) -> Router {
    Router::new()
        .route(routes::HEALTHZ, get(|| async { "ok\n" }))
        .fallback(admin::not_found)
        .method_not_allowed_fallback(admin::method_not_allowed)
        .with_state(app)
}
