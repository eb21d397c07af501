//! The discrete-event loop, monomorphized over the cache type like the trace replay.
//!
//! A query arrives (open loop: from the arrival process; closed loop: when its client's
//! previous query is answered), is routed at once, and becomes one task per shard (or per
//! chunk of a pool). A task is admitted by its server unless `max_inflight` tasks are
//! there already (then it is shed: HTTP 503, no retry, as the balancer relays it), waits
//! for a worker, then is served:
//!
//! - [`Service::Flash`](crate::queueing::Service::Flash) (the replica): its terms are looked up one after another in the
//!   server's cache, as `replica/src/query.rs` fetches them; a hit costs nothing, a miss on
//!   a term another request is reading waits for that read, any other miss issues a flash
//!   read ([`Bucket`](super::server::Bucket)) and the task resumes when it completes (the
//!   list enters the cache then, as the replica inserts it after the read). Then the
//!   query's CPU part (`cpu_us`, on a core if cores are limited).
//! - the other models: one draw from the distribution.
//!
//! The query is answered when its last task ends. The balancer's loads follow
//! `balancer-server`: requests in flight from dispatch to answer; `window` records 1 at
//! dispatch; `work` records `work_query_bytes` + the query's flash bytes at the answer
//! (when the replica's `x-ballot-miss-bytes` header reaches the balancer); nothing is
//! recorded for a shed query's work.
//!
//! Every event is 16 bytes in a binary heap; tasks and queries live in slabs whose slots
//! are reused, so nothing is allocated per event once the slabs have grown.
//!
//! With late binding (`slots`), the balancer holds a routed query until its replica has a
//! free slot, and a replica with a free slot and nobody waiting takes a query held
//! elsewhere for `steal_after` ([`dispatch`]).
//!
//! This file holds the state and the loop; [`serve`] one query's path, [`dispatch`] the
//! balancer's queues, [`summary`] the phase's measurements.

mod dispatch;
mod serve;
mod summary;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use balancer::load::{InFlight, LatencyStats, Window};
use balancer::policy::DEFAULT_TERM_BYTES;
use balancer::shadow::Shadow;
use data::hash::mix64;
use data::rng::Rng;

use super::config::{Arrivals, Cores, Fanout, QueueConfig, QueueError, Router};
use super::events::Events;
use super::result::PhaseResult;
use super::server::Server;
use super::service::exp;
use crate::sim::admission::Admission;
use crate::sim::Trace;
use eviction::Cache;

/// "No term": a task with no read to finish.
const NIL: u32 = u32::MAX;

/// The tag of an event that is a held query's steal timer (its query slot in the low
/// bits), not a task's.
const STEAL_TIMER: u32 = 1 << 31;

/// What the simulator reads of a term.
#[derive(Clone, Copy, Debug)]
struct TermInfo {
    hash: u64,
    bytes: u64,
}

/// One query at one server.
#[derive(Clone, Copy, Debug)]
struct Task {
    /// Slot of its query.
    query: u32,
    /// Trace index of its query.
    q: u32,
    /// Its server.
    server: u32,
    /// Next term to look up.
    cursor: u16,
    /// In its final stage (CPU, or a drawn service time).
    last_stage: bool,
    /// Holds a core.
    on_core: bool,
    /// The term whose read completes at the pending event (then cached), or [`NIL`].
    pending: u32,
    /// Flash bytes it read.
    miss: u64,
    /// When it got a worker.
    started: f64,
}

/// One query in flight.
#[derive(Clone, Copy, Debug)]
struct Query {
    arrival: f64,
    /// Its trace index.
    q: u32,
    /// Late binding: when the balancer started holding it, or negative when it is not
    /// held (sent, or never held).
    held_since: f64,
    /// Late binding: the replicas it may move to (bit mask).
    alternatives: u64,
    client: u32,
    /// Tasks not yet ended.
    remaining: u16,
    /// Policy routing: the replica index.
    index: u16,
    /// Policy routing: the balancer (load view) that routed it.
    balancer: u16,
    /// Some shard refused it.
    failed: bool,
    /// Counted in the phase's per-query figures.
    counted: bool,
    /// Flash bytes its tasks read.
    miss: u64,
    /// The longest time one of its tasks held a worker (its replica's service time), s.
    service: f64,
    /// Searches in flight at the replica its last task left (the backlog it reports).
    backlog: u32,
}

/// Cores shared by the CPU parts.
#[derive(Debug, Default)]
struct CpuPool {
    cores: u32,
    busy: u32,
    waiting: VecDeque<u32>,
}

/// The current phase's state and counters.
#[derive(Debug, Default)]
struct Phase {
    next: usize,
    end: usize,
    /// First query counted in the per-query figures.
    count_from: usize,
    /// Queries sent, counted or not.
    all_sent: u64,
    closed: bool,
    ready: Vec<u32>,
    latencies: Vec<f64>,
    sent: u64,
    ok: u64,
    failed: u64,
    decisions: u64,
    overflow: u64,
    /// Counted queries sent to another replica than the one routed to, after waiting.
    stolen: u64,
    start: f64,
    /// Last answer of any query.
    end_time: f64,
    /// Last answer of a counted query.
    last_done: f64,
    first_arrival: f64,
    last_arrival: f64,
    events: u64,
}

