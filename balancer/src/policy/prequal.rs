//! `prequal`: Prequal's hot-cold lexicographic rule (Wydrowski, Kleinberg, Rumble and
//! Archer, "Load is not what you should balance: Introducing Prequal", NSDI 2024).
//!
//! Per query, `probes` distinct live replicas are probed at random; each probe answers
//! with the replica's requests in flight (RIF: in flight when the view knows them, else its
//! load) and its latency (the response-time average of [`LoadView::latency`]). A probe is
//! hot when its RIF exceeds the `q_rif` quantile of the live replicas' RIFs. If any probe
//! is cold, the cold probe with the lowest latency takes the query (ties to the lower RIF,
//! then to the earlier probe); if all are hot, the probe with the lowest RIF (ties to the
//! earlier probe). A probe of a replica without a latency sample counts as 0 ms: unexplored
//! replicas are tried first, as Elasticsearch's adaptive replica selection sorts replicas
//! without statistics first. Always [`Reason::NoVote`].
//!
//! Parameters ([`crate::policy::PeerParams`]): `probes`, the paper's `r_probe` (default 3),
//! and `q_rif`, its `Q_RIF` (default 0.84 = 2^−0.25; the paper finds 0.6 to 0.9 good, and 0
//! balances by RIF alone). The quantile is type 7 (linear interpolation between the order
//! statistics around `q_rif·(m − 1)`), pinned because a nearest-rank quantile changes the
//! picks (peers notes §3). The probes are drawn by a partial Fisher–Yates shuffle of the
//! live replicas, `below(live)`, `below(live − 1)`, …: exactly `min(probes, live)` draws
//! per query with a live replica, none without.
//!
//! The paper's values come from a secondary source quoting it (poise-rs `docs/prequal.md`);
//! the paper body was not available. Where ballot departs from the paper, and why:
//!
//! - The hot threshold is read from the RIFs of every live replica rather than estimated
//!   from a pool of probe answers: the balancer is the replicas' only client and knows
//!   every RIF exactly. One consequence: when every live replica is probed, the least
//!   loaded is never hot, so "all hot" arises only when the probes miss it.
//! - Probes are free reads of the load view, answered at once, so there is no probe pool,
//!   no reuse budget (`b_reuse`), no removal of the oldest and worst probes, no age limit,
//!   no random fallback for an empty pool, and no `+1` to the chosen probe's RIF (the
//!   view counts the query once it is sent).
//! - A probe's latency is the replica's recent response time, not the paper's median of
//!   recent latencies at or near the replica's current RIF.

use data::rng::Rng;

use crate::load::{live_mask, LoadView, MAX_REPLICAS};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Prequal's hot-cold rule over randomly probed live replicas.
#[derive(Clone, Debug)]
pub struct Prequal {
    replicas: usize,
    probes: usize,
    q_rif: f64,
}

impl Prequal {
    /// Prequal over `replicas` replicas, probing `probes` per query (at least 1), hot above
    /// the `q_rif` quantile (in `[0, 1]`) of the live replicas' RIFs.
    pub fn new(replicas: usize, probes: usize, q_rif: f64) -> Self {
        Prequal {
            replicas,
            probes: probes.max(1),
            q_rif: q_rif.clamp(0.0, 1.0),
        }
    }
}

/// Requests in flight at `replica` when the view knows them, else its load.
#[inline]
fn rif(load: &dyn LoadView, replica: usize) -> u64 {
    load.in_flight(replica)
        .unwrap_or_else(|| load.load(replica))
}

/// The type-7 `q` quantile of `values` (1 to [`MAX_REPLICAS`] of them): with the values
/// sorted, `v[lo] + (p − lo)·(v[hi] − v[lo])` at position `p = q·(m − 1)`, `lo` and `hi`
/// its floor and ceiling.
fn quantile(values: &[u64], q: f64) -> f64 {
    let mut buf = [0u64; MAX_REPLICAS];
    let sorted = &mut buf[..values.len()];
    sorted.copy_from_slice(values);
    sorted.sort_unstable();
    let last = sorted.len() - 1;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let lo = (pos.floor() as usize).min(last);
    let hi = (pos.ceil() as usize).min(last);
    let (a, b) = (sorted[lo] as f64, sorted[hi] as f64);
    a + (pos - lo as f64) * (b - a)
}

impl BuildPolicy for Prequal {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(
            params.replicas,
            params.peers.probes,
            params.peers.q_rif,
        ))
    }
}

