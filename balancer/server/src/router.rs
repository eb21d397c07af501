//! What routes, shared by every shard: the routing policy, the very [`RoutingPolicy`] type
//! the simulators replay (`table` is a [`TablePolicy`], or a [`RampPolicy`] while a
//! reloaded table ramps in), the table behind it, and the fallback policy of requests with
//! no query.
//!
//! Build apart from pick: the policy is swapped atomically with `arc-swap` and a request
//! takes one snapshot ([`Router::snapshot`], an `Arc` it holds to its end), so it never
//! sees a half-applied change; table swaps and rebuilds are serialized by one lock and
//! never touch the request path.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use balancer::load::MAX_REPLICAS;
use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::{TablePolicy, TableVotes};
use balancer::policy::{
    build_policy, PeerParams, PolicyError, PolicyKind, PolicyParams, RoutingPolicy, TermBytes,
};
use balancer::ramp::{RampPolicy, RampedTable, SharedVotes};
use balancer_routes::Fallback;
use data::table::VotingTable;
use hyper::body::Bytes;

use crate::config::Validated;
use crate::metrics as m;

/// Why the routing state could not be built or changed.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// The policy (or the table compiled for it) is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A replica of the config is invalid.
    #[error(transparent)]
    Replica(#[from] crate::replicas::ReplicaError),
    /// `table` was configured without a table.
    #[error("policy `table` needs a voting table")]
    MissingTable,
    /// A table was given to a policy that does not use one.
    #[error("policy `{0}` does not use a voting table")]
    NoTable(PolicyKind),
    /// A policy parameter is invalid (normally refused when the config is read).
    #[error("{0}")]
    Config(String),
    /// The initial table could not be kept as Parquet for `GET /admin/table/parquet`.
    #[error("the voting table cannot be serialized: {0}")]
    Table(String),
    /// Another table was installed while this one was compiled for the one it replaced.
    #[error("table version {0} was replaced while it was being remapped")]
    Superseded(u64),
}

/// The voting table being served, and its ramp while one runs.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// 1 at start, +1 per accepted reload.
    pub version: u64,
    /// Columns of the compiled table: the replica count, or for a table over virtual homes
    /// one past the highest slot it serves.
    pub replicas: usize,
    /// [`TableVotes::content_hash`] of the newest table.
    pub content_hash: u64,
    /// The newest table.
    pub current: Arc<TableVotes>,
    /// The newest table as a Parquet file (what `GET /admin/table/parquet` returns).
    pub parquet: Bytes,
    /// The ramp from the previous table to `current`, while it runs.
    pub ramp: Option<Arc<RampPolicy>>,
    /// The table `current` replaced, while the ramp runs: the votes of the queries that
    /// still follow it.
    pub previous: Option<Arc<TableVotes>>,
    /// Unix time `current` was loaded.
    pub loaded_at: f64,
    /// A table over virtual homes behind `current`, kept to map it onto the replicas again
    /// when they change ([`Router::rescale`]); `None` for a plain table.
    pub homes: Option<Arc<VotingTable>>,
}

impl TableInfo {
    /// The ramp's progress (1 when no ramp runs).
    pub fn progress(&self) -> f64 {
        self.ramp.as_ref().map_or(1.0, |r| r.progress())
    }

    /// The table a query with `term_hashes` is routed by now: the new one, or during a
    /// ramp the previous one for a query that still follows it.
    pub fn votes_for(&self, term_hashes: &[u64]) -> &Arc<TableVotes> {
        match (&self.ramp, &self.previous) {
            (Some(r), Some(prev)) if !r.ramp().at(r.progress()).query_follows_new(term_hashes) => {
                prev
            }
            _ => &self.current,
        }
    }
}

/// One snapshot of what routes.
pub struct Routing {
    /// The policy every request with a query routes through.
    pub policy: Arc<dyn RoutingPolicy>,
    /// For `table`: the table behind the policy.
    pub table: Option<TableInfo>,
}

