//! Replays a [`Trace`] through one routing policy into R simulated caches.
//!
//! For each query, in order: the policy picks a replica from the query's term hashes and
//! the trailing-window load ([`balancer::load::Window`], the one the HTTP balancer bounds);
//! each of the query's terms is looked up in that replica's cache and inserted on a miss
//! (its postings bytes are then read from "flash"); the window then records the query at
//! its replica, as 1 ([`SimLoad::Queries`]) or as its work ([`SimLoad::Work`]: the flash
//! bytes it missed there plus a fixed per-query cost).
//! The train part warms the caches; only the test part is counted (DESIGN.md, standard
//! evaluation). An [`Observer`] sees every routing decision and lookup, which is how the
//! learner watches where each term's postings were fetched.

use std::sync::Arc;
use std::time::Instant;

use balancer::load::{first_n_bits, LoadView, Signaled, Signals};
use balancer::policy::{Decision, QueryKey, RoutingPolicy, DEFAULT_TERM_BYTES};
use balancer::shadow::{FixedOwners, Owner, Owners, Shadow};
use data::rng::Rng;
use data::tokenizer::MAX_TERMS;
use serde::Serialize;

use super::admission::Admission;
use super::trace::Trace;
use balancer::load::Window;
use eviction::{with_cache_type, Cache, CacheVisitor, EvictionKind};

/// Queries per load window in the standard evaluation.
pub const DEFAULT_WINDOW: usize = 10_000;

/// What the trace simulator's load window counts (the requests-in-flight load needs time:
/// the queueing simulator has it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimLoad {
    /// One per query (`load = "window"`).
    #[default]
    Queries,
    /// Each query's work at its replica (`load = "work"`): the flash bytes it missed there
    /// plus `query_bytes`, the fixed per-query cost in flash-byte units.
    Work {
        /// The fixed per-query cost.
        query_bytes: u64,
    },
}

impl SimLoad {
    /// The load kind of the HTTP balancer's config that this matches.
    pub fn kind(self) -> balancer::LoadKind {
        match self {
            SimLoad::Queries => balancer::LoadKind::Window,
            SimLoad::Work { .. } => balancer::LoadKind::Work,
        }
    }

    /// The window cost of a query that missed `missed` bytes.
    #[inline]
    pub fn cost(self, missed: u64) -> u64 {
        match self {
            SimLoad::Queries => 1,
            SimLoad::Work { query_bytes } => query_bytes.saturating_add(missed),
        }
    }
}

/// One simulation's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Number of replicas R.
    pub replicas: usize,
    /// Cache capacity of each replica in bytes.
    pub capacity_bytes: u64,
    /// Eviction policy of every replica cache.
    pub eviction: EvictionKind,
    /// Trailing window (queries) for the load view and for `imbalance_p99_window`.
    pub window: usize,
    /// Seed of the routing RNG (random choices and overflow jumps).
    pub seed: u64,
    /// What the load window counts.
    pub load: SimLoad,
    /// Which replicas cache which lists (`None`: every replica caches every list it reads).
    pub admission: Option<Arc<Admission>>,
}

/// What one replay measured over the test part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimResult {
    /// Bytes read from flash / bytes of postings requested.
    pub miss_bytes_ratio: f64,
    /// Term lookups that missed / term lookups.
    pub miss_ratio: f64,
    /// Flash bytes per test query.
    pub flash_bytes_per_query: f64,
    /// Max / mean queries per replica over the test part.
    pub imbalance: f64,
    /// 99th percentile (nearest rank) over consecutive whole `window`-query test windows of
    /// max / mean queries per replica (the whole test part if it is shorter than a window).
    pub imbalance_p99_window: f64,
    /// Share of test queries per replica.
    pub replica_query_share: Vec<f64>,
    /// Share of test flash bytes per replica.
    pub flash_shares: Vec<f64>,
    /// The busiest replica's share of the test flash bytes: with flash the bottleneck,
    /// throughput follows the busiest replica (1/R is perfect balance).
    pub flash_share_max: f64,
    /// Test queries counted.
    pub queries: u64,
    /// Test term lookups counted.
    pub lookups: u64,
    /// Bytes requested over the test part.
    pub requested_bytes: u64,
    /// Bytes read from flash over the test part.
    pub miss_bytes: u64,
    /// Test queries routed by overflow (first choice over its load bound).
    pub overflow_share: f64,
    /// Test queries whose normalized form never occurs in the train part.
    pub novel_queries: u64,
    /// Miss bytes ratio over those novel test queries only.
    pub novel_miss_bytes_ratio: f64,
    /// All term lookups replayed (train and test), for throughput.
    pub total_lookups: u64,
    /// Wall time of the replay in seconds (single thread).
    pub seconds: f64,
}

