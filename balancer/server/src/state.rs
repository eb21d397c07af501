//! The balancer's routing state: the replica set ([`crate::replicas`]), the shared loads of
//! [`balancer::load`] (requests in flight, and the trailing window of queries or work), and
//! the routing policy — one [`RoutingPolicy`] object, the very type the simulators replay
//! (`table` is a [`TablePolicy`], or a [`RampPolicy`] while a reloaded table ramps in).
//!
//! Build apart from pick: the replica set and the policy are each swapped atomically with
//! `arc-swap`, so a request loads one snapshot and never sees a half-applied change; a
//! routing decision reads atomics and allocates nothing. Membership changes and table swaps
//! are serialized by one lock and never touch the request path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use balancer::load::{LoadKind, LoadView, Window, MAX_REPLICAS};
use balancer::policy::table::{TablePolicy, TableVotes};
use balancer::policy::{
    build_policy, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy, TermBytes,
};
use balancer::ramp::{RampPolicy, RampedTable, SharedVotes};
use data::rng::Rng;
use hyper::body::Bytes;

use crate::admit::Slots;
use crate::config::Validated;
use crate::metrics as m;
use crate::replicas::{Members, QueryClock, Replica, ReplicaError};
use crate::view::{View, ViewConfig};

/// Why the routing state could not be built or changed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The policy (or the table compiled for it) is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A configured replica is invalid.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// `table` was configured without a table.
    #[error("policy `table` needs a voting table")]
    MissingTable,
    /// A table was given to a policy that does not use one.
    #[error("policy `{0}` does not use a voting table")]
    NoTable(PolicyKind),
    /// The initial table could not be kept as Parquet for `GET /admin/table/parquet`.
    #[error("the voting table cannot be serialized: {0}")]
    Table(String),
}

/// Why a membership change was refused.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The name or address is invalid.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// A replica of that name exists.
    #[error("replica `{0}` already exists")]
    Exists(String),
    /// The voting table fixes the replica count and every slot is taken.
    #[error(
        "the voting table routes over {0} replicas and every slot is taken; remove a replica \
         first or load a table for more replicas"
    )]
    NoSlot(usize),
    /// The replica set is full.
    #[error("at most {MAX_REPLICAS} replicas")]
    TooMany,
    /// No replica of that name.
    #[error("no replica named `{0}`")]
    NotFound(String),
    /// The policy could not be rebuilt for the new replica count.
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// The voting table being served, and its ramp while one runs.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// 1 at start, +1 per accepted reload.
    pub version: u64,
    /// Replica count of the table.
    pub replicas: usize,
    /// Terms in the newest table.
    pub terms: usize,
    /// Positive votes in the newest table.
    pub votes: usize,
    /// [`TableVotes::content_hash`] of the newest table.
    pub content_hash: u64,
    /// The newest table.
    pub current: Arc<TableVotes>,
    /// The newest table as a Parquet file (what `GET /admin/table/parquet` returns).
    pub parquet: Bytes,
    /// The ramp from the previous table to `current`, while it runs.
    pub ramp: Option<Arc<RampPolicy>>,
}

impl TableInfo {
    /// The ramp's progress (1 when no ramp runs).
    pub fn progress(&self) -> f64 {
        self.ramp.as_ref().map_or(1.0, |r| r.progress())
    }
}

/// One snapshot of what routes.
pub struct Routing {
    /// The policy every request routes through.
    pub policy: Arc<dyn RoutingPolicy>,
    /// For `table`: the table behind the policy.
    pub table: Option<TableInfo>,
}

/// A routing choice.
#[derive(Clone, Debug)]
pub struct Choice {
    /// The replica.
    pub replica: Arc<Replica>,
    /// Its index.
    pub index: usize,
    /// Why.
    pub reason: Reason,
}

/// No replica is left to route a query to: none is a member, enabled and not yet tried
/// by the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoReplica;

