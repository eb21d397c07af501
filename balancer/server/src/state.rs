//! The balancer's shared state: the replica set, its load view, and the routing policy or
//! voting table, each swapped atomically with `arc-swap` (build apart from pick: a request
//! loads one snapshot and never sees a half-applied change).
//!
//! A replica's index is its position in the table's index space and never changes while it
//! is a member; removing a replica leaves its slot empty (its votes fall to the next-ranked
//! live candidate) and adding one fills the first empty slot. In-flight counts are atomics
//! per replica, read by [`View`], the server-side [`LoadView`]: a replica is live when it is
//! a member, healthy (active checks with fall/rise and passive ejection, as HAProxy does),
//! not drained, and not excluded by the current request's failed attempts.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::http::HeaderValue;
use data::rng::Rng;

use crate::config::{LoadKind, Validated};
use crate::metrics::{self as m, ReplicaMetrics};
use crate::upstream::Pool;
use crate::window::RecentRoutes;
use balancer::load::{LoadView, MAX_REPLICAS};
use balancer::policy::table::TableVotes;
use balancer::policy::vote::pick;
use balancer::policy::{
    build_policy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
    TermBytes,
};
use balancer::ramp::{RampedTable, SharedVotes};

/// One backend replica.
pub struct Replica {
    /// Unique name.
    pub name: String,
    /// `host:port`.
    pub address: String,
    /// Idle keep-alive connections to it.
    pub pool: Pool,
    /// `x-ballot-replica` value.
    pub header: HeaderValue,
    /// Metric handles.
    pub metrics: ReplicaMetrics,
    in_flight: AtomicU64,
    healthy: AtomicBool,
    drained: AtomicBool,
    removed: AtomicBool,
    fails: AtomicU32,
    passes: AtomicU32,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("name", &self.name)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// A healthy, enabled replica (checked names and addresses only).
    pub fn new(name: &str, address: &str) -> Result<Self, String> {
        crate::config::check_name(name)?;
        crate::config::check_address(address)?;
        let header = HeaderValue::from_str(name).map_err(|e| e.to_string())?;
        let pool = Pool::new(address)?;
        Ok(Replica {
            name: name.to_owned(),
            address: address.to_owned(),
            pool,
            header,
            metrics: ReplicaMetrics::new(name),
            in_flight: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            drained: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            fails: AtomicU32::new(0),
            passes: AtomicU32::new(0),
        })
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Counts one request in flight until the guard drops.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }

    /// Passed health checks (or not ejected).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Drained by the admin API.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    /// Removed from the set (its health checks stop).
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    /// Drains (`true`) or enables (`false`) the replica.
    pub fn set_drained(&self, drained: bool) {
        self.drained.store(drained, Ordering::Relaxed);
    }

    /// Ejects the replica (passively, after a failed request, or after `fall` failed checks);
    /// it returns after `rise` passed checks.
    pub fn eject(&self, why: &str) {
        self.passes.store(0, Ordering::Relaxed);
        if self.healthy.swap(false, Ordering::Relaxed) {
            self.metrics.ejections.increment(1);
            tracing::warn!("ejected replica {} ({why})", self.name);
        }
    }

    /// Records one active health check.
    pub fn record_check(&self, passed: bool, fall: u32, rise: u32) {
        if passed {
            self.fails.store(0, Ordering::Relaxed);
            let passes = self
                .passes
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1);
            if passes >= rise && !self.healthy.swap(true, Ordering::Relaxed) {
                tracing::info!("re-admitted replica {}", self.name);
            }
        } else {
            self.passes.store(0, Ordering::Relaxed);
            let fails = self.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
            if fails >= fall {
                self.eject("health check failed");
            }
        }
    }
}

/// A request in flight on a replica; dropping it ends the request.
#[derive(Debug)]
pub struct InFlight(Arc<Replica>);

impl InFlight {
    /// The replica.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The replica slots; the index is the table index.
#[derive(Debug, Default)]
pub struct Members {
    /// `None`: a removed replica's slot.
    pub slots: Vec<Option<Arc<Replica>>>,
}

impl Members {
    /// The member named `name`, with its index.
    pub fn find(&self, name: &str) -> Option<(usize, &Arc<Replica>)> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.as_ref().filter(|r| r.name == name).map(|r| (i, r)))
    }
}