/// The routing state every shard shares.
pub struct Router {
    /// The configured policy.
    pub kind: PolicyKind,
    routing: ArcSwap<Routing>,
    /// Term sizes (term-vote weights, the table's stand-in votes).
    pub term_bytes: Arc<TermBytes>,
    /// Routes requests with no query (`None`: they are refused).
    pub fallback: Option<Box<dyn RoutingPolicy>>,
    /// `[policy] cache_admission`.
    pub cache_admission: Option<CacheAdmission>,
    eps: f64,
    homes: f64,
    evidence: f64,
    vnodes: usize,
    peers: PeerParams,
    ramp_queries: u64,
    shadow_bytes: Option<u64>,
    lock: Mutex<()>,
    /// Serializes [`Router::rescale`]: a compile for an older replica set never lands after
    /// one for a newer set.
    rescale_lock: Mutex<()>,
}

impl Router {
    /// The routing state of `cfg` for `replicas` slots, with the initial `table` for `table`.
    pub fn new(
        cfg: &Validated,
        replicas: usize,
        term_bytes: Arc<TermBytes>,
        table: Option<&data::table::VotingTable>,
    ) -> Result<Router, RouterError> {
        let c = &cfg.config;
        let fallback = match cfg.fallback {
            Fallback::Refuse => None,
            // Built for every slot: replicas added or removed later need no rebuild.
            Fallback::Policy(kind) => Some(build_policy(kind, &PolicyParams::new(MAX_REPLICAS))?),
        };
        let mut router = Router {
            kind: c.policy.name,
            routing: ArcSwap::from_pointee(Routing {
                policy: Arc::from(build_policy(PolicyKind::Random, &PolicyParams::new(1))?),
                table: None,
            }),
            term_bytes,
            fallback,
            cache_admission: c.policy.cache_admission,
            eps: c.eps,
            homes: c.policy.homes,
            evidence: c.policy.cache_evidence,
            vnodes: c.policy.vnodes,
            peers: c.policy.peers.params().map_err(RouterError::Config)?,
            ramp_queries: c.ramp_queries,
            shadow_bytes: c.shadow.as_ref().map(|s| s.cache_bytes),
            lock: Mutex::new(()),
            rescale_lock: Mutex::new(()),
        };
        // The configured policy replaces the stand-in above before anything routes.
        let routing = match (router.kind, table) {
            (PolicyKind::Table, Some(table)) => router.initial_table(table, replicas)?,
            (PolicyKind::Table, None) => return Err(RouterError::MissingTable),
            (kind, Some(_)) => return Err(RouterError::NoTable(kind)),
            (_, None) => Routing {
                policy: router.build(replicas)?,
                table: None,
            },
        };
        router.routing = ArcSwap::from_pointee(routing);
        Ok(router)
    }

    fn initial_table(
        &self,
        table: &data::table::VotingTable,
        replicas: usize,
    ) -> Result<Routing, RouterError> {
        let votes = Arc::new(TableVotes::build(
            table,
            replicas,
            Arc::clone(&self.term_bytes),
        )?);
        self.log_rule(&votes);
        let parquet = table
            .to_parquet_bytes(std::path::Path::new("<initial table>"))
            .map_err(|e| RouterError::Table(e.to_string()))?;
        publish_content_hash(None, votes.content_hash());
        Ok(Routing {
            policy: Arc::new(
                TablePolicy::from_votes(Arc::clone(&votes), self.eps, self.homes)
                    .with_evidence(self.evidence),
            ),
            table: Some(TableInfo {
                version: 1,
                replicas,
                content_hash: votes.content_hash(),
                current: votes,
                parquet: Bytes::from(parquet),
                ramp: None,
                previous: None,
                loaded_at: crate::stats::unix_now(),
                homes: homes_of(table),
            }),
        })
    }

    /// The configured policy (not `table`) built for `replicas` slots.
    fn build(&self, replicas: usize) -> Result<Arc<dyn RoutingPolicy>, PolicyError> {
        let mut p = PolicyParams::new(replicas).with_term_bytes(Arc::clone(&self.term_bytes));
        p.eps = self.eps;
        p.vnodes = self.vnodes;
        p.homes = self.homes;
        p.evidence = self.evidence;
        p.peers = self.peers;
        Ok(Arc::from(build_policy(self.kind, &p)?))
    }

    /// Logs the cache admission rule's bound under `votes` (the hint: [`crate::hooks::hint`]).
    fn log_rule(&self, votes: &TableVotes) {
        if let Some(rule) = self.cache_admission {
            log_rule(rule, votes, self.shadow_bytes);
        }
    }

