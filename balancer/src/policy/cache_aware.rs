//! `cache-aware`: the LLM routers' rule, over ballot's shadow caches ([`crate::shadow`]):
//! send a query where its bytes are cached unless the loads are out of balance. The default
//! scorer is SGLang's router (`sgl-router/src/policies/cache_aware.rs`, now
//! `model_gateway/src/policies/cache_aware.rs` of lightseekorg/smg); llm-d's precise
//! prefix-cache profile is the other ([`CacheScorer`]).
//!
//! A replica's load here is its requests in flight when the view knows them, else its load
//! (SGLang counts its own active requests per worker). What a replica holds of the query is
//! [`LoadView::cached`]: the bytes of the query's postings its shadow cache holds, as a
//! share of all of them, and how full that cache is.
//!
//! [`CacheScorer::Sglang`] (parameters [`PeerParams`]: `cache_threshold` 0.3,
//! `balance_abs` 64, `balance_rel` 1.5, the defaults of SGLang's command line):
//!
//! 1. The loads of the live replicas are imbalanced iff `max − min > balance_abs` and
//!    `max > balance_rel·min` (both strict); then the least loaded live replica takes the
//!    query (ties to the lowest index), [`Reason::Overflow`].
//! 2. Else the replica holding the largest share of the query's bytes (ties to the lower
//!    load, then the lower index) takes it if that share exceeds `cache_threshold`,
//!    [`Reason::Vote`].
//! 3. Else the least loaded live replica, [`Reason::NoVote`] (SGLang since PR #14650, and
//!    smg: the min-load worker; before, the worker with the smallest radix tree). So it is
//!    too where the view keeps no shadow caches.
//!
//! [`CacheScorer::LlmD`] (weights `prefix`, `queue`, `kv`; llm-d's current guide uses 2, 1
//! and 1, [`CacheScorer::LLM_D`]): each live replica scores
//! `prefix·match + queue·(max − load)/(max − min) + kv·(1 − fill)` and the top score takes
//! the query, ties to the lowest index. `match` is llm-d's normalisation of the precise
//! prefix-cache scores (`indexedScoresToNormalizedScoredPods`): min–max over the replicas
//! that hold some of the query's bytes (all equal: 1), 0 for those that hold none; the
//! queue score is 1 for all when the loads are equal (the inference extension's queue
//! scorer). There is no imbalance check: llm-d has none. [`Reason::Vote`] when the winner
//! holds the largest share (and that share is not 0), else [`Reason::NoVote`].
//!
//! No draw from the [`Rng`]. Where ballot departs from the sources, and why:
//!
//! - SGLang's candidate is a tenant of the deepest node its approximate radix tree of the
//!   request's characters matches, an arbitrary one of that node's owners, with the match
//!   rate of that node. Ballot's shadow caches give every replica's share of the query's
//!   postings bytes directly, so the largest share is taken, and a replica shares a query's
//!   terms with other queries, not only its prefix. SGLang's smg ties of the min-load
//!   worker (load, processed count, index) become load, then index.
//! - smg's optional KV-usage triggers of the imbalance check (both off by default) and its
//!   tree eviction have no counterpart: the shadow caches evict as the replicas do.
//! - llm-d's match is the longest run of prefix blocks a pod holds, its queue score reads
//!   the pod's waiting queue and its kv score the GPU KV cache's use; ballot uses the share
//!   of the query's postings bytes held, the requests in flight (or load), and the shadow
//!   cache's fill. llm-d's picker's tie rule is not known; ballot takes the lowest index.

use data::rng::Rng;

use crate::load::{live_mask, LoadView, MAX_REPLICAS};
use crate::policy::{
    BuildPolicy, CacheScorer, Decision, PeerParams, PolicyError, PolicyKind, PolicyParams,
    QueryKey, Reason, RoutingPolicy,
};

/// The LLM routers' cache-aware rule over the live replicas' shadow caches.
#[derive(Clone, Debug)]
pub struct CacheAware {
    replicas: usize,
    peers: PeerParams,
}

impl CacheAware {
    /// Cache-aware routing over `replicas` replicas with the thresholds and scorer of
    /// `peers`.
    pub fn new(replicas: usize, peers: PeerParams) -> Self {
        CacheAware { replicas, peers }
    }
}