/// The server-side [`LoadView`]: in-flight counts (or, with a window, recent routing
/// decisions) and liveness of one snapshot of the members, minus the replicas a request
/// already failed on.
pub struct View<'a> {
    slots: &'a [Option<Arc<Replica>>],
    exclude: u64,
    ignore_health: bool,
    window: Option<&'a RecentRoutes>,
    /// Window mode: replicas with at least this many requests in flight count as full.
    stall_cap: u64,
}

impl<'a> View<'a> {
    /// A view of `members`, excluding the replicas in the `exclude` bit mask. With
    /// `ignore_health`, ejected replicas count as live (the last resort when every replica
    /// is ejected).
    pub fn new(members: &'a Members, exclude: u64, ignore_health: bool) -> Self {
        View {
            slots: &members.slots,
            exclude,
            ignore_health,
            window: None,
            stall_cap: u64::MAX,
        }
    }

    /// Loads from `window` instead of in-flight counts; a replica holding at least
    /// `load_cap(stall_eps, in-flight total, live) + stall_slack` requests in flight still
    /// counts as full (it is falling behind: its queries go to the next-ranked replica).
    pub fn with_window(
        mut self,
        window: &'a RecentRoutes,
        stall_eps: f64,
        stall_slack: u64,
    ) -> Self {
        let in_flight = self
            .slots
            .iter()
            .flatten()
            .fold(0u64, |a, r| a.saturating_add(r.in_flight()));
        let live = self.live_bits().count_ones() as usize;
        self.stall_cap =
            balancer::load::load_cap(stall_eps, in_flight, live).saturating_add(stall_slack);
        self.window = Some(window);
        self
    }

    /// Load of the replica in slot `r`.
    #[inline]
    fn load_of(&self, r: usize, rep: &Replica) -> u64 {
        match self.window {
            None => rep.in_flight(),
            Some(w) if rep.in_flight() < self.stall_cap => w.count(r),
            Some(_) => u64::MAX,
        }
    }

    #[inline]
    fn live(&self, r: usize, rep: &Replica) -> bool {
        self.exclude & (1u64 << r) == 0
            && (self.ignore_health || rep.is_healthy())
            && !rep.is_drained()
    }
}

impl LoadView for View<'_> {
    fn replicas(&self) -> usize {
        self.slots.len()
    }

    fn load(&self, replica: usize) -> u64 {
        match self.slots.get(replica) {
            Some(Some(r)) => self.load_of(replica, r),
            _ => 0,
        }
    }

    fn total(&self) -> u64 {
        match self.window {
            Some(w) => w.total(),
            None => self
                .slots
                .iter()
                .flatten()
                .fold(0u64, |a, r| a.saturating_add(r.in_flight())),
        }
    }

    fn is_live(&self, replica: usize) -> bool {
        match self.slots.get(replica) {
            Some(Some(r)) => replica < MAX_REPLICAS && self.live(replica, r),
            _ => false,
        }
    }

    fn live_bits(&self) -> u64 {
        let mut bits = 0u64;
        for (i, s) in self.slots.iter().enumerate().take(MAX_REPLICAS) {
            if let Some(r) = s {
                if self.live(i, r) {
                    bits |= 1 << i;
                }
            }
        }
        bits
    }
}

/// A table ramp in progress.
#[derive(Clone, Debug)]
pub struct Ramp {
    /// Old and new votes.
    pub table: RampedTable,
    /// When it started.
    pub start: Instant,
    /// How long it lasts.
    pub duration: Duration,
}

impl Ramp {
    /// Progress at `now`, in `[0, 1]`.
    pub fn progress(&self, now: Instant) -> f64 {
        if self.duration.is_zero() {
            return 1.0;
        }
        let p =
            now.saturating_duration_since(self.start).as_secs_f64() / self.duration.as_secs_f64();
        p.min(1.0)
    }
}