impl SimResult {
    /// Term lookups per second of this replay (single thread).
    pub fn lookups_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.total_lookups as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Watches a replay. Every method has an empty default; the replay is monomorphized over
/// the observer, so [`NoObserver`] costs nothing.
pub trait Observer {
    /// Query `query` was routed; `counted` is true in the test part.
    #[inline]
    fn on_route(&mut self, _query: usize, _counted: bool, _decision: Decision) {}
    /// Term `term` of query `query` was looked up on `replica`.
    #[inline]
    fn on_lookup(&mut self, _query: usize, _counted: bool, _replica: u16, _term: u32, _hit: bool) {}
}

/// The observer that observes nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// Replays `trace` through `policy` with fresh caches; see the module docs.
pub fn replay<O: Observer>(
    trace: &Trace,
    policy: &dyn RoutingPolicy,
    cfg: &SimConfig,
    observer: &mut O,
) -> SimResult {
    let every = first_n_bits(cfg.replicas);
    replay_live(trace, policy, cfg, &|_| every, observer)
}

/// [`replay`] with replicas joining and leaving: query `q` may go only to the replicas
/// whose bits `live(q)` sets (a replica that is not live yet gets nothing; its cache starts
/// cold when it joins).
pub fn replay_live<O: Observer>(
    trace: &Trace,
    policy: &dyn RoutingPolicy,
    cfg: &SimConfig,
    live: &dyn Fn(usize) -> u64,
    observer: &mut O,
) -> SimResult {
    struct Run<'a, O> {
        trace: &'a Trace,
        policy: &'a dyn RoutingPolicy,
        cfg: &'a SimConfig,
        live: &'a dyn Fn(usize) -> u64,
        observer: &'a mut O,
    }
    impl<O: Observer> CacheVisitor for Run<'_, O> {
        type Output = SimResult;
        fn visit<C: Cache + 'static>(self, make: fn(u64) -> C) -> SimResult {
            let mut caches: Vec<C> = (0..self.cfg.replicas)
                .map(|_| make(self.cfg.capacity_bytes))
                .collect();
            replay_into(
                self.trace,
                self.policy,
                self.cfg,
                &mut caches,
                self.live,
                self.observer,
            )
        }
    }
    with_cache_type(
        cfg.eviction,
        Run {
            trace,
            policy,
            cfg,
            live,
            observer,
        },
    )
}

