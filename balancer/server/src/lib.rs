//! `balancer-server`: the data plane of ballot's HTTP load balancer. A client request
//! becomes one context ([`ctx`]), is routed by the policy of one routing snapshot
//! ([`router`]) over one shard's loads ([`shard`], [`view`]), sent to a replica over pooled
//! keep-alive HTTP/1.1 ([`upstream`]) with retries, and relayed back ([`pipeline`]); a
//! sharded query fans out to every shard through the same exchange ([`fanout`]). The
//! optional concerns (shadow caches, cache hint, work feedback, ramp accounting, routing
//! headers, access log) are [`hooks`] chosen when the config loads. Its shape follows
//! HAProxy and Envoy: bounded-load hashing (`hash-balance-factor`), `fall`/`rise` health
//! checks ([`health`]) and `redispatch` retries.
//!
//! The operator's surfaces (admin API, status page, explain, `/metrics`, the command line)
//! are the `balancer-ops` crate; the engine adapters (routes, presets, the sharded answer's
//! merge) are `balancer-routes`. This crate reads no operator request and parses no engine
//! API: it exposes [`Balancer`], its [`stats::Stats`] snapshot and the membership and table
//! changes the admin API asks for.
//!
//! docs/architecture.md walks one request through the files.

pub mod access;
pub mod admit;
pub mod body;
pub mod config;
pub mod ctx;
pub mod fanout;
pub mod forward;
pub mod front;
pub mod health;
pub mod hooks;
pub mod metrics;
pub mod pipeline;
pub mod reload;
pub mod replicas;
pub mod router;
pub mod shard;
pub mod stats;
pub mod tables;
pub mod upstream;
pub mod view;

pub use balancer_routes as routes;

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{Counter, Histogram};
use balancer::policy::TermBytes;

use crate::admit::Admission;
use crate::config::Validated;
use crate::hooks::Hooks;
use crate::replicas::Replica;
use crate::router::{hash_hex, Router, RouterError};
use crate::shard::{MembershipError, Shard};
use crate::stats::{ReplicaStat, Stats, TableStat};
use balancer::shadow::Shadow;

/// The background ticker's period.
const TICK: Duration = Duration::from_millis(100);

