//! One shard's replicas and loads (the whole backend without `[shards]`): the replica set
//! ([`crate::replicas`]), the shared loads of [`balancer::load`] (requests in flight and
//! queued, the trailing window of queries or work), the shadow caches, and the routing
//! decision over them: the policy of the request's routing snapshot over the server's
//! [`View`] of the live replicas. A routing decision reads atomics and allocates nothing;
//! membership changes swap the replica set atomically under one lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use balancer::load::{LatencyStats, LoadKind, LoadView, Signaled, Signals, Window, MAX_REPLICAS};
use balancer::policy::{QueryKey, Reason, RoutingPolicy};
use balancer::shadow::{Owners, Shadow};
use data::rng::Rng;

use crate::admit::Slots;
use crate::config::Validated;
use crate::replicas::{Members, QueryClock, Replica, ReplicaError};
use crate::view::{View, ViewConfig};

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
    Policy(#[from] balancer::policy::PolicyError),
}

/// One shard.
pub struct Shard {
    /// The replica set.
    pub members: ArcSwap<Members>,
    /// Requests in flight and queued per slot (the load of `in-flight`, the stall guard
    /// of the others), bounded by `replica_max_in_flight`.
    pub slots: Arc<Slots>,
    /// The trailing window of `window` and `work`.
    pub window: Option<Window>,
    /// Routed queries (first attempts): the slow-start clock.
    pub clock: Arc<QueryClock>,
    /// The shadow caches (`[shadow]`).
    pub shadow: Option<Shadow>,
    /// Each slot's answer speed (response time, and the service time and queue its load
    /// reports give), for the latency-driven policies.
    pub latency: LatencyStats,
    load: LoadKind,
    work_query_bytes: u64,
    view: ViewConfig,
    lock: Mutex<()>,
    seed: AtomicU64,
}

impl Shard {
    /// Shard `s` of `cfg`, with its `shadow` caches.
    pub fn new(cfg: &Validated, s: usize, shadow: Option<Shadow>) -> Result<Shard, ReplicaError> {
        let c = &cfg.config;
        let clock = Arc::new(QueryClock::default());
        let slots = cfg
            .shard_replicas(s)
            .map(|r| {
                Ok(Some(Arc::new(Replica::new(
                    &r.name,
                    &r.address,
                    Arc::clone(&clock),
                )?)))
            })
            .collect::<Result<Vec<_>, ReplicaError>>()?;
        let window = matches!(cfg.load, LoadKind::Window | LoadKind::Work)
            .then(|| Window::new(MAX_REPLICAS, c.load_window));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(Shard {
            members: ArcSwap::from_pointee(Members { slots }),
            slots: Arc::new(
                Slots::new(MAX_REPLICAS, c.replica_max_in_flight)
                    .with_reports(c.backlog_reports_ms)
                    .with_stealing(c.steal_after_ms.map(std::time::Duration::from_millis)),
            ),
            view: ViewConfig {
                stall: window.is_some().then_some(balancer::load::Stall {
                    eps: c.stall_eps,
                    slack: c.stall_slack,
                }),
                // A replica coming back refills its cache over about one ramp of queries.
                slow_start: c.ramp_queries,
                now: 0,
            },
            window,
            clock,
            shadow,
            latency: LatencyStats::default(),
            load: cfg.load,
            work_query_bytes: c.work_query_bytes,
            lock: Mutex::new(()),
            seed: AtomicU64::new(data::hash::mix64(seed ^ s as u64)),
        })
    }