/// The voting table in use: one snapshot.
pub struct TableState {
    /// Votes when no ramp runs (the newest table).
    pub current: SharedVotes,
    /// The ramp from the previous table to `current`, while it runs.
    pub ramp: Option<Ramp>,
    /// 1 at start, +1 per accepted reload.
    pub version: u64,
    /// Table replica count.
    pub replicas: usize,
    /// Terms and votes in `current`.
    pub terms: usize,
    /// Positive votes in `current`.
    pub votes: usize,
}

/// What routes: a policy, or a (reloadable, ramped) voting table.
pub enum Router {
    /// Any [`PolicyKind`] but `table`; rebuilt when the replica set grows.
    Policy(ArcSwap<Box<dyn RoutingPolicy>>),
    /// `table`.
    Table(ArcSwap<TableState>),
}

/// Everything the handlers share.
pub struct State {
    /// The validated config.
    pub cfg: Validated,
    /// The policy.
    pub kind: PolicyKind,
    /// The replica set.
    pub members: ArcSwap<Members>,
    /// The router.
    pub router: Router,
    /// Term sizes (term-vote weights, table fallback).
    pub term_bytes: Arc<TermBytes>,
    /// Serializes membership changes and table swaps.
    pub admin_lock: Mutex<()>,
    /// Recent routing decisions, with `load = "window"`.
    pub window: Option<RecentRoutes>,
    seed: AtomicU64,
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

impl State {
    /// Builds the state from a validated config and, for `table`, the initial table.
    pub fn new(
        cfg: Validated,
        term_bytes: Arc<TermBytes>,
        table: Option<&data::table::VotingTable>,
    ) -> Result<Self, String> {
        let mut slots = Vec::with_capacity(cfg.config.replicas.len());
        for r in &cfg.config.replicas {
            slots.push(Some(Arc::new(Replica::new(&r.name, &r.address)?)));
        }
        let n = slots.len();
        let kind = cfg.policy;
        let router = if kind == PolicyKind::Table {
            let table = table.ok_or("policy `table` needs a voting table")?;
            let votes =
                TableVotes::build(table, n, Arc::clone(&term_bytes)).map_err(|e| e.to_string())?;
            Router::Table(ArcSwap::from_pointee(TableState {
                terms: votes.terms(),
                votes: votes.vote_count(),
                current: Arc::new(votes),
                ramp: None,
                version: 1,
                replicas: n,
            }))
        } else {
            let p = build_policy(kind, &Self::params(&cfg, n, &term_bytes))
                .map_err(|e| e.to_string())?;
            Router::Policy(ArcSwap::from_pointee(p))
        };
        let seed = data::hash::mix64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        );
        let window = (cfg.config.load == LoadKind::Window)
            .then(|| RecentRoutes::new(cfg.config.load_window));
        Ok(State {
            cfg,
            kind,
            members: ArcSwap::from_pointee(Members { slots }),
            router,
            term_bytes,
            admin_lock: Mutex::new(()),
            window,
            seed: AtomicU64::new(seed),
        })
    }

    fn params(cfg: &Validated, replicas: usize, term_bytes: &Arc<TermBytes>) -> PolicyParams {
        let mut p = PolicyParams::new(replicas).with_term_bytes(Arc::clone(term_bytes));
        p.eps = cfg.config.eps;
        p.vnodes = cfg.config.policy.vnodes;
        p
    }

    /// Routes `query`, skipping the replicas in `exclude`. `None` when no replica can take
    /// it. Allocation-free apart from what the policy does (nothing).
    pub fn route(&self, query: &QueryKey<'_>, exclude: u64) -> Option<Choice> {
        let members = self.members.load();
        let mut view = View::new(&members, exclude, false);
        if view.live_bits() == 0 {
            // Every remaining replica is ejected: try them anyway rather than fail.
            view = View::new(&members, exclude, true);
            if view.live_bits() == 0 {
                return None;
            }
        }
        let window = self.window.as_ref();
        if let Some(w) = window {
            let c = &self.cfg.config;
            view = view.with_window(w, c.stall_eps, c.stall_slack);
        }
        let seed = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        let mut rng = Rng::new(seed);
        let d: Decision = match &self.router {
            Router::Policy(p) => p.load().route(query, &view, &mut rng),
            Router::Table(t) => {
                let t = t.load();
                let eps = self.cfg.config.eps;
                match &t.ramp {
                    Some(ramp) => {
                        let progress = ramp.progress(Instant::now());
                        ramp.table
                            .route(query, progress, t.replicas, eps, &view, &mut rng)
                    }
                    None => {
                        let scores = t.current.score(query.term_hashes);
                        pick(&scores, t.replicas, eps, &view, &mut rng)
                    }
                }
            }
        };
        let index = usize::from(d.replica);
        if !view.is_live(index) {
            return None;
        }
        let replica = members.slots.get(index)?.as_ref()?;
        if let (Some(w), 0) = (window, exclude) {
            // First attempts only: a retry is the same query, as in the simulator.
            w.record(index);
        }
        Some(Choice {
            replica: Arc::clone(replica),
            index,
            reason: d.reason,
        })
    }