/// Replays into caller-provided caches (already warm, for example), one per replica, query
/// `q` over the replicas `live(q)` sets.
pub fn replay_into<C: Cache, O: Observer>(
    trace: &Trace,
    policy: &dyn RoutingPolicy,
    cfg: &SimConfig,
    caches: &mut [C],
    live: &dyn Fn(usize) -> u64,
    observer: &mut O,
) -> SimResult {
    let start = Instant::now();
    let r = cfg.replicas;
    assert_eq!(caches.len(), r, "one cache per replica");
    let mut load = Window::new(r, cfg.window);
    let mut rng = Rng::new(cfg.seed);
    // A policy that reads the shadow caches (`cache-aware`, `table` with evidence) reads
    // the balancer's code, fed as the balancer feeds it, under the caches' admission rule.
    let shadow = policy.reads_shadow().then(|| {
        let terms = trace
            .term_hashes
            .iter()
            .copied()
            .zip(trace.term_bytes.iter().copied());
        Shadow::from_terms(terms, DEFAULT_TERM_BYTES, cfg.capacity_bytes, cfg.eviction)
    });
    let mut hashes = [0u64; MAX_TERMS];

    let mut queries_per_replica = vec![0u64; r];
    let mut flash_per_replica = vec![0u64; r];
    let mut window_counts = vec![0u64; r];
    let mut window_imbalances = Vec::new();
    let (mut lookups, mut misses, mut requested, mut missed, mut overflow) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut novel_queries, mut novel_requested, mut novel_missed) = (0u64, 0u64, 0u64);
    let mut total_lookups = 0u64;

    for q in 0..trace.len() {
        let terms = trace.terms(q);
        let n = trace.fill_term_hashes(q, &mut hashes);
        let key = QueryKey::new(trace.query_hashes[q], &hashes[..n]);
        let signals = Signals {
            latency: None,
            shadow: shadow.as_ref().map(|s| (s, &FixedOwners as &dyn Owners)),
        };
        let view = Live {
            base: &load,
            live: live(q),
        };
        let decision = policy
            .route(&key, &Signaled::new(&view, signals), &mut rng)
            .expect("a simulated replica is live");
        let replica = decision.replica;
        if let Some(s) = &shadow {
            // The replica's admission rule, by the term of each hash (a query's few).
            let admits = |h: u64| match &cfg.admission {
                Some(a) => hashes[..n]
                    .iter()
                    .position(|&x| x == h)
                    .is_none_or(|i| a.caches(terms[i], replica)),
                None => true,
            };
            let r = usize::from(replica);
            s.access(r, Owner { id: r, since: 0 }, &hashes[..n], admits);
        }
        let counted = q >= trace.train_len;
        let mut missed_here = 0u64;
        observer.on_route(q, counted, decision);
        let cache = &mut caches[replica as usize];
        total_lookups += n as u64;
        if counted {
            queries_per_replica[replica as usize] += 1;
            window_counts[replica as usize] += 1;
            if decision.reason.is_overflow() {
                overflow += 1;
            }
            let novel = trace.novel[q];
            novel_queries += u64::from(novel);
            for &t in &terms[..n] {
                let bytes = trace.term_bytes[t as usize];
                let hit = look_up(cache, cfg, t, bytes, replica);
                lookups += 1;
                requested += bytes;
                if novel {
                    novel_requested += bytes;
                }
                if !hit {
                    misses += 1;
                    missed += bytes;
                    missed_here += bytes;
                    flash_per_replica[replica as usize] += bytes;
                    if novel {
                        novel_missed += bytes;
                    }
                }
                observer.on_lookup(q, true, replica, t, hit);
            }
            // Only whole windows count; a test part shorter than one window counts as one.
            let seen = q - trace.train_len + 1;
            let short_test = trace.test_len() < cfg.window && q + 1 == trace.len();
            if seen.is_multiple_of(cfg.window) || short_test {
                window_imbalances.push(max_over_mean(&window_counts));
                window_counts.iter_mut().for_each(|c| *c = 0);
            }
        } else {
            for &t in &terms[..n] {
                let bytes = trace.term_bytes[t as usize];
                let hit = look_up(cache, cfg, t, bytes, replica);
                if !hit {
                    missed_here += bytes;
                }
                observer.on_lookup(q, false, replica, t, hit);
            }
        }
        load.record_mut(usize::from(replica), cfg.load.cost(missed_here));
    }

    let test_queries = trace.test_len() as u64;
    SimResult {
        miss_bytes_ratio: ratio(missed, requested),
        miss_ratio: ratio(misses, lookups),
        flash_bytes_per_query: ratio(missed, test_queries),
        imbalance: max_over_mean(&queries_per_replica),
        imbalance_p99_window: percentile(&mut window_imbalances, 0.99),
        replica_query_share: shares(&queries_per_replica),
        flash_shares: shares(&flash_per_replica),
        flash_share_max: shares(&flash_per_replica).into_iter().fold(0.0, f64::max),
        queries: test_queries,
        lookups,
        requested_bytes: requested,
        miss_bytes: missed,
        overflow_share: ratio(overflow, test_queries),
        novel_queries,
        novel_miss_bytes_ratio: ratio(novel_missed, novel_requested),
        total_lookups,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// A load view whose live replicas are `live`: the replay's window with replicas joining
/// and leaving.
struct Live<'a> {
    base: &'a Window,
    live: u64,
}