/// The simulator's whole state; it persists across phases (caches, loads, clock).
pub(crate) struct Engine<'a, C> {
    trace: Option<&'a Trace>,
    /// Per term id: its hash (what the policy sees) and its bytes at one server (the
    /// trace's, divided among the tasks of a query, since each shard holds `1/S` of every
    /// list; rounded up). Side by side, so routing a query brings the line its lookups
    /// read into the CPU cache.
    terms: Vec<TermInfo>,
    router: Router<'a>,
    cfg: QueueConfig,
    /// The admission rule, where it applies to these caches.
    admission: Option<Arc<Admission>>,
    replicas: usize,
    fanout: usize,
    pool: bool,
    servers: Vec<Server<C>>,
    /// The balancers' load views: one, one per balancer process
    /// ([`BalancerModel::count`](super::config::BalancerModel::count)), or one per shard
    /// with [`Router::PerShard`].
    windows: Vec<Window>,
    /// See `windows`.
    in_flights: Vec<InFlight>,
    /// Late binding (`slots > 0`): per balancer and replica, the query slots held for
    /// that replica, oldest first.
    held: Vec<Vec<VecDeque<u32>>>,
    /// Late binding: per balancer and replica, its queries sent and not yet answered.
    sent: Vec<Vec<u32>>,
    /// Policy routing: every balancer's requests in flight, what the replicas' backlog
    /// reports tell ([`BalancerModel::reports`](super::config::BalancerModel::reports)).
    in_flight_all: InFlight,
    /// Policy routing: each replica's answer speed, as the balancer measures it (for
    /// `ars` and `prequal`).
    latency: LatencyStats,
    /// Policy routing by `cache-aware`: the balancer's shadow caches, fed as it feeds them.
    shadow: Option<Shadow>,
    events: Events,
    tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    queries: Vec<Query>,
    free_queries: Vec<u32>,
    cpu: Vec<CpuPool>,
    cpu_secs: f64,
    now: f64,
    route_rng: Rng,
    arrival_rng: Rng,
    service_rng: Rng,
    ph: Phase,
}

impl<'a, C: Cache> Engine<'a, C> {
    /// A cold cluster at time 0. `cfg` has been validated for `router`.
    pub(crate) fn new(
        trace: Option<&'a Trace>,
        router: Router<'a>,
        cfg: QueueConfig,
        make: fn(u64) -> C,
    ) -> Self {
        let n = cfg.servers();
        let fanout = cfg.fanout.tasks();
        let terms = trace.map_or_else(Vec::new, |t| {
            t.term_hashes
                .iter()
                .zip(&t.term_bytes)
                .map(|(&hash, &b)| TermInfo {
                    hash,
                    bytes: b.div_ceil(fanout as u64),
                })
                .collect()
        });
        let servers = (0..n)
            .map(|_| Server::new(make(cfg.capacity_bytes), &cfg.replica))
            .collect();
        let cpu = match cfg.cores {
            Cores::Unlimited => Vec::new(),
            Cores::PerReplica(c) => (0..n)
                .map(|_| CpuPool {
                    cores: c as u32,
                    ..CpuPool::default()
                })
                .collect(),
            Cores::Shared(c) => vec![CpuPool {
                cores: c as u32,
                ..CpuPool::default()
            }],
        };
        let seed = cfg.seed;
        let views = match router {
            Router::PerShard(_) => fanout,
            Router::Policy(_) => cfg.balancer.count,
            Router::PowerOfD { .. } => 1,
        };
        let admission = cfg
            .admission
            .clone()
            .filter(|a| a.applies(cfg.capacity_bytes));
        let shadow = match router {
            Router::Policy(p) if p.reads_shadow() => Some(Shadow::from_terms(
                terms.iter().map(|t| (t.hash, t.bytes)),
                DEFAULT_TERM_BYTES,
                cfg.capacity_bytes,
                cfg.eviction,
            )),
            _ => None,
        };
        Engine {
            trace,
            terms,
            router,
            admission,
            replicas: cfg.replicas,
            fanout,
            pool: matches!(cfg.fanout, Fanout::Pool { .. }),
            servers,
            windows: (0..views)
                .map(|_| Window::new(cfg.replicas, cfg.balancer.window))
                .collect(),
            in_flights: (0..views).map(|_| InFlight::new(cfg.replicas)).collect(),
            held: (0..views)
                .map(|_| vec![VecDeque::new(); cfg.replicas])
                .collect(),
            sent: (0..views).map(|_| vec![0; cfg.replicas]).collect(),
            in_flight_all: InFlight::new(cfg.replicas),
            latency: LatencyStats::default(),
            shadow,
            events: Events::default(),
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            queries: Vec::new(),
            free_queries: Vec::new(),
            cpu,
            cpu_secs: cfg.replica.cpu_us * 1e-6,
            now: 0.0,
            route_rng: Rng::new(seed),
            arrival_rng: Rng::new(mix64(seed ^ 0xa441_5a1e)),
            service_rng: Rng::new(mix64(seed ^ 0x5e7f_1ce5)),
            ph: Phase::default(),
            cfg,
        }
    }