    /// The table replica count (`None` for other policies).
    pub fn table_replicas(&self) -> Option<usize> {
        match &self.router {
            Router::Table(t) => Some(t.load().replicas),
            Router::Policy(_) => None,
        }
    }

    /// Swaps in a compiled table, ramping over the configured duration. Returns the new
    /// version.
    pub fn install_table(&self, votes: TableVotes) -> Result<u64, String> {
        let Router::Table(t) = &self.router else {
            return Err(format!(
                "policy `{}` does not use a voting table",
                self.kind
            ));
        };
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let old = t.load();
        let now = Instant::now();
        let old_votes: SharedVotes = match &old.ramp {
            Some(r) => r.table.frozen(r.progress(now)),
            None => Arc::clone(&old.current),
        };
        let (terms, nvotes) = (votes.terms(), votes.vote_count());
        let new: SharedVotes = Arc::new(votes);
        let duration = self.cfg.ramp();
        let ramp = (!duration.is_zero()).then(|| Ramp {
            table: RampedTable::new(old_votes, Arc::clone(&new)),
            start: now,
            duration,
        });
        let version = old.version + 1;
        metrics::gauge!(m::RAMP_PROGRESS).set(if ramp.is_some() { 0.0 } else { 1.0 });
        t.store(Arc::new(TableState {
            current: new,
            ramp,
            version,
            replicas: old.replicas,
            terms,
            votes: nvotes,
        }));
        metrics::gauge!(m::TABLE_VERSION).set(version as f64);
        Ok(version)
    }

    /// Ends a finished ramp (drops the old table) and publishes the ramp progress.
    pub fn tick(&self) {
        let Router::Table(t) = &self.router else {
            metrics::gauge!(m::RAMP_PROGRESS).set(1.0);
            return;
        };
        let snap = t.load();
        let Some(ramp) = &snap.ramp else {
            metrics::gauge!(m::RAMP_PROGRESS).set(1.0);
            return;
        };
        let p = ramp.progress(Instant::now());
        if p < 1.0 {
            metrics::gauge!(m::RAMP_PROGRESS).set(p);
            return;
        }
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = t.load();
        // A reload may have started a new ramp meanwhile: only end the one we saw.
        if Arc::ptr_eq(&cur, &snap) {
            t.store(Arc::new(TableState {
                current: Arc::clone(&cur.current),
                ramp: None,
                version: cur.version,
                replicas: cur.replicas,
                terms: cur.terms,
                votes: cur.votes,
            }));
            metrics::gauge!(m::RAMP_PROGRESS).set(1.0);
        }
    }

