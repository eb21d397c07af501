//! `ars`: Elasticsearch's adaptive replica selection, the rank of C3 (Suresh, Canini, Schmid
//! and Feldmann, "C3: Cutting tail latency in cloud data stores via adaptive replica
//! selection", NSDI 2015) as Elasticsearch computes it: `ResponseCollectorService`
//! (`ComputedNodeStats.rank`, after PR #70283, which fixed the inverted service time of
//! #65838) and `IndexShardRoutingTable.rankShardsAndUpdateStats`.
//!
//! For each live replica with answer statistics ([`LoadView::latency`]): `R` its response
//! time, `S` its service time, `q` its reported queue (truncated to whole requests), `os`
//! its requests outstanding (in flight when the view knows them, else its load) and `n` the
//! number of live replicas with statistics (Elasticsearch's `clientNum`, the nodes the
//! coordinator has statistics for),
//!
//! ```text
//! q̂ = 1 + os·n + q,    rank = R − S + q̂³·S    (ms; lower is better)
//! ```
//!
//! The live replicas are first rotated to start at a random one (Elasticsearch's
//! `RotationShardShuffler`), then stably sorted by rank with the replicas without
//! statistics first: the query goes to the first replica without statistics in rotated
//! order if there is one, else to the lowest rank, ties to the earliest in rotated order.
//! After a ranked choice the view's `adjust_latency` runs (Elasticsearch's `adjustStats`:
//! every other live replica with statistics takes one synthetic sample halfway to the
//! winner's, so a replica that lost stays in contention); a replica without statistics wins
//! with no adjustment, as in Elasticsearch. Always [`Reason::NoVote`].
//!
//! Parameters: none. Elasticsearch hard-codes the exponent 3 and the averages' weight 0.3
//! ([`crate::load::latency::ALPHA`]), and so does ballot. Exactly one draw per query with a
//! live replica (the rotation's start, `below(live)`), none without.
//!
//! Where ballot departs from Elasticsearch, and why:
//!
//! - A replica that reports no service time (a search engine ballot did not write: no ORCA
//!   `request_cost.service_ms`) has its response time stand in for it, so it is still
//!   ranked by its queue and outstanding requests (`rank = q̂³·R`).
//! - The rotation's start is drawn per query from the caller's seeded [`Rng`] instead of a
//!   counter advanced per call, so `route` reads only `self` and the view (no interior
//!   state) and runs are reproducible from a seed.
//! - `os` is the view's count of requests in flight from this balancer, as Elasticsearch's
//!   `clientConnections` counts the shard requests in flight from its coordinator; the
//!   trace simulator has no time and uses the replica's load instead. Elasticsearch's `+1`
//!   to the winner in a per-search snapshot (its guard against herding the shards of one
//!   search) has no counterpart: a query is one request, and the view counts it once sent.
//! - This is the classic ordering (statistics-less replicas first). OpenSearch's still
//!   inverted rank (`R − 1/S + q̂³/S`) and Elasticsearch's newer warm-up variant (statistics-
//!   less replicas last, an exploration candidate under an in-flight cap) are not followed.
//!
//! Without latencies (the trace simulator) every replica is without statistics, and `ars`
//! is a uniformly random live replica.

use data::rng::Rng;

use crate::load::{live_mask, members, nth_set_bit, Latency, LoadView, MAX_REPLICAS};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Elasticsearch's adaptive replica selection over the live replicas.
#[derive(Clone, Debug)]
pub struct Ars {
    replicas: usize,
}

impl Ars {
    /// Adaptive replica selection over `replicas` replicas.
    pub fn new(replicas: usize) -> Self {
        Ars { replicas }
    }
}

