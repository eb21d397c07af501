//! The queueing simulator: predicts throughput and tail latency offline, with time, where
//! the trace replay ([`crate::sim`]) only counts cache hits.
//!
//! A discrete-event simulation of the deployed system, reusing its code as it is: queries
//! are routed at their arrival time by a `balancer` [`RoutingPolicy`] over the balancer's
//! load views ([`balancer::load::Window`] for `window` and `work`, [`InFlight`] for
//! `in-flight`, with the server's stall guard), and served by replicas modelled on the
//! `replica` binary: the same eviction code ([`eviction`]) behind single-flight
//! misses, the flash emulation's token bucket and latency, a per-query CPU part, the
//! admission limit (`--max-inflight`, beyond it HTTP 503) and the worker pool. Service
//! times can also be drawn from exponential, shifted-exponential or Weibull laws, for the
//! theory checks (M/M/1, M/G/1, the supermarket model of power of d choices, and the
//! split-and-replicate system of Ghosh and Ramchandran, "Faster data-access in large-scale
//! systems: network-scale latency analysis under general service-time distributions",
//! 2018). A query may fan out to S shards × R replicas and complete with its slowest
//! shard; each shard's replica is picked by one vote for all shards (the policy's index)
//! or by power of d choices per shard ([`Router::PowerOfD`]), or by each shard's own policy
//! over that shard's own loads ([`Router::PerShard`]).
//!
//! - [`config`]: what is simulated ([`QueueConfig`], [`Router`], [`Arrivals`]).
//! - [`Simulator`]: a cluster whose state (caches, loads, clock) persists across phases,
//!   so `ballot demo`'s warm-up, closed-loop and open-loop phases run back to back on the
//!   same query sequence; [`simulate`] is warm-up on the train part, then the test part.
//! - [`result`]: what a phase measured ([`PhaseResult`]).
//! - [`sweep`]: latency against offered load.
//! - [`theory`]: the large-system predictions the theory tests compare with.
//!
//! Seeds are injected ([`QueueConfig::seed`]): a run is deterministic. The event loop is
//! monomorphized over the cache type and allocates nothing per event.
//!
//! [`RoutingPolicy`]: balancer::policy::RoutingPolicy
//! [`InFlight`]: balancer::load::InFlight

pub mod config;
mod engine;
mod events;
pub mod result;
mod server;
mod service;
pub mod sweep;
pub mod theory;

use std::ops::Range;

use balancer::policy::RoutingPolicy;
use serde::Serialize;

pub use config::{
    Arrivals, BalancerModel, Cores, Fanout, QueueConfig, QueueError, ReplicaModel, Router, Service,
};
pub use result::{LatencyMs, PhaseResult};
pub use sweep::{latency_sweep, SweepPoint};

use crate::sim::Trace;
use engine::Engine;
use eviction::{with_cache_type, Cache, CacheVisitor};

/// A phase runner with its cache type erased (one virtual call per phase).
trait Phases {
    fn run(
        &mut self,
        range: Range<usize>,
        count_from: usize,
        arrivals: &Arrivals,
    ) -> Result<PhaseResult, QueueError>;
    fn now(&self) -> f64;
}

impl<C: Cache> Phases for Engine<'_, C> {
    fn run(
        &mut self,
        range: Range<usize>,
        count_from: usize,
        arrivals: &Arrivals,
    ) -> Result<PhaseResult, QueueError> {
        Engine::run(self, range, count_from, arrivals)
    }

    fn now(&self) -> f64 {
        Engine::now(self)
    }
}

/// A simulated cluster: cold caches at time 0, then phases run back to back, each
/// starting when the previous one's last query was answered.
pub struct Simulator<'a> {
    engine: Box<dyn Phases + 'a>,
}

impl std::fmt::Debug for Simulator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("now", &self.engine.now())
            .finish_non_exhaustive()
    }
}