/// Why the balancer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The size table could not be read.
    #[error(transparent)]
    Sizes(#[from] data::sizes::SizesError),
    /// The voting table could not be read.
    #[error(transparent)]
    Table(#[from] data::table::TableError),
    /// The policy or a replica could not be built.
    #[error("{path}: {source}")]
    Policy {
        /// The config file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: RouterError,
    },
}

/// The request path's own counters.
pub struct PathMetrics {
    /// Routing-decision latency (one decision in [`pipeline::ROUTE_SAMPLE`]).
    pub route_seconds: Histogram,
    /// Attempts retried on another replica.
    pub retries: Counter,
    /// Requests that failed upstream.
    pub failures: Counter,
}

/// The data plane: everything the request path shares.
pub struct Balancer {
    /// The validated config.
    pub cfg: Validated,
    /// What routes (shared by every shard).
    pub router: Router,
    /// The shards' replicas and loads (one without `[shards]`).
    pub shards: Vec<Shard>,
    /// The concerns the config asks for.
    pub hooks: Hooks,
    /// Client requests in flight, bounded by `max_in_flight`.
    pub admission: Admission,
    /// With `[shards]`: the fan-out step.
    pub fanout: Option<fanout::Fanout>,
    /// The request path's counters.
    pub metrics: PathMetrics,
}

impl Balancer {
    /// Loads the sizes and the table `cfg` names and builds the data plane.
    pub fn build(cfg: Validated) -> Result<Balancer, StartError> {
        let policy = cfg.config.policy.clone();
        let mut term_bytes = TermBytes::default();
        let sizes = policy
            .sizes
            .as_deref()
            .map(data::sizes::SizeTable::read_parquet)
            .transpose()?;
        for (term, bytes) in sizes.iter().flat_map(|s| s.sorted()) {
            term_bytes.insert(data::hash::term_hash(term), bytes);
        }
        let default_bytes = term_bytes.default_bytes();
        let table = match (&policy.table, policy.name.needs_table()) {
            (Some(p), true) => {
                let start = std::time::Instant::now();
                let expected = cfg.shard_replicas(0).count();
                let t = data::table::VotingTable::read_parquet(p, u16::try_from(expected).ok())?;
                reload::record_load(1, start.elapsed().as_secs_f64());
                Some(t)
            }
            _ => None,
        };
        let fail = |source: RouterError| StartError::Policy {
            path: cfg.path.clone(),
            source,
        };
        let columns = cfg.shard_replicas(0).count();
        let router =
            Router::new(&cfg, columns, Arc::new(term_bytes), table.as_ref()).map_err(fail)?;
        let shards = (0..cfg.shards)
            .map(|s| {
                let shadow = match (&cfg.config.shadow, &sizes) {
                    (Some(sh), Some(sizes)) => Some(Shadow::new(
                        sizes,
                        default_bytes,
                        sh.cache_bytes,
                        sh.eviction,
                    )),
                    _ => None,
                };
                Shard::new(&cfg, s, shadow).map_err(|e| fail(e.into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Balancer {
            hooks: Hooks::of(&cfg),
            admission: Admission::new(cfg.config.max_in_flight),
            fanout: cfg.config.shards.as_ref().map(fanout::Fanout::new),
            metrics: PathMetrics {
                route_seconds: ::metrics::histogram!(metrics::ROUTE_SECONDS),
                retries: ::metrics::counter!(metrics::RETRIES),
                failures: ::metrics::counter!(metrics::UPSTREAM_FAILURES),
            },
            router,
            shards,
            cfg,
        })
    }

    /// Starts the health checkers and the ticker that ends finished ramps and, every
    /// second, closes the idle upstream connections the replicas closed (inside a Tokio
    /// runtime).
    pub fn spawn_background(self: &Arc<Self>) {
        for shard in &self.shards {
            for rep in shard.members.load().slots.iter().flatten() {
                health::spawn(Arc::clone(rep), self.cfg.config.health.clone());
            }
        }
        let lb = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            for n in 1u64.. {
                tick.tick().await;
                lb.router.tick();
                if n.is_multiple_of(10) {
                    for shard in &lb.shards {
                        for rep in shard.members.load().slots.iter().flatten() {
                            rep.pool.sweep();
                        }
                    }
                }
            }
        });
    }

    /// Adds a replica to the (only) shard and starts its health checks. Returns its slot.
    /// A table over virtual homes is mapped onto the new replica set and ramps in.
    pub fn add_replica(&self, name: &str, address: &str) -> Result<usize, MembershipError> {
        let shard = &self.shards[0];
        let fixed = self.router.fixed_slots();
        let index = shard.add_replica(name, address, fixed, |n| self.router.resize(n))?;
        if let Some((_, rep)) = shard.members.load().find(name) {
            health::spawn(Arc::clone(rep), self.cfg.config.health.clone());
        }
        self.rescale_table();
        Ok(index)
    }

    /// Removes a replica from the (only) shard; its slot stays empty. A table over virtual
    /// homes is mapped onto the remaining replicas and ramps in.
    pub fn remove_replica(&self, name: &str) -> Result<Arc<Replica>, MembershipError> {
        let rep = self.shards[0].remove_replica(name)?;
        self.rescale_table();
        Ok(rep)
    }

    /// The slots of the (only) shard that hold a replica.
    pub fn live_slots(&self) -> Vec<u16> {
        let members = self.shards[0].members.load();
        (0..members.slots.len())
            .filter(|&i| members.slots[i].is_some())
            .map(|i| i as u16)
            .collect()
    }

    /// Maps a table over virtual homes onto the replicas now ([`Router::rescale`]); a
    /// failure keeps the table serving as it was and is logged.
    pub(crate) fn rescale_table(&self) {
        let start = std::time::Instant::now();
        match self.router.rescale(|| self.live_slots()) {
            Ok(Some(version)) => tracing::info!(
                "table version {version}: virtual homes mapped onto {} replicas in {:.3}s, ramping over {} queries",
                self.live_slots().len(),
                start.elapsed().as_secs_f64(),
                self.cfg.config.ramp_queries
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!("the table keeps its homes where they were: {e}"),
        }
    }

    /// The balancer now, for the operator's surfaces.
    pub fn stats(&self) -> Stats {
        let routing = self.router.snapshot();
        let table = routing.table.as_ref().map(|t| TableStat {
            version: t.version,
            content_hash: hash_hex(t.content_hash),
            replicas: t.replicas,
            virtual_homes: t.homes.as_ref().map(|h| usize::from(h.replicas)),
            terms: t.current.terms(),
            votes: t.current.vote_count(),
            ramp_progress: t.progress(),
            ramp_queries: t.ramp.as_ref().map_or(0, |r| r.len()),
            trained_cache_bytes: t.current.trained_cache_bytes(),
            loaded_at: t.loaded_at,
        });
        let mut replicas = Vec::new();
        for (s, shard) in self.shards.iter().enumerate() {
            let members = shard.members.load();
            for (i, rep) in members.slots.iter().enumerate() {
                let Some(r) = rep else { continue };
                replicas.push(ReplicaStat {
                    shard: s,
                    index: i,
                    address: r.address.clone(),
                    healthy: r.is_healthy(),
                    drained: r.is_drained(),
                    checks: r.checks(),
                    health_changed_at_check: r.health_changed_at_check(),
                    in_flight: shard.slots.counts.count(i),
                    queued: shard.slots.queued(i),
                    others_backlog: shard.slots.others(i),
                    shadow_cached_bytes: shard.shadow.as_ref().map(|sh| sh.cached_bytes(i)),
                    counters: r.stats.read(&r.name),
                });
            }
        }
        Stats {
            at: stats::unix_now(),
            policy: self.router.kind.name(),
            load: self.cfg.load.name(),
            work_source: self.cfg.config.work_source.name(),
            cache_admission: self.router.cache_admission.map(|r| r.share()),
            shards: self.shards.len(),
            slots: self.shards[0].members.load().slots.len(),
            replicas,
            table,
        }
    }
}