    /// Whether server `server` caches `term`'s list after reading it: where the admission
    /// rule lets its replica index cache it.
    #[inline]
    fn admits(&self, server: usize, term: u32) -> bool {
        self.admission
            .as_ref()
            .is_none_or(|a| a.caches(term, (server % self.replicas) as u16))
    }

    /// The simulated clock.
    pub(crate) fn now(&self) -> f64 {
        self.now
    }

    /// Runs queries `range` (trace indices; any range without a trace) arriving as
    /// `arrivals`, until the last is answered; per-query figures count the queries from
    /// `count_from` on.
    pub(crate) fn run(
        &mut self,
        range: Range<usize>,
        count_from: usize,
        arrivals: &Arrivals,
    ) -> Result<PhaseResult, QueueError> {
        if !(range.start..=range.end).contains(&count_from) {
            return Err(QueueError::Param {
                name: "measure_from",
                value: count_from.to_string(),
                rule: "within the phase's queries",
            });
        }
        if let Some(t) = self.trace {
            if range.start > range.end || range.end > t.len() {
                return Err(QueueError::Range {
                    start: range.start,
                    end: range.end,
                    len: t.len(),
                });
            }
        }
        arrivals.validate(range.len())?;
        let wall = Instant::now();
        let start = self.now;
        for s in &mut self.servers {
            s.reset_stats(start);
        }
        let n = range.len();
        self.ph = Phase {
            next: range.start,
            end: range.end,
            count_from,
            start,
            end_time: start,
            last_done: start,
            first_arrival: start,
            latencies: std::mem::take(&mut self.ph.latencies),
            ready: std::mem::take(&mut self.ph.ready),
            ..Phase::default()
        };
        self.ph.latencies.clear();
        self.ph.latencies.reserve(n);
        self.ph.ready.clear();
        match arrivals {
            Arrivals::Instant => {
                for q in range {
                    self.instant(q);
                }
            }
            Arrivals::Closed { clients } => {
                self.ph.closed = true;
                // Client 0 sends first.
                self.ph.ready.extend((0..(*clients).min(n) as u32).rev());
                self.event_loop(arrivals);
            }
            _ => self.event_loop(arrivals),
        }
        Ok(self.result(arrivals, wall))
    }

    /// Arrival `i` of an open-loop phase, after arrival `i - 1` at `prev`.
    fn arrival_time(&mut self, arrivals: &Arrivals, i: usize, prev: f64) -> f64 {
        let start = self.ph.start;
        match arrivals {
            Arrivals::Fixed { rate } => start + i as f64 / rate,
            Arrivals::Poisson { rate } => {
                if i == 0 {
                    start
                } else {
                    prev + exp(&mut self.arrival_rng, 1.0 / rate)
                }
            }
            Arrivals::Schedule(t) => start + t[i],
            Arrivals::Instant | Arrivals::Closed { .. } => f64::INFINITY,
        }
    }

    fn event_loop(&mut self, arrivals: &Arrivals) {
        let open = !matches!(arrivals, Arrivals::Closed { .. });
        let mut i = 0usize;
        let mut next_arrival = self.arrival_time(arrivals, 0, self.ph.start);
        loop {
            while let Some(client) = self.ph.ready.pop() {
                if self.ph.next < self.ph.end {
                    let q = self.ph.next;
                    self.ph.next += 1;
                    self.arrive(q, client);
                }
            }
            if open
                && self.ph.next < self.ph.end
                && self.events.peek_time().is_none_or(|t| next_arrival < t)
            {
                self.now = next_arrival;
                let q = self.ph.next;
                self.ph.next += 1;
                self.arrive(q, 0);
                i += 1;
                if self.ph.next < self.ph.end {
                    next_arrival = self.arrival_time(arrivals, i, next_arrival);
                }
                continue;
            }
            let Some((t, task)) = self.events.pop() else {
                break;
            };
            self.now = t;
            self.ph.events += 1;
            if task & STEAL_TIMER != 0 {
                self.steal_timer(task & !STEAL_TIMER);
            } else {
                self.step(task);
            }
        }
    }

    fn alloc_task(&mut self, t: Task) -> u32 {
        match self.free_tasks.pop() {
            Some(i) => {
                self.tasks[i as usize] = t;
                i
            }
            None => {
                assert!(
                    self.tasks.len() < STEAL_TIMER as usize,
                    "2^31 tasks at once"
                );
                self.tasks.push(t);
                (self.tasks.len() - 1) as u32
            }
        }
    }

    fn alloc_query(&mut self, q: Query) -> u32 {
        match self.free_queries.pop() {
            Some(i) => {
                self.queries[i as usize] = q;
                i
            }
            None => {
                assert!(
                    self.queries.len() < STEAL_TIMER as usize,
                    "2^31 queries at once"
                );
                self.queries.push(q);
                (self.queries.len() - 1) as u32
            }
        }
    }
}