/// The live replicas' loads (requests in flight when known) and their extremes.
struct Loads {
    rif: [u64; MAX_REPLICAS],
    /// The least loaded live replica, ties to the lowest index.
    least: usize,
    min: u64,
    max: u64,
}

impl Loads {
    /// Reads the loads of the members of `live` (non-empty).
    fn read(load: &dyn LoadView, live: u64) -> Self {
        let mut loads = Loads {
            rif: [0; MAX_REPLICAS],
            least: live.trailing_zeros() as usize,
            min: u64::MAX,
            max: 0,
        };
        let mut rest = live;
        while rest != 0 {
            let r = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let q = load.in_flight(r).unwrap_or_else(|| load.load(r));
            loads.rif[r] = q;
            if q < loads.min {
                loads.min = q;
                loads.least = r;
            }
            loads.max = loads.max.max(q);
        }
        loads
    }
}

impl CacheAware {
    /// SGLang's rule: the imbalance check, then the largest share over the threshold, else
    /// the least loaded.
    fn sglang(
        &self,
        term_hashes: &[u64],
        load: &dyn LoadView,
        live: u64,
        loads: &Loads,
    ) -> Decision {
        let p = &self.peers;
        let imbalanced = loads.max - loads.min > p.balance_abs
            && (loads.max as f64) > p.balance_rel * (loads.min as f64);
        if imbalanced {
            return Decision::to(loads.least, Reason::Overflow);
        }
        let mut best: Option<(usize, f64)> = None;
        let mut rest = live;
        while rest != 0 {
            let r = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let Some(held) = load.cached(r, term_hashes) else {
                continue;
            };
            let share = held.share();
            if best.is_none_or(|(b, s)| share > s || (share == s && loads.rif[r] < loads.rif[b])) {
                best = Some((r, share));
            }
        }
        match best {
            Some((r, share)) if share > p.cache_threshold => Decision::to(r, Reason::Vote),
            _ => Decision::to(loads.least, Reason::NoVote),
        }
    }
}

/// llm-d's weighted score, `[prefix, queue, kv]` weights; the top score wins.
fn llm_d(
    weights: [f64; 3],
    term_hashes: &[u64],
    load: &dyn LoadView,
    live: u64,
    loads: &Loads,
) -> Decision {
    let [w_prefix, w_queue, w_kv] = weights;
    let mut share = [0.0f64; MAX_REPLICAS];
    let mut fill = [0.0f64; MAX_REPLICAS];
    // The least and largest non-zero shares (`hi` stays 0 when nothing is held).
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    let mut rest = live;
    while rest != 0 {
        let r = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if let Some(held) = load.cached(r, term_hashes) {
            share[r] = held.share();
            fill[r] = held.fill;
        }
        if share[r] > 0.0 {
            lo = lo.min(share[r]);
            hi = hi.max(share[r]);
        }
    }
    let spread = (loads.max - loads.min) as f64;
    let mut best = live.trailing_zeros() as usize;
    let mut best_score = f64::NEG_INFINITY;
    let mut rest = live;
    while rest != 0 {
        let r = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let prefix = if share[r] <= 0.0 {
            0.0
        } else if hi > lo {
            (share[r] - lo) / (hi - lo)
        } else {
            1.0
        };
        let queue = if spread > 0.0 {
            (loads.max - loads.rif[r]) as f64 / spread
        } else {
            1.0
        };
        let score = w_prefix * prefix + w_queue * queue + w_kv * (1.0 - fill[r]);
        if score > best_score {
            best = r;
            best_score = score;
        }
    }
    let reason = if hi > 0.0 && share[best] >= hi {
        Reason::Vote
    } else {
        Reason::NoVote
    };
    Decision::to(best, reason)
}

impl BuildPolicy for CacheAware {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas, params.peers))
    }
}

impl RoutingPolicy for CacheAware {
    fn kind(&self) -> PolicyKind {
        PolicyKind::CacheAware
    }