/// Elasticsearch's rank of a replica (lower is better): `R − S + q̂³·S` with
/// `q̂ = 1 + outstanding·clients + trunc(queue)`, times in ms. A replica without a service
/// time has its response time stand in for it; one without a queue counts an empty queue.
pub fn rank(latency: &Latency, outstanding: u64, clients: usize) -> f64 {
    let response = latency.response_ms;
    let service = latency.service_ms.unwrap_or(response);
    let queue = latency.queue.map_or(0.0, f64::trunc);
    let q_hat = 1.0 + outstanding as f64 * clients as f64 + queue;
    response - service + q_hat.powi(3) * service
}

/// Requests outstanding at `replica`: in flight when the view knows them, else its load.
#[inline]
fn outstanding(load: &dyn LoadView, replica: usize) -> u64 {
    load.in_flight(replica)
        .unwrap_or_else(|| load.load(replica))
}

impl BuildPolicy for Ars {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for Ars {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Ars
    }

    fn route(&self, _query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        let n = live.count_ones();
        if n == 0 {
            return None;
        }
        // The rotation: the live replicas from the drawn one up, then those below it.
        let first = nth_set_bit(live, rng.below(u64::from(n)));
        let from_first = live & (u64::MAX << first);
        let rotated = || members(from_first).chain(members(live & !from_first));

        // Replicas without statistics sort first: the first of them in rotated order wins.
        let mut stats = [Latency::default(); MAX_REPLICAS];
        for r in rotated() {
            match load.latency(r) {
                Some(l) => stats[r] = l,
                None => return Some(Decision::to(r, Reason::NoVote)),
            }
        }

        // Every live replica has statistics, so `clientNum` is the live count.
        let clients = n as usize;
        let mut best = first;
        let mut best_rank = f64::INFINITY;
        for r in rotated() {
            let score = rank(&stats[r], outstanding(load, r), clients);
            if score < best_rank {
                best = r;
                best_rank = score;
            }
        }
        load.adjust_latency(best, live);
        Some(Decision::to(best, Reason::NoVote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_view::TestView;
    use crate::load::{LatencyStats, Signaled, Signals, StaticLoad};

    fn view_of(loads: Vec<u64>, live: u64, latency: Vec<Option<Latency>>) -> TestView {
        TestView::new(loads).with_live(live).with_latency(latency)
    }

    fn lat(response_ms: f64, service_ms: f64, queue: f64) -> Option<Latency> {
        Some(Latency {
            response_ms,
            service_ms: Some(service_ms),
            queue: Some(queue),
            samples: 1,
        })
    }

    fn route(view: &dyn LoadView, seed: u64) -> Option<Decision> {
        let ars = Ars::build(&PolicyParams::new(view.replicas())).unwrap();
        ars.route(&QueryKey::new(1, &[]), view, &mut Rng::new(seed))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn the_worked_example_ranks_and_picks_c() {
        // peers notes §1: A, B, C with clientNum 3 rank 870, 2060 and 450.
        let (a, b, c) = (lat(10.0, 4.0, 2.0), lat(8.0, 6.0, 0.0), lat(20.0, 2.0, 5.0));
        assert!(close(rank(&a.unwrap(), 1, 3), 870.0));
        assert!(close(rank(&b.unwrap(), 2, 3), 2060.0));
        assert!(close(rank(&c.unwrap(), 0, 3), 450.0));
        for seed in 0..16 {
            let view = view_of(vec![1, 2, 0], 0b111, vec![a, b, c]);
            assert_eq!(route(&view, seed), Some(Decision::to(2, Reason::NoVote)));
            assert_eq!(
                view.adjusted.get(),
                Some((2, 0b111)),
                "adjusted after a rank"
            );
        }
    }

    #[test]
    fn the_adjusted_stats_send_the_next_query_to_a() {
        // peers notes §1: after C wins, A 807.0, B 1856.6 and C (os 1) 1476: A.
        let stats = LatencyStats::default();
        stats.record(0, 10.0, Some(4.0), Some(2.0));
        stats.record(1, 8.0, Some(6.0), Some(0.0));
        stats.record(2, 20.0, Some(2.0), Some(5.0));
        let signals = Signals {
            latency: Some(&stats),
            ..Signals::default()
        };
        let base = StaticLoad::new(vec![1, 2, 0]);
        let view = Signaled::new(&base, signals);
        assert_eq!(route(&view, 3).map(|d| d.replica), Some(2));
        let (a, b) = (stats.get(0).unwrap(), stats.get(1).unwrap());
        assert!(
            close(a.response_ms, 11.5) && close(a.service_ms.unwrap(), 3.7),
            "{a:?}"
        );
        assert!(
            close(b.response_ms, 9.8) && close(b.service_ms.unwrap(), 5.4),
            "{b:?}"
        );
        assert!(close(rank(&a, 1, 3), 807.0), "{a:?}");
        assert!(close(rank(&b, 2, 3), 1856.6), "{b:?}");
        assert!(close(rank(&stats.get(2).unwrap(), 1, 3), 1476.0));
        let base = StaticLoad::new(vec![1, 2, 1]);
        let view = Signaled::new(&base, signals);
        assert_eq!(route(&view, 3).map(|d| d.replica), Some(0));
    }

    #[test]
    fn a_replica_without_stats_comes_first_in_rotated_order() {
        // Replicas 1 and 3 have no statistics; 0 and 2 are fast and idle.
        let fast = lat(1.0, 1.0, 0.0);
        for seed in 0..32 {
            let view = view_of(vec![0, 9, 0, 9], 0b1111, vec![fast, None, fast, None]);
            let start = Rng::new(seed).below(4);
            // Rotated from `start`: 1 comes before 3 when the rotation starts at 0 or 1.
            let want = if start <= 1 { 1 } else { 3 };
            assert_eq!(route(&view, seed), Some(Decision::to(want, Reason::NoVote)));
            assert_eq!(view.adjusted.get(), None, "no adjustment without stats");
        }
    }

    #[test]
    fn ties_go_to_the_rotation_and_dead_replicas_never_win() {
        // Replica 2 is dead and without statistics (it would sort first if live).
        let same = lat(5.0, 2.0, 1.0);
        for seed in 0..32 {
            let view = view_of(vec![3, 3, 0, 3], 0b1011, vec![same, same, None, same]);
            let want = [0, 1, 3][Rng::new(seed).below(3) as usize];
            assert_eq!(route(&view, seed), Some(Decision::to(want, Reason::NoVote)));
            assert_eq!(view.adjusted.get(), Some((want, 0b1011)));
        }
    }

    #[test]
    fn a_missing_service_time_is_the_response_time() {
        let l = Latency {
            response_ms: 7.0,
            service_ms: None,
            queue: None,
            samples: 1,
        };
        // q̂ = 1 + 2·4 = 9: 7 − 7 + 729·7.
        assert!(close(rank(&l, 2, 4), 5103.0));
    }

    #[test]
    fn one_draw_per_query_and_none_without_a_live_replica() {
        let view = view_of(vec![0, 0], 0, vec![None, None]);
        let mut rng = Rng::new(5);
        let ars = Ars::new(2);
        assert_eq!(ars.route(&QueryKey::new(1, &[]), &view, &mut rng), None);
        assert_eq!(rng.next_u64(), Rng::new(5).next_u64(), "no draw");
        let view = view_of(vec![0, 0], 0b10, vec![None, lat(1.0, 1.0, 0.0)]);
        let mut rng = Rng::new(5);
        let d = ars.route(&QueryKey::new(1, &[]), &view, &mut rng);
        assert_eq!(d, Some(Decision::to(1, Reason::NoVote)));
        let mut mirror = Rng::new(5);
        let _ = mirror.below(1);
        assert_eq!(rng.next_u64(), mirror.next_u64(), "one draw");
        assert_eq!(ars.kind(), PolicyKind::Ars);
    }
}
