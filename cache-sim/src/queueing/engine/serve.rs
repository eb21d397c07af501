//! The engine's handling of one query: routing at arrival (a policy over the balancer's
//! view, or power of d choices per shard), admission, the worker pool, the replica's
//! lookups and flash reads, the CPU part, and the answer (the balancer's loads updated as
//! `balancer-server` updates them). Also the zero-time path that replays a query as the
//! trace simulator does.

use balancer::load::{first_n_bits, Guarded, LoadKind, LoadView, Signaled, Signals, Stall};
use balancer::policy::QueryKey;
use balancer::shadow::{FixedOwners, Owner, Owners};
use data::hash::mix64;
use data::tokenizer::MAX_TERMS;

use eviction::Cache;

use super::{Engine, Query, Task, NIL};
use crate::queueing::config::{Router, Service};
use crate::queueing::service::draw;

impl<C: Cache> Engine<'_, C> {
    /// The policy's replica index for query `q` now over load view `v` (counted in the
    /// overflow share when `counted`), and the replicas late binding may move it to
    /// ([`balancer::RoutingPolicy::alternatives`]; 0 without late binding).
    #[inline]
    pub(super) fn route_policy(
        &mut self,
        policy: &dyn balancer::RoutingPolicy,
        q: usize,
        counted: bool,
        v: usize,
    ) -> (usize, u64) {
        let (hashes, n) = self.term_hashes(q);
        let query_hash = self.trace.map_or(mix64(q as u64), |t| t.query_hashes[q]);
        let key = QueryKey::new(query_hash, &hashes[..n]);
        let b = &self.cfg.balancer;
        let in_flight = match self.router {
            Router::Policy(_) if self.cfg.balancer.reports => &self.in_flight_all,
            _ => &self.in_flights[v],
        };
        let (base, stall): (&dyn LoadView, _) = match b.load {
            LoadKind::InFlight => (in_flight, None),
            LoadKind::Window | LoadKind::Work => (
                &self.windows[v],
                Some(Stall {
                    eps: b.stall_eps,
                    slack: b.stall_slack,
                }),
            ),
        };
        // Every replica of the simulated cluster is live and none is in slow start.
        let live = first_n_bits(self.replicas);
        let view = Guarded::new(base, in_flight, self.replicas, live, stall);
        // A replica of the simulated cluster never restarts: its slot is its owner.
        let signals = Signals {
            latency: Some(&self.latency),
            shadow: self
                .shadow
                .as_ref()
                .map(|s| (s, &FixedOwners as &dyn Owners)),
        };
        let d = policy
            .route(&key, &Signaled::new(&view, signals), &mut self.route_rng)
            .expect("every simulated replica is live");
        if counted {
            self.ph.decisions += 1;
            self.ph.overflow += u64::from(d.reason.is_overflow());
        }
        let alternatives = match self.cfg.balancer.steal_after {
            Some(_) => policy.alternatives(&key, self.cfg.balancer.steal_share),
            None => 0,
        };
        (usize::from(d.replica).min(self.replicas - 1), alternatives)
    }

    /// Feeds query `q` sent to replica `r` to the shadow caches (if a policy reads them),
    /// as the balancer feeds them when it sends, under the replica's admission rule.
    pub(super) fn feed_shadow(&self, q: usize, r: usize) {
        let (Some(shadow), Some(trace)) = (&self.shadow, self.trace) else {
            return;
        };
        let (hashes, n) = self.term_hashes(q);
        let (hashes, terms) = (&hashes[..n], &trace.terms(q)[..n]);
        let admits = |h: u64| {
            hashes
                .iter()
                .position(|&x| x == h)
                .is_none_or(|i| self.admits(r, terms[i]))
        };
        shadow.access(r, Owner { id: r, since: 0 }, hashes, admits);
    }

    /// The hashes of query `q`'s first [`MAX_TERMS`] terms (what the policy and the shadow
    /// caches see), and how many there are (0 without a trace).
    #[inline]
    fn term_hashes(&self, q: usize) -> ([u64; MAX_TERMS], usize) {
        let mut hashes = [0u64; MAX_TERMS];
        let Some(t) = self.trace else {
            return (hashes, 0);
        };
        let terms = t.terms(q);
        let n = terms.len().min(MAX_TERMS);
        for (slot, &term) in hashes.iter_mut().zip(&terms[..n]) {
            *slot = self.terms[term as usize].hash;
        }
        (hashes, n)
    }

    /// What a query (or a shard's part) that read `miss` flash bytes adds to its replica's
    /// window: 1 (`window`), its work (`work`), nothing (`in-flight`).
    fn load_cost(&self, miss: u64) -> Option<u64> {
        match self.cfg.balancer.load {
            LoadKind::Window => Some(1),
            LoadKind::Work => Some(self.cfg.balancer.work_query_bytes.saturating_add(miss)),
            LoadKind::InFlight => None,
        }
    }

    /// The server of task `j` of a query under power of `d` choices.
    #[inline]
    pub(super) fn pick_pod(&mut self, d: usize, j: usize) -> usize {
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
    pub(super) fn arrive(&mut self, q: usize, client: u32) {
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
            q: q as u32,
            held_since: -1.0,
            alternatives: 0,
            client,
            remaining: self.fanout as u16,
            index: 0,
            balancer: 0,
            failed: false,
            counted,
            miss: 0,
            service: 0.0,
            backlog: 0,
        });
        match self.router {
            Router::Policy(policy) => {
                // The balancer its client (closed loop) or the query (open loop) goes to.
                let spread = if self.ph.closed { client as usize } else { q };
                let b = spread % self.windows.len();
                let (index, alternatives) = self.route_policy(policy, q, counted, b);
                let query = &mut self.queries[qi as usize];
                (query.index, query.balancer) = (index as u16, b as u16);
                query.alternatives = alternatives;
                self.in_flights[b].start(index);
                self.in_flight_all.start(index);
                if self.cfg.balancer.load == LoadKind::Window {
                    self.windows[b].record_mut(index, 1);
                }
                self.send_or_hold(qi, b, index);
            }
            Router::PerShard(policies) => {
                for (s, &policy) in policies.iter().enumerate() {
                    let (index, _) = self.route_policy(policy, q, counted, s);
                    self.in_flights[s].start(index);
                    if self.cfg.balancer.load == LoadKind::Window {
                        self.windows[s].record_mut(index, 1);
                    }
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
    pub(super) fn dispatch(&mut self, qi: u32, q: usize, server: usize) {
        let now = self.now;
        let srv = &mut self.servers[server];
        if u64::from(srv.in_flight) >= self.cfg.replica.max_inflight {
            srv.stats.shed += 1;
            if let Router::PerShard(_) = self.router {
                // The shard's request ends with the replica's 503.
                self.in_flights[server / self.replicas].finish(server % self.replicas);
            }
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
            started: 0.0,
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
    pub(super) fn start(&mut self, ti: u32) {
        self.tasks[ti as usize].started = self.now;
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
    pub(super) fn advance(&mut self, ti: u32) {
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
    pub(super) fn step(&mut self, ti: u32) {
        let task = self.tasks[ti as usize];
        if !task.last_stage {
            if task.pending != NIL {
                let term = task.pending;
                let admitted = self.admits(task.server as usize, term);
                let srv = &mut self.servers[task.server as usize];
                if admitted {
                    srv.cache.insert(term, self.terms[term as usize].bytes);
                }
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
    pub(super) fn finish(&mut self, ti: u32) {
        let Task {
            query: qi,
            server,
            miss,
            started,
            ..
        } = self.tasks[ti as usize];
        self.free_tasks.push(ti);
        let srv = &mut self.servers[server as usize];
        srv.leave(self.now);
        let backlog = srv.in_flight;
        srv.busy -= 1;
        if let Some(next) = srv.waiting.pop_front() {
            srv.busy += 1;
            self.start(next);
        }
        if let Router::PerShard(_) = self.router {
            // Each shard's proxy counts its own request, until its replica answers.
            let (shard, index) = (
                server as usize / self.replicas,
                server as usize % self.replicas,
            );
            self.in_flights[shard].finish(index);
            if self.cfg.balancer.load == LoadKind::Work {
                let cost = self.cfg.balancer.work_query_bytes.saturating_add(miss);
                self.windows[shard].record_mut(index, cost);
            }
        }
        let query = &mut self.queries[qi as usize];
        query.miss += miss;
        query.service = query.service.max(self.now - started);
        query.backlog = backlog;
        query.remaining -= 1;
        if query.remaining == 0 {
            self.complete_query(qi);
        }
    }

    /// Query slot `qi` is answered (or refused) now.
    pub(super) fn complete_query(&mut self, qi: u32) {
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
            let (index, b) = (usize::from(query.index), usize::from(query.balancer));
            self.in_flights[b].finish(index);
            self.in_flight_all.finish(index);
            if !query.failed {
                // What the balancer's latency hook records of the answer.
                self.latency.record(
                    index,
                    (self.now - query.arrival) * 1e3,
                    Some(query.service * 1e3),
                    Some(f64::from(query.backlog)),
                );
            }
            if self.cfg.balancer.load == LoadKind::Work && !query.failed {
                let cost = self
                    .cfg
                    .balancer
                    .work_query_bytes
                    .saturating_add(query.miss);
                self.windows[b].record_mut(index, cost);
            }
            self.release(b, index);
        }
        if self.ph.closed {
            self.ph.ready.push(query.client);
        }
    }

    /// Query `q` without time: routed, looked up in its servers' caches (inserted on a
    /// miss at once), recorded in the window, as the trace replay does.
    pub(super) fn instant(&mut self, q: usize) {
        let counted = q >= self.ph.count_from;
        self.ph.all_sent += 1;
        self.ph.sent += u64::from(counted);
        self.ph.ok += u64::from(counted);
        let b = q % self.windows.len();
        let index = match self.router {
            Router::Policy(policy) => {
                let (index, _) = self.route_policy(policy, q, counted, b);
                self.feed_shadow(q, index);
                Some(index)
            }
            Router::PerShard(_) | Router::PowerOfD { .. } => None,
        };
        let mut miss = 0u64;
        for j in 0..self.fanout {
            let (server, view) = match self.router {
                Router::PowerOfD { d } => (self.pick_pod(d, j), None),
                Router::Policy(_) => (j * self.replicas + index.unwrap_or(0), None),
                Router::PerShard(policies) => {
                    let (i, _) = self.route_policy(policies[j], q, counted, j);
                    (j * self.replicas + i, Some((j, i)))
                }
            };
            let replica = (server % self.replicas) as u16;
            let admission = self.admission.as_deref();
            let srv = &mut self.servers[server];
            srv.stats.tasks += 1;
            let mut task_miss = 0u64;
            if let (Some(trace), Service::Flash) = (self.trace, self.cfg.service) {
                let terms = trace.terms(q);
                for &term in &terms[..terms.len().min(MAX_TERMS)] {
                    let bytes = self.terms[term as usize].bytes;
                    let hit = if admission.is_some_and(|a| !a.caches(term, replica)) {
                        srv.cache.get(term)
                    } else {
                        srv.cache.access(term, bytes)
                    };
                    if hit {
                        srv.stats.hit_bytes += bytes;
                    } else {
                        srv.stats.miss_bytes += bytes;
                        task_miss += bytes;
                    }
                }
            }
            miss += task_miss;
            if let Some((shard, i)) = view {
                if let Some(c) = self.load_cost(task_miss) {
                    self.windows[shard].record_mut(i, c);
                }
            }
        }
        if let Some(index) = index {
            if let Some(c) = self.load_cost(miss) {
                self.windows[b].record_mut(index, c);
            }
        }
    }
}
