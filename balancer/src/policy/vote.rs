//! Vote counting with bounded loads, shared by `term-vote` and `table` (Archer et al.,
//! "Cache-aware load balancing of data center applications", PVLDB 2019, with the load
//! bound of Mirrokni et al., SODA 2018 and the random jump of Chen et al., RJ-CH).
//!
//! Scoring is split from picking so that other vote sources can reuse the rule: a
//! [`VoteSource`] adds one term's votes to [`Scores`], and [`pick`] turns scores into a
//! decision. A table switch that ramps queries from an old to a new table
//! (`crate::ramp`) only needs to score each query with the right source's
//! [`VoteSource::score`], then [`pick`].
//!
//! # Scores
//!
//! A replica's score is a pair `(votes, fallback)` compared lexicographically: `votes` sums
//! the weights of real votes, `fallback` those of stand-in votes (a term missing from the
//! voting table), so stand-in votes only ever break ties between equal real votes. Both live
//! in fixed `[f64; MAX_REPLICAS]` stack arrays.
//!
//! # The rule
//!
//! With `cap = load_cap(eps, total, live)` and ranking the live replicas with a positive
//! score by score (higher first, then lower replica index):
//!
//! 1. the highest-ranked one whose load is below `cap` takes the query: [`Reason::Vote`] if
//!    it is the top-ranked one, [`Reason::Overflow`] otherwise (the top one is at the cap;
//!    [`Reason::Stalled`] when the stall guard is what fills it); with `homes > 0`, every
//!    live replica under the cap whose real votes reach `homes` times that replica's is one
//!    of the query's *homes* too, and the least loaded home takes the query
//!    ([`Reason::Home`] when that is not the top vote) (power of two choices among the copies of a hot term, as DistCache
//!    sends each request for a replicated hot object to the less loaded copy: a term that
//!    votes for several replicas is cached on each of them, and its queries spread by load
//!    instead of piling onto the first). "Least loaded" means fewest requests in flight
//!    when the view has time ([`LoadView::in_flight`]: the HTTP balancer and the queueing
//!    simulator), ties broken by load, and the least load otherwise (the trace
//!    simulator). The home's cache serves the query either way, so choosing by the backlog
//!    of the moment costs no misses, while the load (a trailing window) only sees the
//!    backlog once it has been answered: on the three setups of `docs/results.md`
//!    ("Homes by requests in flight") it raised the simulated saturation throughput by
//!    9–14% at the same miss bytes;
//! 2. if every positively scored live replica is at the cap, or none has a positive score,
//!    the query jumps to a uniformly random live replica under the cap (one `rng` draw):
//!    [`Reason::Overflow`] (or [`Reason::Stalled`]), or [`Reason::NoVote`] when no live
//!    replica had a positive score.
//!
//! Dead replicas take no part in the ranking: a query whose best replica is dead goes to its
//! best live one as a `Vote`. If the load view is inconsistent and no live replica is under
//! the cap, the least loaded live replica takes the query.

use data::rng::Rng;

use crate::load::{
    least_loaded_member, live_mask, load_cap, random_member, under_cap_mask, LoadView, MAX_REPLICAS,
};
use crate::policy::{Decision, QueryKey, Reason};

/// Adds the shadow caches' evidence to a query's votes: every live replica among the first
/// `replicas` whose shadow cache ([`LoadView::cached`]) holds a share `s` of the query's
/// postings bytes gains `weight · s · V` real votes, `V` the query's vote mass (its real
/// and stand-in votes summed over the replicas, or 1 without any). So a replica holding
/// all of the query's bytes gains `weight` times the votes the table gave the query: the
/// table decides where nothing is cached yet (the prior) and the caches what they already
/// hold (the evidence), as the LLM routers route by where the cache is. A view without
/// shadow caches adds nothing. Off by default ([`crate::policy::DEFAULT_EVIDENCE`]: measured
/// in docs/results.md, "The peers side by side").
pub fn add_cache_evidence(
    scores: &mut Scores,
    replicas: usize,
    weight: f64,
    load: &dyn LoadView,
    query: &QueryKey<'_>,
) {
    let replicas = replicas.min(MAX_REPLICAS);
    let mass: f64 = (0..replicas)
        .map(|r| scores.votes(r) + scores.fallback(r))
        .sum();
    let mass = if mass > 0.0 { mass } else { 1.0 };
    let mut rest = live_mask(load, replicas);
    while rest != 0 {
        let r = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if let Some(m) = load.cached(r, query.term_hashes) {
            scores.add_vote(r, weight * mass * m.share());
        }
    }
}