    fn reads_shadow(&self) -> bool {
        true
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, _rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        if live == 0 {
            return None;
        }
        let loads = Loads::read(load, live);
        Some(match self.peers.scorer {
            CacheScorer::Sglang => self.sglang(query.term_hashes, load, live, &loads),
            CacheScorer::LlmD { prefix, queue, kv } => {
                llm_d([prefix, queue, kv], query.term_hashes, load, live, &loads)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{CacheMatch, StaticLoad};
    use crate::policy::test_view::TestView;

    fn view_of(loads: Vec<u64>, cached: Vec<Option<CacheMatch>>) -> TestView {
        TestView::new(loads).with_cached(cached)
    }

    /// Shares in hundredths of a 100-byte query, caches half full.
    fn shares(held: &[u64]) -> Vec<Option<CacheMatch>> {
        held.iter()
            .map(|&held| {
                Some(CacheMatch {
                    held,
                    all: 100,
                    fill: 0.5,
                })
            })
            .collect()
    }

    fn route_sglang(view: &dyn LoadView) -> Option<(u16, Reason)> {
        let policy = CacheAware::build(&PolicyParams::new(view.replicas())).unwrap();
        let d = policy.route(&QueryKey::new(1, &[7, 8]), view, &mut Rng::new(1))?;
        Some((d.replica, d.reason))
    }

    fn route_llm_d(view: &dyn LoadView, scorer: CacheScorer) -> Option<(u16, Reason)> {
        let peers = PeerParams {
            scorer,
            ..PeerParams::default()
        };
        let policy = CacheAware::new(view.replicas(), peers);
        let d = policy.route(&QueryKey::new(1, &[7, 8]), view, &mut Rng::new(1))?;
        Some((d.replica, d.reason))
    }

    #[test]
    fn sglang_worked_examples() {
        // peers notes §4, W1..W4 as replicas 0..3.
        // a) 80 > 64 and 100 > 1.5·20: imbalanced, the least loaded W2, cache or not.
        let a = view_of(vec![100, 20, 30, 25], shares(&[90, 0, 0, 0]));
        assert_eq!(route_sglang(&a), Some((1, Reason::Overflow)));
        // b) 15 ≤ 64: balanced; W3 holds 0.6 > 0.3.
        let b = view_of(vec![40, 30, 35, 45], shares(&[10, 20, 60, 10]));
        assert_eq!(route_sglang(&b), Some((2, Reason::Vote)));
        // c) The best share 0.2 ≤ 0.3: the least loaded, W2.
        let c = view_of(vec![40, 30, 35, 45], shares(&[10, 20, 10, 5]));
        assert_eq!(route_sglang(&c), Some((1, Reason::NoVote)));
    }

    #[test]
    fn sglang_imbalance_boundaries() {
        // 64 is not > 64: balanced, so the cache decides.
        let view = view_of(vec![0, 64], shares(&[0, 50]));
        assert_eq!(route_sglang(&view), Some((1, Reason::Vote)));
        // 65 > 64 and 65 > 1.5·0.
        let view = view_of(vec![0, 65], shares(&[0, 50]));
        assert_eq!(route_sglang(&view), Some((0, Reason::Overflow)));
        // 80 > 64 but 300 ≤ 1.5·220: balanced.
        let view = view_of(vec![300, 220], shares(&[50, 0]));
        assert_eq!(route_sglang(&view), Some((0, Reason::Vote)));
        // 110 > 64 and 300 > 1.5·190.
        let view = view_of(vec![300, 190], shares(&[50, 0]));
        assert_eq!(route_sglang(&view), Some((1, Reason::Overflow)));
        // In flight, not the load, is compared: 80 > 64 and 100 > 30.
        let mut view = view_of(vec![0, 0], shares(&[50, 0]));
        view.in_flight = Some(vec![100, 20]);
        assert_eq!(route_sglang(&view), Some((1, Reason::Overflow)));
    }

    #[test]
    fn sglang_ties_dead_replicas_and_no_cache() {
        // Equal shares: the lower load, then the lower index.
        let view = view_of(vec![40, 30, 35], shares(&[50, 50, 50]));
        assert_eq!(route_sglang(&view), Some((1, Reason::Vote)));
        let view = view_of(vec![30, 30, 30], shares(&[50, 50, 50]));
        assert_eq!(route_sglang(&view), Some((0, Reason::Vote)));
        // Replica 0 is dead: neither its cache nor its load counts.
        let mut view = view_of(vec![0, 100, 90], shares(&[100, 50, 40]));
        view.live = 0b110;
        assert_eq!(route_sglang(&view), Some((1, Reason::Vote)));
        // A query of no bytes: share 0, the least loaded.
        let view = view_of(vec![5, 3], vec![Some(CacheMatch::default()); 2]);
        assert_eq!(route_sglang(&view), Some((1, Reason::NoVote)));
        // No shadow caches: the least loaded, unless imbalanced.
        assert_eq!(
            route_sglang(&StaticLoad::new(vec![5, 3, 3])),
            Some((1, Reason::NoVote))
        );
        assert_eq!(
            route_sglang(&StaticLoad::new(vec![100, 3, 3])),
            Some((1, Reason::Overflow))
        );
        let none = StaticLoad::with_live(vec![1, 2], vec![false, false]);
        assert_eq!(route_sglang(&none), None);
    }

    #[test]
    fn llm_d_worked_example() {
        // Weights 2/1/1. Shares 6/8, 5/8, 0; loads 10, 2, 0; fills 0.5, 0.5, 0.25.
        // match: over the holders {0.75, 0.625}: 1, 0, and 0 for the non-holder.
        // queue: (10 − q)/10: 0, 0.8, 1. kv: 0.5, 0.5, 0.75.
        // Scores 2.5, 1.3, 1.75: replica 0, which holds the most.
        // (A min–max over all live replicas would give replica 1 a match of 0.833 and the
        // win with 2.967.)
        let m = |held: u64, fill: f64| Some(CacheMatch { held, all: 8, fill });
        let view = view_of(vec![10, 2, 0], vec![m(6, 0.5), m(5, 0.5), m(0, 0.25)]);
        assert_eq!(
            route_llm_d(&view, CacheScorer::LLM_D),
            Some((0, Reason::Vote))
        );
        // The queue outweighs the cache: prefix 1, queue 2, kv 0 over shares 6/8 and 0,
        // loads 10 and 0: scores 1 and 2.
        let view = view_of(vec![10, 0], vec![m(6, 0.5), m(0, 0.5)]);
        let queue_heavy = CacheScorer::LlmD {
            prefix: 1.0,
            queue: 2.0,
            kv: 0.0,
        };
        assert_eq!(route_llm_d(&view, queue_heavy), Some((1, Reason::NoVote)));
        // No imbalance check: loads 100 and 20 (SGLang's overflow) still go to the cache,
        // scores 2 + 0 + 1 = 3 against 0 + 1 + 1 = 2.
        let view = view_of(vec![100, 20], vec![m(6, 0.0), m(0, 0.0)]);
        assert_eq!(
            route_llm_d(&view, CacheScorer::LLM_D),
            Some((0, Reason::Vote))
        );
    }

    #[test]
    fn llm_d_equal_scores_are_one() {
        // Equal shares and loads: match and queue are 1 for all; the emptiest cache wins.
        let view = view_of(
            vec![4, 4, 4],
            vec![
                Some(CacheMatch {
                    held: 3,
                    all: 8,
                    fill: 0.5,
                }),
                Some(CacheMatch {
                    held: 3,
                    all: 8,
                    fill: 0.25,
                }),
                Some(CacheMatch {
                    held: 3,
                    all: 8,
                    fill: 0.75,
                }),
            ],
        );
        assert_eq!(
            route_llm_d(&view, CacheScorer::LLM_D),
            Some((1, Reason::Vote))
        );
        // Nothing cached anywhere: no vote, the emptiest cache and the lowest load decide.
        let view = view_of(vec![4, 2, 4], shares(&[0, 0, 0]));
        assert_eq!(
            route_llm_d(&view, CacheScorer::LLM_D),
            Some((1, Reason::NoVote))
        );
        // No shadow caches, all loads equal: the lowest index.
        let view = StaticLoad::new(vec![3, 3]);
        assert_eq!(
            route_llm_d(&view, CacheScorer::LLM_D),
            Some((0, Reason::NoVote))
        );
        assert_eq!(
            CacheAware::new(2, PeerParams::default()).kind(),
            PolicyKind::CacheAware
        );
    }
}