impl LoadView for Live<'_> {
    fn replicas(&self) -> usize {
        self.base.replicas()
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.base.load(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        self.base.total()
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        self.live & self.base.live_bits()
    }

    #[inline]
    fn below_cap_bits(&self, mask: u64, cap: u64) -> u64 {
        self.base.below_cap_bits(mask & self.live, cap)
    }
}

/// `a / b`, or 0 when `b` is 0.
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Max over mean of `counts` (1.0 is perfect balance; 0 when all are 0).
pub(crate) fn max_over_mean(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    max as f64 * counts.len() as f64 / total as f64
}

fn shares(counts: &[u64]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts.iter().map(|&c| ratio(c, total)).collect()
}

/// Nearest-rank percentile (`p` in (0, 1]); 0 for an empty slice.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// Looks `t` up in `replica`'s cache and, after a miss, caches it unless the admission
/// rule keeps it out of that replica.
#[inline]
fn look_up<C: Cache>(cache: &mut C, cfg: &SimConfig, t: u32, bytes: u64, replica: u16) -> bool {
    match &cfg.admission {
        Some(a) if !a.caches(t, replica) => cache.get(t),
        _ => cache.access(t, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use balancer::policy::{build_policy, PolicyKind, PolicyParams};
    use data::sizes::{SizeTable, Sizes};

    fn sizes() -> Sizes {
        Sizes::Table(SizeTable::from_pairs(
            ["a", "b", "c", "d"].iter().map(|t| (t.to_string(), 10)),
        ))
    }

    #[test]
    fn round_robin_counts_only_the_test_part() {
        // 2 replicas, capacity for every term: the train part warms both caches with
        // "a b" (rr sends query 0 to replica 0, query 1 to replica 1).
        let trace = Trace::build(["a b", "a b", "a b", "a b", "c"], 2, &sizes());
        let policy = build_policy(PolicyKind::RoundRobin, &PolicyParams::new(2)).unwrap();
        let cfg = SimConfig {
            admission: None,
            replicas: 2,
            capacity_bytes: 1000,
            eviction: EvictionKind::Lru,
            window: 2,
            seed: 1,
            load: SimLoad::Queries,
        };
        let res = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
        // Test part: q2 "a b" on r0 (2 hits), q3 "a b" on r1 (2 hits), q4 "c" on r0 (miss).
        assert_eq!(res.queries, 3);
        assert_eq!(res.lookups, 5);
        assert_eq!(res.requested_bytes, 50);
        assert_eq!(res.miss_bytes, 10);
        assert!((res.miss_bytes_ratio - 0.2).abs() < 1e-12);
        assert!((res.miss_ratio - 0.2).abs() < 1e-12);
        assert_eq!(res.replica_query_share, vec![2.0 / 3.0, 1.0 / 3.0]);
        assert_eq!(res.flash_shares, vec![1.0, 0.0]);
        assert_eq!(res.flash_share_max, 1.0);
        assert!((res.imbalance - 4.0 / 3.0).abs() < 1e-12);
        // Whole windows of 2 test queries: [r0, r1] → 1.0; the partial [r0] is ignored.
        assert_eq!(res.imbalance_p99_window, 1.0);
        assert_eq!(res.total_lookups, 9);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut [3.0], 0.99), 3.0);
        assert_eq!(percentile(&mut [], 0.99), 0.0);
    }
}