/// Per-replica scores of one query. About 1 KiB; lives on the stack.
#[derive(Clone, Debug)]
pub struct Scores {
    votes: [f64; MAX_REPLICAS],
    fallback: [f64; MAX_REPLICAS],
}

impl Default for Scores {
    fn default() -> Self {
        Scores::new()
    }
}

impl Scores {
    /// All zero.
    #[inline]
    pub fn new() -> Self {
        Scores {
            votes: [0.0; MAX_REPLICAS],
            fallback: [0.0; MAX_REPLICAS],
        }
    }

    /// Adds a real vote of `weight` for `replica` (which must be below [`MAX_REPLICAS`]).
    #[inline]
    pub fn add_vote(&mut self, replica: usize, weight: f64) {
        self.votes[replica] += weight;
    }

    /// Adds a stand-in vote of `weight` for `replica`; stand-in votes rank below any
    /// difference in real votes.
    #[inline]
    pub fn add_fallback(&mut self, replica: usize, weight: f64) {
        self.fallback[replica] += weight;
    }

    /// Summed real votes of `replica`.
    pub fn votes(&self, replica: usize) -> f64 {
        self.votes[replica]
    }

    /// Summed stand-in votes of `replica`.
    pub fn fallback(&self, replica: usize) -> f64 {
        self.fallback[replica]
    }

    /// The replicas below `replicas` whose real votes are positive and reach `share` of
    /// the top real vote, as a bit mask; every replica (`u64::MAX`) when no real vote
    /// was cast (no placement to keep).
    pub fn near_top(&self, replicas: usize, share: f64) -> u64 {
        let n = replicas.min(MAX_REPLICAS);
        let top = self.votes[..n].iter().copied().fold(0.0, f64::max);
        if top <= 0.0 {
            return u64::MAX;
        }
        (0..n)
            .filter(|&r| self.votes[r] > 0.0 && self.votes[r] >= share * top)
            .fold(0, |m, r| m | 1 << r)
    }

    /// Whether `replica` received any positive vote.
    #[inline]
    pub fn is_positive(&self, replica: usize) -> bool {
        self.votes[replica] > 0.0 || self.fallback[replica] > 0.0
    }

    /// Whether `a` ranks strictly above `b`: higher `(votes, fallback)`, then lower index.
    #[inline]
    pub fn ranks_above(&self, a: usize, b: usize) -> bool {
        let (va, vb) = (self.votes[a], self.votes[b]);
        if va != vb {
            return va > vb;
        }
        let (fa, fb) = (self.fallback[a], self.fallback[b]);
        if fa != fb {
            return fa > fb;
        }
        a < b
    }
}

/// Something that can cast one term's votes.
pub trait VoteSource {
    /// Adds the votes of the term with hash `term_hash` to `scores`.
    fn add_votes(&self, term_hash: u64, scores: &mut Scores);

    /// Scores a whole query: the votes of each of its terms.
    #[inline]
    fn score(&self, term_hashes: &[u64]) -> Scores {
        let mut scores = Scores::new();
        for &h in term_hashes {
            self.add_votes(h, &mut scores);
        }
        scores
    }
}

/// Picks a replica from `scores` by the bounded-load vote rule (module docs), among the
/// live replicas below `replicas` (`None` when none is live); `homes = 0` turns the
/// choice among homes off.
#[inline]
pub fn pick(
    scores: &Scores,
    replicas: usize,
    eps: f64,
    homes: f64,
    load: &dyn LoadView,
    rng: &mut Rng,
) -> Option<Decision> {
    let live = live_mask(load, replicas);
    if live == 0 {
        return None;
    }
    let cap = load_cap(eps, load.total(), live.count_ones() as usize);
    let (top, best) = rank(scores, live, cap, load);
    if let Some(b) = best {
        let chosen = if homes > 0.0 {
            least_loaded_home(scores, live, b, homes * scores.votes(b), cap, load)
        } else {
            b
        };
        let reason = if top != Some(b) {
            overflow_reason(top, load)
        } else if chosen != b {
            Reason::Home
        } else {
            Reason::Vote
        };
        return Some(Decision::to(chosen, reason));
    }
    let reason = if top.is_some() {
        overflow_reason(top, load)
    } else {
        Reason::NoVote
    };
    let under = under_cap_mask(load, live, cap);
    let r = if under != 0 {
        random_member(under, rng)
    } else {
        least_loaded_member(load, live)
    };
    Some(Decision::to(r, reason))
}

