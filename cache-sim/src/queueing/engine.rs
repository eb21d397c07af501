//! The discrete-event loop, monomorphized over the cache type like the trace replay.
//!
//! A query arrives (open loop: from the arrival process; closed loop: when its client's
//! previous query is answered), is routed at once, and becomes one task per shard (or per
//! chunk of a pool). A task is admitted by its server unless `max_inflight` tasks are
//! there already (then it is shed: HTTP 503, no retry, as the balancer relays it), waits
//! for a worker, then is served:
//!
//! - [`Service::Flash`] (the replica): its terms are looked up one after another in the
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

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

use balancer::load::{InFlight, LoadKind, LoadView, Window};
use balancer::policy::{QueryKey, Reason};
use data::hash::mix64;
use data::rng::Rng;
use data::tokenizer::MAX_TERMS;

use super::config::{Arrivals, Cores, Fanout, QueueConfig, QueueError, Router, Service};
use super::events::Events;
use super::result::{ratio, shares, LatencyMs, PhaseResult};
use super::server::Server;
use super::service::{draw, exp};
use super::view::SimView;
use crate::eviction::Cache;
use crate::sim::Trace;

/// "No term": a task with no read to finish.
const NIL: u32 = u32::MAX;

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
}

/// One query in flight.
#[derive(Clone, Copy, Debug)]
struct Query {
    arrival: f64,
    client: u32,
    /// Tasks not yet ended.
    remaining: u16,
    /// Policy routing: the replica index.
    index: u16,
    /// Some shard refused it.
    failed: bool,
    /// Counted in the phase's per-query figures.
    counted: bool,
    /// Flash bytes its tasks read.
    miss: u64,
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
    replicas: usize,
    fanout: usize,
    pool: bool,
    servers: Vec<Server<C>>,
    window: Window,
    in_flight: InFlight,
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
        Engine {
            trace,
            terms,
            router,
            replicas: cfg.replicas,
            fanout,
            pool: matches!(cfg.fanout, Fanout::Pool { .. }),
            servers,
            window: Window::new(cfg.replicas, cfg.balancer.window),
            in_flight: InFlight::new(cfg.replicas),
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
            self.step(task);
        }
    }

    fn alloc_task(&mut self, t: Task) -> u32 {
        match self.free_tasks.pop() {
            Some(i) => {
                self.tasks[i as usize] = t;
                i
            }
            None => {
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
                self.queries.push(q);
                (self.queries.len() - 1) as u32
            }
        }
    }

    /// The policy's replica index for query `q` now (counted in the overflow share when
    /// `counted`).
    #[inline]
    fn route_policy(
        &mut self,
        policy: &dyn balancer::RoutingPolicy,
        q: usize,
        counted: bool,
    ) -> usize {
        let mut hashes = [0u64; MAX_TERMS];
        let (query_hash, n) = match self.trace {
            Some(t) => {
                let terms = t.terms(q);
                let n = terms.len().min(MAX_TERMS);
                for (slot, &term) in hashes.iter_mut().zip(&terms[..n]) {
                    *slot = self.terms[term as usize].hash;
                }
                (t.query_hashes[q], n)
            }
            None => (mix64(q as u64), 0),
        };
        let key = QueryKey::new(query_hash, &hashes[..n]);
        let b = &self.cfg.balancer;
        let (base, stall): (&dyn LoadView, _) = match b.load {
            LoadKind::InFlight => (&self.in_flight, None),
            LoadKind::Window | LoadKind::Work => (&self.window, Some((b.stall_eps, b.stall_slack))),
        };
        let view = SimView::new(base, &self.in_flight, self.replicas, stall);
        let d = policy.route(&key, &view, &mut self.route_rng);
        if counted {
            self.ph.decisions += 1;
            self.ph.overflow += u64::from(d.reason == Reason::Overflow);
        }
        usize::from(d.replica).min(self.replicas - 1)
    }

    /// The server of task `j` of a query under power of `d` choices.
    #[inline]
    fn pick_pod(&mut self, d: usize, j: usize) -> usize {
        let (base, len) = if self.pool {
            (0, self.servers.len())
        } else {
            (j * self.replicas, self.replicas)
        };
        let mut best = base + self.route_rng.below(len as u64) as usize;
        for _ in 1..d {
            let c = base + self.route_rng.below(len as u64) as usize;
            if self.servers[c].in_flight < self.servers[best].in_flight {
                best = c;
            }
        }
        best
    }

    /// Query `q` arrives now from `client`.
    fn arrive(&mut self, q: usize, client: u32) {
        let now = self.now;
        let counted = q >= self.ph.count_from;
        self.ph.all_sent += 1;
        if counted {
            if self.ph.sent == 0 {
                self.ph.first_arrival = now;
            }
            self.ph.sent += 1;
            self.ph.last_arrival = now;
        }
        let qi = self.alloc_query(Query {
            arrival: now,
            client,
            remaining: self.fanout as u16,
            index: 0,
            failed: false,
            counted,
            miss: 0,
        });
        match self.router {
            Router::Policy(policy) => {
                let index = self.route_policy(policy, q, counted);
                self.queries[qi as usize].index = index as u16;
                self.in_flight.start(index);
                if self.cfg.balancer.load == LoadKind::Window {
                    self.window.record_mut(index, 1);
                }
                for s in 0..self.fanout {
                    self.dispatch(qi, q, s * self.replicas + index);
                }
            }
            Router::PowerOfD { d } => {
                for j in 0..self.fanout {
                    let server = self.pick_pod(d, j);
                    self.dispatch(qi, q, server);
                }
            }
        }
    }

    /// Task of query slot `qi` (trace index `q`) reaches `server`.
    fn dispatch(&mut self, qi: u32, q: usize, server: usize) {
        let now = self.now;
        let srv = &mut self.servers[server];
        if u64::from(srv.in_flight) >= self.cfg.replica.max_inflight {
            srv.stats.shed += 1;
            let query = &mut self.queries[qi as usize];
            query.failed = true;
            query.remaining -= 1;
            if query.remaining == 0 {
                self.complete_query(qi);
            }
            return;
        }
        srv.enter(now);
        let ti = self.alloc_task(Task {
            query: qi,
            q: q as u32,
            server: server as u32,
            cursor: 0,
            last_stage: false,
            on_core: false,
            pending: NIL,
            miss: 0,
        });
        let srv = &mut self.servers[server];
        if (srv.busy as usize) < self.cfg.replica.workers {
            srv.busy += 1;
            self.start(ti);
        } else {
            srv.waiting.push_back(ti);
        }
    }

    /// Task `ti` got a worker.
    #[inline]
    fn start(&mut self, ti: u32) {
        match self.cfg.service {
            Service::Flash => self.advance(ti),
            s => {
                let t = draw(&s, &mut self.service_rng);
                self.tasks[ti as usize].last_stage = true;
                self.events.push(self.now + t, ti);
            }
        }
    }

    /// Task `ti` looks its next terms up until one must wait, then starts its CPU part.
    #[inline]
    fn advance(&mut self, ti: u32) {
        let now = self.now;
        let task = &mut self.tasks[ti as usize];
        let server = task.server as usize;
        let srv = &mut self.servers[server];
        if let Some(trace) = self.trace {
            let terms = trace.terms(task.q as usize);
            let n = terms.len().min(MAX_TERMS);
            while usize::from(task.cursor) < n {
                let term = terms[usize::from(task.cursor)];
                task.cursor += 1;
                let bytes = self.terms[term as usize].bytes;
                if srv.cache.get(term) {
                    srv.stats.hit_bytes += bytes;
                    continue;
                }
                if let Some(&end) = srv.flights.get(&term) {
                    // Single flight: wait for the read in progress; it costs no flash.
                    srv.stats.hit_bytes += bytes;
                    task.pending = NIL;
                    self.events.push(end, ti);
                    return;
                }
                let end = srv.bucket.read(now, bytes);
                srv.flights.insert(term, end);
                srv.stats.miss_bytes += bytes;
                task.pending = term;
                task.miss += bytes;
                self.events.push(end, ti);
                return;
            }
        }
        task.last_stage = true;
        let at = now + self.cpu_secs;
        if self.cpu.is_empty() {
            self.events.push(at, ti);
            return;
        }
        let p = if self.cpu.len() == 1 { 0 } else { server };
        let pool = &mut self.cpu[p];
        if pool.busy < pool.cores {
            pool.busy += 1;
            task.on_core = true;
            self.events.push(at, ti);
        } else {
            pool.waiting.push_back(ti);
        }
    }

    /// Task `ti`'s pending event fires.
    #[inline]
    fn step(&mut self, ti: u32) {
        let task = self.tasks[ti as usize];
        if !task.last_stage {
            if task.pending != NIL {
                let srv = &mut self.servers[task.server as usize];
                let term = task.pending;
                srv.cache.insert(term, self.terms[term as usize].bytes);
                srv.flights.remove(&term);
                self.tasks[ti as usize].pending = NIL;
            }
            self.advance(ti);
            return;
        }
        if task.on_core {
            let server = task.server as usize;
            let p = if self.cpu.len() == 1 { 0 } else { server };
            let pool = &mut self.cpu[p];
            pool.busy -= 1;
            if let Some(next) = pool.waiting.pop_front() {
                pool.busy += 1;
                self.tasks[next as usize].on_core = true;
                self.events.push(self.now + self.cpu_secs, next);
            }
        }
        self.finish(ti);
    }

    /// Task `ti` ends: its worker takes the next waiting task.
    fn finish(&mut self, ti: u32) {
        let Task {
            query: qi,
            server,
            miss,
            ..
        } = self.tasks[ti as usize];
        self.free_tasks.push(ti);
        let srv = &mut self.servers[server as usize];
        srv.leave(self.now);
        srv.busy -= 1;
        if let Some(next) = srv.waiting.pop_front() {
            srv.busy += 1;
            self.start(next);
        }
        let query = &mut self.queries[qi as usize];
        query.miss += miss;
        query.remaining -= 1;
        if query.remaining == 0 {
            self.complete_query(qi);
        }
    }

    /// Query slot `qi` is answered (or refused) now.
    fn complete_query(&mut self, qi: u32) {
        let query = self.queries[qi as usize];
        self.free_queries.push(qi);
        self.ph.end_time = self.now;
        if query.counted {
            if query.failed {
                self.ph.failed += 1;
            } else {
                self.ph.ok += 1;
                self.ph.latencies.push(self.now - query.arrival);
            }
            self.ph.last_done = self.now;
        }
        if let Router::Policy(_) = self.router {
            let index = usize::from(query.index);
            self.in_flight.finish(index);
            if self.cfg.balancer.load == LoadKind::Work && !query.failed {
                let cost = self
                    .cfg
                    .balancer
                    .work_query_bytes
                    .saturating_add(query.miss);
                self.window.record_mut(index, cost);
            }
        }
        if self.ph.closed {
            self.ph.ready.push(query.client);
        }
    }

    /// Query `q` without time: routed, looked up in its servers' caches (inserted on a
    /// miss at once), recorded in the window, as the trace replay does.
    fn instant(&mut self, q: usize) {
        let counted = q >= self.ph.count_from;
        self.ph.all_sent += 1;
        self.ph.sent += u64::from(counted);
        self.ph.ok += u64::from(counted);
        let index = match self.router {
            Router::Policy(policy) => Some(self.route_policy(policy, q, counted)),
            Router::PowerOfD { .. } => None,
        };
        let mut miss = 0u64;
        for j in 0..self.fanout {
            let server = match self.router {
                Router::PowerOfD { d } => self.pick_pod(d, j),
                Router::Policy(_) => j * self.replicas + index.unwrap_or(0),
            };
            let srv = &mut self.servers[server];
            srv.stats.tasks += 1;
            if let (Some(trace), Service::Flash) = (self.trace, self.cfg.service) {
                let terms = trace.terms(q);
                for &term in &terms[..terms.len().min(MAX_TERMS)] {
                    let bytes = self.terms[term as usize].bytes;
                    if srv.cache.access(term, bytes) {
                        srv.stats.hit_bytes += bytes;
                    } else {
                        srv.stats.miss_bytes += bytes;
                        miss += bytes;
                    }
                }
            }
        }
        if let Some(index) = index {
            let cost = match self.cfg.balancer.load {
                LoadKind::Window => Some(1),
                LoadKind::Work => Some(self.cfg.balancer.work_query_bytes.saturating_add(miss)),
                LoadKind::InFlight => None,
            };
            if let Some(c) = cost {
                self.window.record_mut(index, c);
            }
        }
    }

    /// The phase's measurements.
    fn result(&mut self, arrivals: &Arrivals, wall: Instant) -> PhaseResult {
        let ph = &mut self.ph;
        let end = ph.end_time.max(ph.start);
        let phase_secs = end - ph.start;
        // Per-query figures span the counted queries: first sent to last answered (the
        // phase's start to its end when every query counts, as `ballot replay` times).
        let secs = (ph.last_done - ph.first_arrival).max(0.0);
        for s in &mut self.servers {
            s.close_stats(end);
        }
        let flash: Vec<u64> = self.servers.iter().map(|s| s.stats.miss_bytes).collect();
        let tasks: Vec<u64> = self.servers.iter().map(|s| s.stats.tasks).collect();
        let miss: u64 = flash.iter().sum();
        let hit: u64 = self.servers.iter().map(|s| s.stats.hit_bytes).sum();
        let flash_shares = shares(&flash);
        let queue_mean: Vec<f64> = self
            .servers
            .iter()
            .map(|s| ratio(s.stats.queue_area, phase_secs))
            .collect();
        let queue_max: Vec<u32> = self.servers.iter().map(|s| s.stats.queue_max).collect();
        let flash_utilisation = if self.servers.first().is_some_and(|s| s.bucket.limited()) {
            self.servers
                .iter()
                .map(|s| ratio(s.stats.miss_bytes as f64, s.bucket.rate() * phase_secs))
                .collect()
        } else {
            Vec::new()
        };
        let open = matches!(
            arrivals,
            Arrivals::Poisson { .. } | Arrivals::Fixed { .. } | Arrivals::Schedule(_)
        );
        let span = ph.last_arrival - ph.first_arrival;
        let wall_seconds = wall.elapsed().as_secs_f64();
        PhaseResult {
            router: self.router.name(),
            arrivals: arrivals.describe(),
            sent: ph.sent,
            ok: ph.ok,
            shed: ph.failed,
            error_share: ratio(ph.failed as f64, ph.sent as f64),
            seconds: secs,
            throughput_qps: ratio(ph.ok as f64, secs),
            offered_qps: (open && ph.sent > 1 && span > 0.0).then(|| (ph.sent - 1) as f64 / span),
            latency_ms: LatencyMs::from_seconds(&mut ph.latencies),
            overflow_share: ratio(ph.overflow as f64, ph.decisions as f64),
            miss_bytes_ratio: ratio(miss as f64, (miss + hit) as f64),
            flash_bytes_per_query: ratio(miss as f64, ph.all_sent as f64),
            flash_share_max: flash_shares.iter().copied().fold(0.0, f64::max),
            flash_shares,
            task_shares: shares(&tasks),
            utilisation: self
                .servers
                .iter()
                .map(|s| ratio(s.stats.busy_time, phase_secs))
                .collect(),
            flash_utilisation,
            queue_mean_all: ratio(queue_mean.iter().sum(), queue_mean.len() as f64),
            queue_max_all: queue_max.iter().copied().max().unwrap_or(0),
            queue_mean,
            queue_max,
            events: ph.events,
            wall_seconds,
            sim_queries_per_sec: ratio(ph.all_sent as f64, wall_seconds),
        }
    }
}