impl RoutingPolicy for Prequal {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Prequal
    }

    fn route(&self, _query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        let n = live.count_ones() as usize;
        if n == 0 {
            return None;
        }
        // The live replicas and their RIFs, read once.
        let mut members = [0u8; MAX_REPLICAS];
        let mut rifs = [0u64; MAX_REPLICAS];
        let mut rest = live;
        for (member, q) in members.iter_mut().zip(rifs.iter_mut()).take(n) {
            let r = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            *member = r as u8;
            *q = rif(load, r);
        }
        let hot_above = quantile(&rifs[..n], self.q_rif);

        // The probes: a partial Fisher–Yates shuffle, so the first `k` are `k` distinct
        // live replicas in draw order.
        let k = self.probes.min(n);
        for i in 0..k {
            let j = i + rng.below((n - i) as u64) as usize;
            members.swap(i, j);
            rifs.swap(i, j);
        }

        // Cold: lowest latency, then lowest RIF, then first drawn. Hot: lowest RIF, then
        // first drawn.
        let mut cold: Option<(usize, f64, u64)> = None;
        let mut hot: Option<(usize, u64)> = None;
        for (&member, &q) in members[..k].iter().zip(&rifs[..k]) {
            let r = usize::from(member);
            if (q as f64) > hot_above {
                if hot.is_none_or(|(_, hq)| q < hq) {
                    hot = Some((r, q));
                }
                continue;
            }
            let ms = load.latency(r).map_or(0.0, |l| l.response_ms);
            let ms = if ms.is_nan() { f64::INFINITY } else { ms };
            if cold.is_none_or(|(_, cms, cq)| ms < cms || (ms == cms && q < cq)) {
                cold = Some((r, ms, q));
            }
        }
        let pick = match (cold, hot) {
            (Some((r, _, _)), _) | (None, Some((r, _))) => r,
            (None, None) => return None,
        };
        Some(Decision::to(pick, Reason::NoVote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_view::TestView;

    fn view_of(loads: Vec<u64>, response_ms: Vec<Option<f64>>) -> TestView {
        TestView::new(loads).with_response_ms(response_ms)
    }

    /// The peers notes' pool (§3): r1..r5 with RIF [2, 5, 3, 9, 4] and latencies
    /// [30, 12, 25, 5, 15] ms.
    fn pool() -> TestView {
        view_of(
            vec![2, 5, 3, 9, 4],
            vec![Some(30.0), Some(12.0), Some(25.0), Some(5.0), Some(15.0)],
        )
    }

    fn route(view: &TestView, probes: usize, q_rif: f64, seed: u64) -> Option<Decision> {
        let policy = Prequal::new(view.replicas(), probes, q_rif);
        policy.route(&QueryKey::new(1, &[]), view, &mut Rng::new(seed))
    }

    /// The replicas probed with `seed`: the draws `route` makes, over the live `members`.
    fn probed(seed: u64, members: &[usize], probes: usize) -> Vec<usize> {
        let mut rng = Rng::new(seed);
        let mut m = members.to_vec();
        let k = probes.min(m.len());
        for i in 0..k {
            let j = i + rng.below((m.len() - i) as u64) as usize;
            m.swap(i, j);
        }
        m.truncate(k);
        m
    }

    #[test]
    fn the_quantile_is_type_7() {
        // Sorted [2, 3, 4, 5, 9]; position 0.84·4 = 3.36: 5 + 0.36·4 = 6.44.
        assert!((quantile(&[2, 5, 3, 9, 4], 0.84) - 6.44).abs() < 1e-9);
        assert_eq!(quantile(&[2, 5, 3, 9, 4], 0.0), 2.0);
        assert_eq!(quantile(&[2, 5, 3, 9, 4], 1.0), 9.0);
        assert_eq!(quantile(&[2, 5, 3, 9, 4], 0.5), 4.0);
        assert_eq!(quantile(&[7], 0.84), 7.0);
        assert_eq!(quantile(&[1, 3], 0.25), 1.5);
    }

    #[test]
    fn the_worked_example() {
        for seed in 0..16 {
            // Threshold 6.44: r4 (RIF 9) is hot; the fastest cold probe is r2 (12 ms), not
            // the faster r4.
            let d = route(&pool(), 5, 0.84, seed);
            assert_eq!(d, Some(Decision::to(1, Reason::NoVote)));
            // Q_RIF 0: the threshold is the least RIF, 2, so only r1 is cold, and it wins
            // for all its 30 ms.
            assert_eq!(route(&pool(), 5, 0.0, seed).map(|d| d.replica), Some(0));
            // Q_RIF 1: nothing is hot, the fastest wins: r4 (5 ms).
            assert_eq!(route(&pool(), 5, 1.0, seed).map(|d| d.replica), Some(3));
        }
    }

    #[test]
    fn all_hot_takes_the_least_rif() {
        // Q_RIF 0 over RIF [0, 5, 3, 9, 4]: all but r0 are hot. Two probes of five: when
        // they miss r0, the lower RIF of the two wins, whatever the latencies.
        let view = view_of(
            vec![0, 5, 3, 9, 4],
            vec![Some(50.0), Some(1.0), Some(2.0), Some(3.0), Some(4.0)],
        );
        let mut all_hot = 0;
        for seed in 0..64 {
            let p = probed(seed, &[0, 1, 2, 3, 4], 2);
            let want = if p.contains(&0) {
                0
            } else {
                all_hot += 1;
                *p.iter().min_by_key(|&&r| view.loads[r]).unwrap()
            };
            assert_eq!(
                route(&view, 2, 0.0, seed).map(|d| d.replica),
                Some(want as u16)
            );
        }
        assert!(all_hot > 0, "some seed misses r0");
    }

    #[test]
    fn only_probed_replicas_are_chosen() {
        // RIF 0..7 with replica 5 dead: live RIFs [0, 1, 2, 3, 4, 6, 7], the 0.84 quantile
        // is 6 + 0.04·1 = 6.04, so only replica 7 is hot. Latencies fall with the index,
        // so the cold probe with the highest index wins.
        let mut view = view_of(
            (0..8).collect(),
            (0..8).map(|r| Some(f64::from(8 - r) * 10.0)).collect(),
        );
        view.live = 0b1101_1111;
        let members = [0, 1, 2, 3, 4, 6, 7];
        let policy = Prequal::build(&PolicyParams::new(8)).unwrap();
        assert_eq!((policy.probes, policy.q_rif), (3, 0.84));
        for seed in 0..64 {
            let mut rng = Rng::new(seed);
            let d = policy
                .route(&QueryKey::new(1, &[]), &view, &mut rng)
                .unwrap();
            let p = probed(seed, &members, 3);
            let want = p.iter().copied().filter(|&r| r != 7).max().unwrap();
            assert_eq!(d, Decision::to(want, Reason::NoVote), "probed {p:?}");
            // Exactly three draws.
            let mut mirror = Rng::new(seed);
            for i in 0..3 {
                let _ = mirror.below(7 - i);
            }
            assert_eq!(rng.next_u64(), mirror.next_u64());
        }
    }

    #[test]
    fn unexplored_replicas_count_as_fast_and_in_flight_counts() {
        // r1 has no latency sample: 0 ms, it beats the cold r0 and r2.
        let mut view = view_of(
            vec![1, 1, 1, 1],
            vec![Some(9.0), None, Some(3.0), Some(1.0)],
        );
        // In flight, not load, is the RIF: r3 is the only hot one (the 0.84 quantile of
        // [0, 0, 0, 8] is 0 + 0.52·8 = 4.16).
        view.in_flight = Some(vec![0, 0, 0, 8]);
        assert_eq!(route(&view, 4, 0.84, 1).map(|d| d.replica), Some(1));
        // With samples everywhere, the fastest cold one: r2.
        view = view.with_response_ms(vec![Some(9.0), Some(20.0), Some(3.0), Some(1.0)]);
        assert_eq!(route(&view, 4, 0.84, 1).map(|d| d.replica), Some(2));
        // Equal latencies: the lower RIF.
        let tie = view_of(vec![3, 1, 2], vec![Some(5.0), Some(5.0), Some(5.0)]);
        assert_eq!(route(&tie, 3, 1.0, 7).map(|d| d.replica), Some(1));
    }

    #[test]
    fn no_live_replica_no_decision_no_draw() {
        let mut view = pool();
        view.live = 0;
        let mut rng = Rng::new(3);
        let policy = Prequal::new(5, 3, 0.84);
        assert_eq!(policy.route(&QueryKey::new(1, &[]), &view, &mut rng), None);
        assert_eq!(rng.next_u64(), Rng::new(3).next_u64());
        assert_eq!(policy.kind(), PolicyKind::Prequal);
        // One live replica: it, after one draw.
        view.live = 0b1000;
        assert_eq!(route(&view, 3, 0.84, 3).map(|d| d.replica), Some(3));
    }
}