impl<'a> Simulator<'a> {
    /// A cluster for `cfg` routed by `router`, serving the queries of `trace` (without a
    /// trace, queries are anonymous jobs: no terms, so no cache or flash work).
    pub fn new(
        trace: Option<&'a Trace>,
        router: Router<'a>,
        cfg: &QueueConfig,
    ) -> Result<Self, QueueError> {
        cfg.validate(&router)?;
        struct Build<'a> {
            trace: Option<&'a Trace>,
            router: Router<'a>,
            cfg: QueueConfig,
        }
        impl<'a> CacheVisitor for Build<'a> {
            type Output = Box<dyn Phases + 'a>;
            fn visit<C: Cache + 'static>(self, make: fn(u64) -> C) -> Self::Output {
                Box::new(Engine::new(self.trace, self.router, self.cfg, make))
            }
        }
        let engine = with_cache_type(
            cfg.eviction,
            Build {
                trace,
                router,
                cfg: cfg.clone(),
            },
        );
        Ok(Simulator { engine })
    }

    /// Runs queries `range` (trace indices; job numbers without a trace) arriving as
    /// `arrivals`, until the last one is answered.
    pub fn run(
        &mut self,
        range: Range<usize>,
        arrivals: &Arrivals,
    ) -> Result<PhaseResult, QueueError> {
        let from = range.start;
        self.engine.run(range, from, arrivals)
    }

    /// [`run`](Simulator::run), with the per-query figures (sent, answered, shed,
    /// latency, overflow, throughput) counting only the queries from `measure_from` on:
    /// the earlier ones bring the queues to their steady state (a phase starts with empty
    /// queues, as the previous one drained). Server figures (flash, utilisation, queues)
    /// cover the whole phase.
    pub fn run_measured(
        &mut self,
        range: Range<usize>,
        measure_from: usize,
        arrivals: &Arrivals,
    ) -> Result<PhaseResult, QueueError> {
        self.engine.run(range, measure_from, arrivals)
    }

    /// The simulated clock, seconds.
    pub fn now(&self) -> f64 {
        self.engine.now()
    }
}

/// A warm-up and a measured phase.
#[derive(Clone, Debug, Serialize)]
pub struct Simulated {
    /// The train part.
    pub warmup: PhaseResult,
    /// The test part.
    pub test: PhaseResult,
}

/// Simulates `trace` under `policy`: the train part arriving as `warmup` (not counted;
/// [`Arrivals::Instant`] replays it without time, as `ballot eval` does), then the test
/// part arriving as `test`.
pub fn simulate(
    trace: &Trace,
    policy: &dyn RoutingPolicy,
    cfg: &QueueConfig,
    warmup: &Arrivals,
    test: &Arrivals,
) -> Result<Simulated, QueueError> {
    let mut sim = Simulator::new(Some(trace), Router::Policy(policy), cfg)?;
    let warmup = sim.run(0..trace.train_len, warmup)?;
    let test = sim.run(trace.train_len..trace.len(), test)?;
    Ok(Simulated { warmup, test })
}

/// `ballot demo`'s live phases, on a trace built from its warm, closed-loop and open-loop
/// queries in that order (its train part being the warm queries).
#[derive(Clone, Debug, PartialEq)]
pub struct LivePlan {
    /// Closed-loop queries after the warm ones (`--live-saturate`); the rest of the trace
    /// is the open-loop phase.
    pub saturate: usize,
    /// Closed-loop clients (`--live-concurrency`), for the warm-up and the saturation.
    pub concurrency: usize,
    /// Open-loop rate, queries/s (the demo's: `--live-load` × the first policy's
    /// throughput at saturation).
    pub rate: f64,
}

/// What the simulator predicts for `ballot demo`'s live phases.
#[derive(Clone, Debug, Serialize)]
pub struct LivePrediction {
    /// Warm-up (closed loop, not counted).
    pub warm: PhaseResult,
    /// Closed loop: throughput at saturation.
    pub saturate: PhaseResult,
    /// Open loop at the plan's rate on its fixed schedule: latency at the offered load.
    pub steady: PhaseResult,
}

/// Runs `ballot demo`'s three live phases for one router (a policy, or one per shard):
/// warm-up and saturation closed
/// loop with `plan.concurrency` clients, then the rest open loop at `plan.rate` on a
/// fixed schedule (as `ballot replay --rate` sends).
pub fn simulate_live(
    trace: &Trace,
    router: Router<'_>,
    cfg: &QueueConfig,
    plan: &LivePlan,
) -> Result<LivePrediction, QueueError> {
    let mut sim = Simulator::new(Some(trace), router, cfg)?;
    let closed = Arrivals::Closed {
        clients: plan.concurrency,
    };
    let w = trace.train_len;
    let s = (w + plan.saturate).min(trace.len());
    Ok(LivePrediction {
        warm: sim.run(0..w, &closed)?,
        saturate: sim.run(w..s, &closed)?,
        steady: sim.run(s..trace.len(), &Arrivals::Fixed { rate: plan.rate })?,
    })
}