/// The top-ranked replica below `replicas` with a positive score, whatever the loads: a
/// query's first choice before the load bound (ties keep the lower index, as in [`pick`]).
#[inline]
pub fn top_ranked(scores: &Scores, replicas: usize) -> Option<usize> {
    let mut top: Option<usize> = None;
    for r in 0..replicas.min(MAX_REPLICAS) {
        if scores.is_positive(r) && top.is_none_or(|t| scores.ranks_above(r, t)) {
            top = Some(r);
        }
    }
    top
}

/// The top-ranked replica among those in `live` with a positive score, and the top-ranked
/// one under `cap` (ties keep the lower index).
#[inline]
pub(crate) fn rank(
    scores: &Scores,
    live: u64,
    cap: u64,
    load: &dyn LoadView,
) -> (Option<usize>, Option<usize>) {
    let mut top: Option<usize> = None;
    let mut best: Option<usize> = None;
    let mut rest = live;
    while rest != 0 {
        let r = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if !scores.is_positive(r) {
            continue;
        }
        // Ascending order and strict comparison: ties keep the lower index.
        if top.is_none_or(|t| scores.ranks_above(r, t)) {
            top = Some(r);
        }
        if best.is_none_or(|b| scores.ranks_above(r, b)) && load.load(r) < cap {
            best = Some(r);
        }
    }
    (top, best)
}

/// Whether `replica` is one of a query's homes: under `cap`, with real votes of at least
/// `floor` (the home share times the best replica's votes; none when `floor` is 0).
#[inline]
pub(crate) fn is_home(
    scores: &Scores,
    replica: usize,
    floor: f64,
    cap: u64,
    load: &dyn LoadView,
) -> bool {
    floor > 0.0 && scores.votes(replica) >= floor && load.load(replica) < cap
}

/// Why a query left its top-ranked replica `top`: [`Reason::Stalled`] when the stall guard
/// counts it full (its load reads `u64::MAX`, which only the guard reports), else
/// [`Reason::Overflow`].
#[inline]
fn overflow_reason(top: Option<usize>, load: &dyn LoadView) -> Reason {
    match top {
        Some(t) if load.load(t) == u64::MAX => Reason::Stalled,
        _ => Reason::Overflow,
    }
}