    /// Adds a replica in the first empty slot (or a new one). Returns its index.
    pub fn add_replica(&self, name: &str, address: &str) -> Result<usize, (u16, String)> {
        let rep = Replica::new(name, address).map_err(|e| (400, e))?;
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.members.load();
        if cur.find(name).is_some() {
            return Err((409, format!("replica `{name}` already exists")));
        }
        let mut slots = cur.slots.clone();
        let index = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                if let Some(r) = self.table_replicas() {
                    return Err((
                        409,
                        format!(
                            "the voting table routes over {r} replicas and every slot is taken; \
                             remove a replica first or load a table for {} replicas",
                            r + 1
                        ),
                    ));
                }
                if slots.len() >= MAX_REPLICAS {
                    return Err((409, format!("at most {MAX_REPLICAS} replicas")));
                }
                slots.push(None);
                slots.len() - 1
            }
        };
        let rep = Arc::new(rep);
        slots[index] = Some(Arc::clone(&rep));
        if let Router::Policy(p) = &self.router {
            if slots.len() != cur.slots.len() {
                let params = Self::params(&self.cfg, slots.len(), &self.term_bytes);
                let built = build_policy(self.kind, &params)
                    .map_err(|e: PolicyError| (500, e.to_string()))?;
                // The policy covers the new slot before the slot becomes visible.
                p.store(Arc::new(built));
            }
        }
        self.members.store(Arc::new(Members { slots }));
        Ok(index)
    }

    /// Removes a replica; its slot stays empty so the other indices keep their meaning.
    pub fn remove_replica(&self, name: &str) -> Result<Arc<Replica>, String> {
        let _guard = self.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.members.load();
        let Some((index, rep)) = cur.find(name) else {
            return Err(format!("no replica named `{name}`"));
        };
        let rep = Arc::clone(rep);
        let mut slots = cur.slots.clone();
        slots[index] = None;
        rep.removed.store(true, Ordering::Relaxed);
        self.members.store(Arc::new(Members { slots }));
        Ok(rep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Members {
        Members {
            slots: (0..n)
                .map(|i| {
                    Some(Arc::new(
                        Replica::new(&format!("r{i}"), "127.0.0.1:1").unwrap(),
                    ))
                })
                .collect(),
        }
    }

    #[test]
    fn view_reflects_health_drain_exclusion_and_removal() {
        let mut m = members(4);
        let _a = m.slots[0].as_ref().unwrap().start();
        let _b = m.slots[0].as_ref().unwrap().start();
        let _c = m.slots[2].as_ref().unwrap().start();
        m.slots[1].as_ref().unwrap().eject("test");
        m.slots[3].as_ref().unwrap().set_drained(true);
        let v = View::new(&m, 0, false);
        assert_eq!(v.live_bits(), 0b0101);
        assert_eq!(v.total(), 3);
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b1110);
        let v = View::new(&m, 0b0001, false);
        assert_eq!(v.live_bits(), 0b0100);
        let v = View::new(&m, 0, true);
        assert_eq!(v.live_bits(), 0b0111);
        m.slots[2] = None;
        let v = View::new(&m, 0, false);
        assert_eq!((v.live_bits(), v.total(), v.replicas()), (0b0001, 2, 4));
    }

    #[test]
    fn window_view_counts_decisions_and_sheds_stalled_replicas() {
        let m = members(4);
        let w = RecentRoutes::new(100);
        for r in [0, 0, 0, 1, 2] {
            w.record(r);
        }
        let v = View::new(&m, 0, false).with_window(&w, 1.0, 8);
        assert_eq!((v.load(0), v.load(1), v.load(3), v.total()), (3, 1, 0, 5));
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b1110);
        // Replica 3 holds all the requests in flight. With 11: stall cap
        // ceil(2 * 12 / 4) + 8 = 14 > 11, so its window load counts. With 20: cap
        // ceil(2 * 21 / 4) + 8 = 19 <= 20, so it is full whatever the window says.
        let _held: Vec<_> = (0..11)
            .map(|_| m.slots[3].as_ref().unwrap().start())
            .collect();
        let v = View::new(&m, 0, false).with_window(&w, 1.0, 8);
        assert_eq!(v.load(3), 0);
        let _more: Vec<_> = (0..9)
            .map(|_| m.slots[3].as_ref().unwrap().start())
            .collect();
        let v = View::new(&m, 0, false).with_window(&w, 1.0, 8);
        assert_eq!(v.load(3), u64::MAX);
        assert_eq!(v.load(1), 1);
        assert_eq!(v.below_cap_bits(0b1111, 2), 0b0110);
    }

    #[test]
    fn fall_and_rise() {
        let r = Replica::new("x", "127.0.0.1:1").unwrap();
        r.record_check(false, 2, 3);
        assert!(r.is_healthy());
        r.record_check(false, 2, 3);
        assert!(!r.is_healthy());
        r.record_check(true, 2, 3);
        r.record_check(true, 2, 3);
        assert!(!r.is_healthy());
        r.record_check(true, 2, 3);
        assert!(r.is_healthy());
    }
}