    /// The routing state now: a request takes it once and keeps it.
    pub fn snapshot(&self) -> Arc<Routing> {
        self.routing.load_full()
    }

    /// The table replica count (`None` for other policies).
    pub fn table_replicas(&self) -> Option<usize> {
        self.routing.load().table.as_ref().map(|t| t.replicas)
    }

    /// The slot count a plain table fixes (`None` for other policies and for a table over
    /// virtual homes, which follows the replicas: [`Router::rescale`]).
    pub fn fixed_slots(&self) -> Option<usize> {
        let routing = self.routing.load();
        let table = routing.table.as_ref()?;
        table.homes.is_none().then_some(table.replicas)
    }

    /// Maps the table over virtual homes onto the replicas in the slots `live` lists now
    /// (`balancer::virtual_homes`) and ramps the result in like a reload: homes that change
    /// replica move over `ramp_queries` queries. Returns the new version, or `None` for a
    /// plain table or when the mapping did not change.
    pub fn rescale(&self, live: impl FnOnce() -> Vec<u16>) -> Result<Option<u64>, RouterError> {
        let _one_at_a_time = self.rescale_lock.lock().unwrap_or_else(|e| e.into_inner());
        let snapshot = self.routing.load_full();
        let Some((homes, table)) = snapshot
            .table
            .as_ref()
            .and_then(|t| t.homes.clone().map(|h| (h, t)))
        else {
            return Ok(None);
        };
        let mapped = balancer::virtual_homes::for_slots(&homes, &live())
            .map_err(|e| PolicyError::VirtualHomes(e.to_string()))?;
        let Some(mapped) = mapped else {
            return Ok(None);
        };
        let votes = TableVotes::build(
            &mapped,
            usize::from(mapped.replicas),
            Arc::clone(&self.term_bytes),
        )?;
        if votes.content_hash() == table.content_hash {
            return Ok(None);
        }
        // A reload may have installed another table meanwhile: it was compiled for the
        // replicas as they are, and a later rescale follows any change.
        let over = Some(table.version);
        match self.install(votes, table.parquet.clone(), Some(homes), over) {
            Ok(version) => {
                metrics::counter!(m::RESCALES).increment(1);
                Ok(Some(version))
            }
            Err(RouterError::Superseded(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Rebuilds a policy other than `table` for `replicas` slots (a replica was added past
    /// the last slot), before the new slot becomes visible.
    pub fn resize(&self, replicas: usize) -> Result<(), PolicyError> {
        if self.kind == PolicyKind::Table {
            return Ok(());
        }
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let policy = self.build(replicas)?;
        self.routing.store(Arc::new(Routing {
            policy,
            table: None,
        }));
        Ok(())
    }

    /// Swaps in a compiled table, ramping it in over `ramp_queries` routed queries (a
    /// ramp still running is frozen where it is and ramps out). `homes` is the table over
    /// virtual homes it was compiled from, if it was. Returns the new version.
    pub fn install_table(
        &self,
        votes: TableVotes,
        parquet: Bytes,
        homes: Option<Arc<VotingTable>>,
    ) -> Result<u64, RouterError> {
        self.install(votes, parquet, homes, None)
    }

    /// [`Router::install_table`], only over table version `over` when given (else
    /// [`RouterError::Superseded`]).
    fn install(
        &self,
        votes: TableVotes,
        parquet: Bytes,
        homes: Option<Arc<VotingTable>>,
        over: Option<u64>,
    ) -> Result<u64, RouterError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.routing.load();
        let Some(old_table) = &old.table else {
            return Err(RouterError::NoTable(self.kind));
        };
        if over.is_some_and(|v| v != old_table.version) {
            return Err(RouterError::Superseded(old_table.version));
        }
        let old_votes: SharedVotes = match &old_table.ramp {
            Some(r) => r.frozen(),
            None => Arc::clone(&old_table.current) as SharedVotes,
        };
        let new = Arc::new(votes);
        // A rescale can widen or narrow the table; the ramp routes over both.
        let columns = new.replicas();
        self.log_rule(&new);
        let (policy, ramp): (Arc<dyn RoutingPolicy>, _) = if self.ramp_queries == 0 {
            let policy = TablePolicy::from_votes(Arc::clone(&new), self.eps, self.homes)
                .with_evidence(self.evidence);
            (Arc::new(policy), None)
        } else {
            let ramp = Arc::new(RampPolicy::new(
                RampedTable::new(old_votes, Arc::clone(&new) as SharedVotes),
                old_table.replicas.max(columns),
                self.eps,
                self.homes,
                0,
                self.ramp_queries,
            ));
            (Arc::clone(&ramp) as Arc<dyn RoutingPolicy>, Some(ramp))
        };
        let version = old_table.version + 1;
        let content_hash = new.content_hash();
        let previous = ramp.is_some().then(|| Arc::clone(&old_table.current));
        metrics::gauge!(m::RAMP_PROGRESS).set(if ramp.is_some() { 0.0 } else { 1.0 });
        self.routing.store(Arc::new(Routing {
            policy,
            table: Some(TableInfo {
                version,
                replicas: columns,
                content_hash,
                current: new,
                parquet,
                ramp,
                previous,
                loaded_at: crate::stats::unix_now(),
                homes,
            }),
        }));
        metrics::gauge!(m::TABLE_VERSION).set(version as f64);
        publish_content_hash(Some(old_table.content_hash), content_hash);
        Ok(version)
    }

    /// Ends a finished ramp (drops the old table) and publishes the ramp progress.
    pub fn tick(&self) {
        let snap = self.routing.load_full();
        let progress = snap.table.as_ref().map_or(1.0, TableInfo::progress);
        metrics::gauge!(m::RAMP_PROGRESS).set(progress);
        let Some(table) = snap.table.as_ref().filter(|t| t.ramp.is_some()) else {
            return;
        };
        if progress < 1.0 {
            return;
        }
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // A reload may have started a new ramp meanwhile: only end the one we saw.
        if Arc::ptr_eq(&self.routing.load(), &snap) {
            let policy = TablePolicy::from_votes(Arc::clone(&table.current), self.eps, self.homes)
                .with_evidence(self.evidence);
            self.routing.store(Arc::new(Routing {
                policy: Arc::new(policy),
                table: Some(TableInfo {
                    ramp: None,
                    previous: None,
                    ..table.clone()
                }),
            }));
        }
    }
}

/// Logs what the rule does under the table `votes` once it is loaded: the cache size it
/// holds within (the table's trained size), and a warning when the shadow caches
/// (`shadow_bytes`) are larger, so the rule does not apply to them.
pub fn log_rule(rule: CacheAdmission, votes: &TableVotes, shadow_bytes: Option<u64>) {
    let share = rule.share();
    match votes.trained_cache_bytes() {
        Some(trained) => {
            tracing::info!(
                "cache admission {share}: replica caches up to {trained} bytes (the table's \
                 trained size) keep a list only at its homes"
            );
            if let Some(shadow) = shadow_bytes.filter(|&s| s > trained) {
                tracing::warn!(
                    "[shadow] cache_bytes = {shadow} is larger than the table's trained size \
                     {trained}: the shadow caches keep every list they read, as a replica \
                     cache of that size does, and the rule saves nothing there"
                );
            }
        }
        None => tracing::info!(
            "cache admission {share}: the table records no trained size, so every replica \
             cache keeps a list only at its homes"
        ),
    }
}

/// Publishes the table in force as `ballot_table_content{hash="<16 hex digits>"} 1`, and the
/// one it replaced (if another) as 0, so a dashboard or an alert can compare balancers.
pub fn publish_content_hash(old: Option<u64>, new: u64) {
    if let Some(old) = old.filter(|&o| o != new) {
        metrics::gauge!(m::TABLE_CONTENT, "hash" => hash_hex(old)).set(0.0);
    }
    metrics::gauge!(m::TABLE_CONTENT, "hash" => hash_hex(new)).set(1.0);
}

/// A content hash as `/admin/table` and the metrics write it.
pub fn hash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// `table` kept for [`Router::rescale`] if it is over virtual homes.
pub fn homes_of(table: &VotingTable) -> Option<Arc<VotingTable>> {
    matches!(table.virtual_homes(), Ok(Some(_))).then(|| Arc::new(table.clone()))
}