/// Among the live replicas under `cap` whose real votes reach `floor`, the least loaded:
/// by `(requests in flight, load)` when the view knows requests in flight, by load
/// otherwise (`best` unless another is strictly less loaded; ties keep the lower index).
#[inline]
fn least_loaded_home(
    scores: &Scores,
    live: u64,
    best: usize,
    floor: f64,
    cap: u64,
    load: &dyn LoadView,
) -> usize {
    if floor <= 0.0 {
        return best;
    }
    let busy = |r: usize| (load.in_flight(r).unwrap_or(0), load.load(r));
    let (mut home, mut home_busy) = (best, busy(best));
    let mut rest = live & !(1u64 << best);
    while rest != 0 {
        let r = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if is_home(scores, r, floor, cap, load) {
            let b = busy(r);
            if b < home_busy {
                home = r;
                home_busy = b;
            }
        }
    }
    home
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;

    #[test]
    fn cache_evidence_adds_the_held_share_of_the_vote_mass() {
        use crate::load::{Signaled, Signals};
        use crate::shadow::{FixedOwners, Owner, Shadow};
        let h = |t: &str| data::hash::term_hash(t);
        let terms = [(h("a"), 300), (h("b"), 100)];
        let shadow = Shadow::from_terms(terms, 21, 1_000, eviction::EvictionKind::Lru);
        // Replica 1 holds `a` (300 of the query's 400 bytes), replica 2 holds `b`.
        shadow.access(1, Owner { id: 1, since: 0 }, &[h("a")], |_| true);
        shadow.access(2, Owner { id: 2, since: 0 }, &[h("b")], |_| true);
        let base = StaticLoad::with_live(vec![0; 4], vec![true, true, false, true]);
        let view = Signaled::new(
            &base,
            Signals {
                latency: None,
                shadow: Some((&shadow, &FixedOwners)),
            },
        );
        let query = [h("a"), h("b")];
        let key = QueryKey::new(0, &query);
        // Vote mass 4 (3 real + 1 stand-in); weight 0.5: replica 1 gains 0.5 · 0.75 · 4.
        let mut s = scores(&[(0, 3.0)], &[(3, 1.0)]);
        add_cache_evidence(&mut s, 4, 0.5, &view, &key);
        assert_eq!((s.votes(0), s.votes(1), s.votes(3)), (3.0, 1.5, 0.0));
        assert_eq!(s.votes(2), 0.0, "a dead replica gains nothing");
        // Without votes the mass is 1; without shadow caches nothing is added.
        let mut s = Scores::new();
        add_cache_evidence(&mut s, 4, 2.0, &view, &key);
        assert_eq!(s.votes(1), 1.5);
        let mut s = scores(&[(0, 3.0)], &[]);
        add_cache_evidence(&mut s, 4, 1.0, &base, &key);
        assert_eq!((s.votes(0), s.votes(1)), (3.0, 0.0));
    }

    fn scores(votes: &[(usize, f64)], fallback: &[(usize, f64)]) -> Scores {
        let mut s = Scores::new();
        for &(r, w) in votes {
            s.add_vote(r, w);
        }
        for &(r, w) in fallback {
            s.add_fallback(r, w);
        }
        s
    }

    #[test]
    fn near_top_keeps_the_replicas_whose_real_votes_reach_the_share() {
        let s = scores(&[(0, 10.0), (1, 6.0), (2, 2.0)], &[(3, 50.0)]);
        assert_eq!(s.near_top(4, 0.5), 0b011);
        assert_eq!(s.near_top(4, 0.0), 0b111, "positive real votes only");
        assert_eq!(s.near_top(4, 1.0), 0b001);
        assert_eq!(s.near_top(2, 0.0), 0b011, "below `replicas` only");
        let stand_in_only = scores(&[], &[(1, 5.0)]);
        assert_eq!(stand_in_only.near_top(4, 0.5), u64::MAX, "nothing placed");
    }

    #[test]
    fn top_vote_under_cap_wins() {
        let s = scores(&[(1, 3.0), (2, 5.0)], &[]);
        let d = pick(&s, 4, 0.05, 0.0, &StaticLoad::idle(4), &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(2, Reason::Vote));
    }

    #[test]
    fn ties_go_to_the_lower_index_and_fallback_breaks_vote_ties() {
        let s = scores(&[(1, 3.0), (2, 3.0)], &[]);
        let d = pick(&s, 4, 0.05, 0.0, &StaticLoad::idle(4), &mut Rng::new(1)).unwrap();
        assert_eq!(d.replica, 1);
        let s = scores(&[(1, 3.0), (2, 3.0)], &[(2, 1e-9)]);
        let d = pick(&s, 4, 0.05, 0.0, &StaticLoad::idle(4), &mut Rng::new(1)).unwrap();
        assert_eq!(d.replica, 2);
        // A huge fallback never beats a tiny real vote.
        let s = scores(&[(1, 1e-30)], &[(2, 1e30)]);
        let d = pick(&s, 4, 0.05, 0.0, &StaticLoad::idle(4), &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(1, Reason::Vote));
    }

    #[test]
    fn over_cap_goes_to_next_ranked_then_jumps() {
        // total 40, 4 live, eps 0: cap = ceil(41 / 4) = 11.
        let load = StaticLoad::new(vec![5, 5, 20, 10]);
        let s = scores(&[(2, 5.0), (3, 4.0), (0, 1.0)], &[]);
        let d = pick(&s, 4, 0.0, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(3, Reason::Overflow));
        let s = scores(&[(2, 5.0)], &[]);
        let d = pick(&s, 4, 0.0, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d.reason, Reason::Overflow);
        assert!(d.replica != 2);
        let d = pick(&Scores::new(), 4, 0.0, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d.reason, Reason::NoVote);
        assert!(d.replica != 2);
    }

    #[test]
    fn a_top_vote_full_by_the_stall_guard_overflows_as_stalled() {
        // Replica 2 reads u64::MAX, which only the stall guard reports.
        let load = StaticLoad::new(vec![1, 1, u64::MAX, 1]);
        let s = scores(&[(2, 5.0), (3, 4.0)], &[]);
        let d = pick(&s, 4, 0.05, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(3, Reason::Stalled));
        assert!(d.reason.is_overflow() && Reason::Overflow.is_overflow());
        assert!(!Reason::Home.is_overflow() && !Reason::Vote.is_overflow());
        // Only the top vote at u64::MAX: the random jump is `stall-guard` too.
        let s = scores(&[(2, 5.0)], &[]);
        let d = pick(&s, 4, 0.05, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d.reason, Reason::Stalled);
    }

    #[test]
    fn dead_replicas_do_not_rank() {
        let load = StaticLoad::with_live(vec![0; 4], vec![true, true, false, true]);
        let s = scores(&[(2, 5.0), (3, 4.0)], &[]);
        let d = pick(&s, 4, 0.05, 0.0, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(3, Reason::Vote));
        let none = StaticLoad::with_live(vec![0; 4], vec![false; 4]);
        assert_eq!(pick(&s, 4, 0.05, 0.0, &none, &mut Rng::new(1)), None);
    }

    #[test]
    fn the_least_loaded_home_takes_the_query() {
        // Replica 1 has the top vote; replica 3 votes 90% as much and is less loaded (total
        // 13, cap ceil(1.05·14/4) = 4: both are under it); replica 0 is idle but no home.
        let s = scores(&[(1, 10.0), (3, 9.0), (0, 5.0)], &[]);
        let load = StaticLoad::new(vec![0, 3, 9, 1]);
        let d = pick(&s, 4, 0.05, 0.85, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(d, Decision::to(3, Reason::Home));
        // 0.95: replica 3 is not a home; off: the top vote as before.
        assert_eq!(
            pick(&s, 4, 0.05, 0.95, &load, &mut Rng::new(1))
                .unwrap()
                .replica,
            1
        );
        assert_eq!(
            pick(&s, 4, 0.05, 0.0, &load, &mut Rng::new(1))
                .unwrap()
                .replica,
            1
        );
        // A home at or over the cap does not take it: total 18, cap ceil(1.05·19/4) = 5.
        let load = StaticLoad::new(vec![0, 4, 9, 5]);
        assert_eq!(
            pick(&s, 4, 0.05, 0.85, &load, &mut Rng::new(1))
                .unwrap()
                .replica,
            1
        );
        // Stand-in votes never make a home.
        let s = scores(&[(1, 10.0)], &[(3, 1e9)]);
        let load = StaticLoad::new(vec![4, 2, 4, 0]);
        assert_eq!(
            pick(&s, 4, 0.05, 0.85, &load, &mut Rng::new(1))
                .unwrap()
                .replica,
            1
        );
    }

    /// A static load that also reports requests in flight, as the server's and the queueing
    /// simulator's views do.
    struct WithInFlight {
        base: StaticLoad,
        in_flight: Vec<u64>,
    }

    impl LoadView for WithInFlight {
        fn replicas(&self) -> usize {
            self.base.replicas()
        }
        fn load(&self, replica: usize) -> u64 {
            self.base.load(replica)
        }
        fn total(&self) -> u64 {
            self.base.total()
        }
        fn in_flight(&self, replica: usize) -> Option<u64> {
            self.in_flight.get(replica).copied()
        }
    }

    #[test]
    fn with_time_the_home_with_fewest_requests_in_flight_takes_the_query() {
        // Homes 1 (top vote) and 3; total 13, cap ceil(1.05·14/4) = 4, both under it.
        let s = scores(&[(1, 10.0), (3, 9.0), (0, 5.0)], &[]);
        let view = |loads: Vec<u64>, in_flight: Vec<u64>| WithInFlight {
            base: StaticLoad::new(loads),
            in_flight,
        };
        let pick_with = |v: &WithInFlight| pick(&s, 4, 0.05, 0.85, v, &mut Rng::new(1)).unwrap();
        // Replica 1 has the lower window load but 5 requests waiting; replica 3 has 1.
        let d = pick_with(&view(vec![0, 1, 9, 3], vec![0, 5, 0, 1]));
        assert_eq!(d, Decision::to(3, Reason::Home));
        // Without requests in flight (the trace simulator) the window load decides.
        let plain = StaticLoad::new(vec![0, 1, 9, 3]);
        assert_eq!(
            pick(&s, 4, 0.05, 0.85, &plain, &mut Rng::new(1))
                .unwrap()
                .replica,
            1
        );
        // Equal requests in flight: the load breaks the tie.
        assert_eq!(
            pick_with(&view(vec![0, 3, 9, 1], vec![0, 2, 0, 2])).replica,
            3
        );
        assert_eq!(
            pick_with(&view(vec![0, 1, 9, 3], vec![0, 2, 0, 2])).replica,
            1
        );
        // Idle, but at the cap (total 18, cap 5): not a home for this query.
        assert_eq!(
            pick_with(&view(vec![0, 4, 9, 5], vec![0, 5, 0, 0])).replica,
            1
        );
        // Replica 0, the idlest, is no home: its votes are under 85% of the top.
        assert_ne!(
            pick_with(&view(vec![0, 1, 9, 3], vec![0, 5, 9, 1])).replica,
            0
        );
    }
}