/// Everything the handlers share.
pub struct State {
    /// The validated config.
    pub cfg: Validated,
    /// The policy.
    pub kind: PolicyKind,
    /// The replica set.
    pub members: ArcSwap<Members>,
    routing: ArcSwap<Routing>,
    /// Term sizes (term-vote weights, table fallback).
    pub term_bytes: Arc<TermBytes>,
    admin_lock: Mutex<()>,
    /// Requests in flight and queued per slot (the load of `in-flight`, the stall guard
    /// of the others), bounded by `replica_max_in_flight`.
    pub slots: Arc<Slots>,
    /// The trailing window of `window` and `work`.
    pub window: Option<Window>,
    /// Routed queries (first attempts): the slow-start clock.
    pub clock: Arc<QueryClock>,
    seed: AtomicU64,
}

impl State {
    /// Builds the state from a validated config and, for `table`, the initial table.
    pub fn new(
        cfg: Validated,
        term_bytes: Arc<TermBytes>,
        table: Option<&data::table::VotingTable>,
    ) -> Result<Self, StateError> {
        let clock = Arc::new(QueryClock::default());
        let mut slots = Vec::with_capacity(cfg.config.replicas.len());
        for r in &cfg.config.replicas {
            let rep = Replica::new(&r.name, &r.address, Arc::clone(&clock))?;
            slots.push(Some(Arc::new(rep)));
        }
        let n = slots.len();
        let kind = cfg.policy;
        let routing = match (kind, table) {
            (PolicyKind::Table, Some(table)) => {
                let votes = Arc::new(TableVotes::build(table, n, Arc::clone(&term_bytes))?);
                if let Some(rule) = cfg.cache_admission {
                    let shadow = cfg.config.shadow.as_ref().map(|s| s.cache_bytes);
                    crate::cache_hint::log_rule(rule, &votes, shadow);
                }
                let parquet = table
                    .to_parquet_bytes(std::path::Path::new("<initial table>"))
                    .map_err(|e| StateError::Table(e.to_string()))?;
                Routing {
                    policy: Arc::new(TablePolicy::from_votes(
                        Arc::clone(&votes),
                        cfg.config.eps,
                        cfg.config.policy.homes,
                    )),
                    table: Some(TableInfo {
                        version: 1,
                        replicas: n,
                        terms: votes.terms(),
                        votes: votes.vote_count(),
                        content_hash: votes.content_hash(),
                        current: votes,
                        parquet: Bytes::from(parquet),
                        ramp: None,
                    }),
                }
            }
            (PolicyKind::Table, None) => return Err(StateError::MissingTable),
            (_, Some(_)) => return Err(StateError::NoTable(kind)),
            (_, None) => Routing {
                policy: Arc::from(build_policy(kind, &Self::params(&cfg, n, &term_bytes))?),
                table: None,
            },
        };
        let seed = data::hash::mix64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        );
        let window = matches!(cfg.load, LoadKind::Window | LoadKind::Work)
            .then(|| Window::new(MAX_REPLICAS, cfg.config.load_window));
        // Read before `cfg` moves into the state.
        let places = Arc::new(
            Slots::new(MAX_REPLICAS, cfg.config.replica_max_in_flight)
                .with_reports(cfg.config.backlog_reports_ms),
        );
        Ok(State {
            cfg,
            kind,
            members: ArcSwap::from_pointee(Members { slots }),
            routing: ArcSwap::from_pointee(routing),
            term_bytes,
            admin_lock: Mutex::new(()),
            slots: places,
            window,
            clock,
            seed: AtomicU64::new(seed),
        })
    }

    fn params(cfg: &Validated, replicas: usize, term_bytes: &Arc<TermBytes>) -> PolicyParams {
        let mut p = PolicyParams::new(replicas).with_term_bytes(Arc::clone(term_bytes));
        p.eps = cfg.config.eps;
        p.vnodes = cfg.config.policy.vnodes;
        p.homes = cfg.config.policy.homes;
        p
    }

    /// The current routing snapshot.
    pub fn routing(&self) -> arc_swap::Guard<Arc<Routing>> {
        self.routing.load()
    }

    fn view_config(&self) -> ViewConfig {
        let c = &self.cfg.config;
        ViewConfig {
            stall: self.window.is_some().then_some(balancer::load::Stall {
                eps: c.stall_eps,
                slack: c.stall_slack,
            }),
            slow_start: c.slow_start_queries,
            now: self.clock.now(),
        }
    }

    /// Routes `query`, skipping the replicas in `exclude` (the ones a request already
    /// failed on): the policy's decision over the server's [`View`] of the live replicas,
    /// or of the ejected ones too when no healthy one is left. A full replica is not
    /// skipped: the request waits in its queue ([`Slots::enqueue`]), and the stall guard
    /// and the load bound see the backlog. Allocation-free.
    pub fn route(&self, query: &QueryKey<'_>, exclude: u64) -> Result<Choice, NoReplica> {
        self.route_by(&*self.routing.load().policy, query, exclude)
    }

    /// [`State::route`], except that the replica in slot `pin` takes the query when it is
    /// live and not in `exclude` (a sharded balancer's column, chosen in another shard, with
    /// the reason it was chosen for). Allocation-free.
    pub fn route_pinned(
        &self,
        query: &QueryKey<'_>,
        pin: Option<(usize, Reason)>,
        exclude: u64,
    ) -> Result<Choice, NoReplica> {
        if let Some((index, reason)) = pin.filter(|&(i, _)| i < 64 && exclude & (1 << i) == 0) {
            let members = self.members.load();
            let live = self
                .view(&members, exclude)
                .is_some_and(|v| v.is_live(index));
            if let Some(replica) = members.slots.get(index).and_then(Option::as_ref) {
                if live {
                    return Ok(Choice {
                        replica: Arc::clone(replica),
                        index,
                        reason,
                    });
                }
            }
        }
        self.route(query, exclude)
    }

    /// [`State::route`] with `policy` instead of the configured one (the fallback policy
    /// of requests without a query).
    pub fn route_by(
        &self,
        policy: &dyn RoutingPolicy,
        query: &QueryKey<'_>,
        exclude: u64,
    ) -> Result<Choice, NoReplica> {
        let members = self.members.load();
        let view = self.view(&members, exclude).ok_or(NoReplica)?;
        let d = policy
            .route(query, &view, &mut self.rng())
            .ok_or(NoReplica)?;
        let index = usize::from(d.replica);
        if !view.is_live(index) {
            return Err(NoReplica);
        }
        let replica = members
            .slots
            .get(index)
            .and_then(Option::as_ref)
            .ok_or(NoReplica)?;
        Ok(Choice {
            replica: Arc::clone(replica),
            index,
            reason: d.reason,
        })
    }

    /// The load view a routing decision over `members` sees now, without the replicas in
    /// `exclude`: the live ones, or the ejected ones too when no healthy one is left (rather
    /// than fail); `None` when no member is left at all.
    pub fn view<'a>(&'a self, members: &'a Members, exclude: u64) -> Option<View<'a>> {
        let base: &dyn LoadView = match &self.window {
            Some(w) => w,
            None => &*self.slots,
        };
        let vcfg = self.view_config();
        let view_of = |ignore_health: bool| {
            View::new(members, base, &self.slots, exclude, ignore_health, vcfg)
        };
        let view = view_of(false);
        if view.live_bits() != 0 {
            return Some(view);
        }
        let view = view_of(true);
        (view.live_bits() != 0).then_some(view)
    }

    /// A random state for one routing decision (each gets its own seed).
    pub fn rng(&self) -> Rng {
        Rng::new(
            self.seed
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed),
        )
    }

    /// Counts a query routed to slot `index` at its first attempt (a retry is the same
    /// query, as in the simulator), once, whether it then waits in a queue or not: the
    /// slow-start clock, and the `window` load.
    pub fn routed(&self, index: usize) {
        self.clock.tick();
        if let (Some(w), LoadKind::Window) = (&self.window, self.cfg.load) {
            w.record(index, 1);
        }
    }

    /// With `load = "work"`: records a query answered by slot `index` that read
    /// `miss_bytes` from flash there (as its replica reported them).
    pub fn record_work(&self, index: usize, miss_bytes: u64) {
        if let (Some(w), LoadKind::Work) = (&self.window, self.cfg.load) {
            let cost = self.cfg.config.work_query_bytes.saturating_add(miss_bytes);
            w.record(index, cost);
        }
    }

    /// The table replica count (`None` for other policies).
    pub fn table_replicas(&self) -> Option<usize> {
        self.routing.load().table.as_ref().map(|t| t.replicas)
    }

    /// Swaps in a compiled table, ramping it in over `ramp_queries` routed queries (a
    /// ramp still running is frozen where it is and ramps out). Returns the new version.
    pub fn install_table(&self, votes: TableVotes, parquet: Bytes) -> Result<u64, StateError> {
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.routing.load();
        let Some(old_table) = &old.table else {
            return Err(StateError::NoTable(self.kind));
        };
        let old_votes: SharedVotes = match &old_table.ramp {
            Some(r) => r.frozen(),
            None => Arc::clone(&old_table.current) as SharedVotes,
        };
        let new = Arc::new(votes);
        if let Some(rule) = self.cfg.cache_admission {
            let shadow = self.cfg.config.shadow.as_ref().map(|s| s.cache_bytes);
            crate::cache_hint::log_rule(rule, &new, shadow);
        }
        let eps = self.cfg.config.eps;
        let homes = self.cfg.config.policy.homes;
        let len = self.cfg.config.ramp_queries;
        let (policy, ramp): (Arc<dyn RoutingPolicy>, _) = if len == 0 {
            (
                Arc::new(TablePolicy::from_votes(Arc::clone(&new), eps, homes)),
                None,
            )
        } else {
            let ramp = Arc::new(RampPolicy::new(
                RampedTable::new(old_votes, Arc::clone(&new) as SharedVotes),
                old_table.replicas,
                eps,
                homes,
                0,
                len,
            ));
            (Arc::clone(&ramp) as Arc<dyn RoutingPolicy>, Some(ramp))
        };
        let version = old_table.version + 1;
        let content_hash = new.content_hash();
        metrics::gauge!(m::RAMP_PROGRESS).set(if ramp.is_some() { 0.0 } else { 1.0 });
        self.routing.store(Arc::new(Routing {
            policy,
            table: Some(TableInfo {
                version,
                replicas: old_table.replicas,
                terms: new.terms(),
                votes: new.vote_count(),
                content_hash,
                current: new,
                parquet,
                ramp,
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
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        // A reload may have started a new ramp meanwhile: only end the one we saw.
        if Arc::ptr_eq(&self.routing.load(), &snap) {
            let policy = TablePolicy::from_votes(
                Arc::clone(&table.current),
                self.cfg.config.eps,
                self.cfg.config.policy.homes,
            );
            self.routing.store(Arc::new(Routing {
                policy: Arc::new(policy),
                table: Some(TableInfo {
                    ramp: None,
                    ..table.clone()
                }),
            }));
        }
    }

    /// Adds a replica in the first empty slot (or a new one). Returns its index.
    pub fn add_replica(&self, name: &str, address: &str) -> Result<usize, MembershipError> {
        let rep = Replica::new(name, address, Arc::clone(&self.clock))?;
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.members.load();
        if cur.find(name).is_some() {
            return Err(MembershipError::Exists(name.to_owned()));
        }
        let mut slots = cur.slots.clone();
        let index = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                if let Some(r) = self.table_replicas() {
                    return Err(MembershipError::NoSlot(r));
                }
                if slots.len() >= MAX_REPLICAS {
                    return Err(MembershipError::TooMany);
                }
                slots.push(None);
                slots.len() - 1
            }
        };
        slots[index] = Some(Arc::new(rep));
        if self.kind != PolicyKind::Table && slots.len() != cur.slots.len() {
            let params = Self::params(&self.cfg, slots.len(), &self.term_bytes);
            let built = build_policy(self.kind, &params)?;
            // The policy covers the new slot before the slot becomes visible.
            self.routing.store(Arc::new(Routing {
                policy: Arc::from(built),
                table: None,
            }));
        }
        self.members.store(Arc::new(Members { slots }));
        Ok(index)
    }

    /// Removes a replica; its slot stays empty so the other indices keep their meaning.
    pub fn remove_replica(&self, name: &str) -> Result<Arc<Replica>, MembershipError> {
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.members.load();
        let Some((index, rep)) = cur.find(name) else {
            return Err(MembershipError::NotFound(name.to_owned()));
        };
        let rep = Arc::clone(rep);
        let mut slots = cur.slots.clone();
        slots[index] = None;
        rep.set_removed();
        self.members.store(Arc::new(Members { slots }));
        Ok(rep)
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