    /// Routes `key` by `policy`, skipping the replicas in `exclude` (the ones a request
    /// already failed on), over the live replicas, or the ejected ones too when no healthy
    /// one is left. The replica in slot `pin` takes it instead when it is live and not
    /// excluded (a sharded query's column, chosen in another shard). A full replica is not
    /// skipped: the request waits in its queue. Allocation-free.
    pub fn route(
        &self,
        policy: &dyn RoutingPolicy,
        key: &QueryKey<'_>,
        pin: Option<(usize, Reason)>,
        exclude: u64,
    ) -> Result<Choice, NoReplica> {
        let members = self.members.load();
        let view = self.view(&members, exclude).ok_or(NoReplica)?;
        if exclude == 0 {
            self.slots.set_takers(view.live_bits());
        }
        let pinned = pin.filter(|&(i, _)| i < 64 && exclude & (1 << i) == 0 && view.is_live(i));
        let (index, reason) = match pinned {
            Some(p) => p,
            None => {
                let view = Signaled::new(&view, self.signals(&members));
                let d = policy.route(key, &view, &mut self.rng()).ok_or(NoReplica)?;
                (usize::from(d.replica), d.reason)
            }
        };
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
            reason,
        })
    }

    /// The replica in slot `index` as a choice for `reason` (a place taken there for a
    /// request that waited elsewhere), if the slot still has one.
    pub fn choice_at(&self, index: usize, reason: Reason) -> Option<Choice> {
        let members = self.members.load();
        let replica = members.slots.get(index)?.as_ref()?;
        Some(Choice {
            replica: Arc::clone(replica),
            index,
            reason,
        })
    }

    /// What the policies read besides the loads: the slots' answer speeds, and the
    /// shadow caches of the replicas of `members`.
    pub fn signals<'a>(&'a self, members: &'a Members) -> Signals<'a> {
        Signals {
            latency: Some(&self.latency),
            shadow: self.shadow.as_ref().map(|s| (s, members as &dyn Owners)),
        }
    }

    /// The load view a routing decision over `members` sees now, without the replicas in
    /// `exclude`: the live ones, or the ejected ones too when no healthy one is left (rather
    /// than fail); `None` when no member is left at all.
    pub fn view<'a>(&'a self, members: &'a Members, exclude: u64) -> Option<View<'a>> {
        let base: &dyn LoadView = match &self.window {
            Some(w) => w,
            None => &*self.slots,
        };
        let vcfg = ViewConfig {
            now: self.clock.now(),
            ..self.view
        };
        [false, true].into_iter().find_map(|ignore_health| {
            let view = View::new(members, base, &self.slots, exclude, ignore_health, vcfg);
            (view.live_bits() != 0).then_some(view)
        })
    }

    /// A random state for one routing decision (each gets its own seed).
    fn rng(&self) -> Rng {
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
        if let (Some(w), LoadKind::Window) = (&self.window, self.load) {
            w.record(index, 1);
        }
    }

    /// With `load = "work"`: records a query answered by slot `index` that read
    /// `miss_bytes` from flash there.
    pub fn record_work(&self, index: usize, miss_bytes: u64) {
        if let (Some(w), LoadKind::Work) = (&self.window, self.load) {
            w.record(index, self.work_query_bytes.saturating_add(miss_bytes));
        }
    }

    /// Adds a replica in the first empty slot (or a new one, when `fixed` does not fix the
    /// slot count: a table's replica count). `resize` rebuilds the policy for a new slot
    /// count before the slot becomes visible. Returns its index.
    pub fn add_replica(
        &self,
        name: &str,
        address: &str,
        fixed: Option<usize>,
        resize: impl FnOnce(usize) -> Result<(), balancer::policy::PolicyError>,
    ) -> Result<usize, MembershipError> {
        let rep = Replica::new(name, address, Arc::clone(&self.clock))?;
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.members.load();
        if cur.find(name).is_some() {
            return Err(MembershipError::Exists(name.to_owned()));
        }
        let mut slots = cur.slots.clone();
        let index = match (slots.iter().position(Option::is_none), fixed) {
            (Some(i), _) => i,
            (None, Some(r)) => return Err(MembershipError::NoSlot(r)),
            (None, None) if slots.len() >= MAX_REPLICAS => return Err(MembershipError::TooMany),
            (None, None) => {
                slots.push(None);
                resize(slots.len())?;
                slots.len() - 1
            }
        };
        slots[index] = Some(Arc::new(rep));
        self.latency.reset(index);
        self.members.store(Arc::new(Members { slots }));
        Ok(index)
    }

    /// Removes a replica; its slot stays empty so the other indices keep their meaning.
    pub fn remove_replica(&self, name: &str) -> Result<Arc<Replica>, MembershipError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
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
