//! Rolling a new voting table in gradually: a [`RampedTable`] scores each query wholly from
//! either the old or the new table, and moves queries over a slice at a time as `progress`
//! goes from 0 to 1.
//!
//! # The rule
//!
//! A query's *key term* is the term whose vote weighs most in the new table: the largest
//! real vote of any of its terms, then (for a query none of whose terms has a real vote in
//! the new table) the largest stand-in vote, then the smaller term hash ([`key_term`]). The
//! query is scored entirely by the new table once [`follows_new`]`(key, progress)`, that is
//! once `unit_interval(key) < progress`, and entirely by the old table before that.
//!
//! * **Coherent:** a query always goes where one of the two tables would send it, never to a
//!   replica that only a mix of the two votes picks.
//! * **Grouped:** the queries that share a key term (the queries the new table sends where
//!   that term lives) move at the same moment.
//! * **Monotone and coordination-free:** the key depends on the query and the new table
//!   only, so the set of migrated queries only grows with `progress`, and every balancer
//!   that holds the same two tables agrees on it. At progress 0 the scores are exactly the
//!   old table's, at 1 exactly the new table's.
//!
//! DESIGN.md asks for a gradual roll-out because an instant switch sends every query to a
//! replica whose cache holds the wrong lists at once (the same idea as consistent hashing's
//! minimal movement, Karger et al. 1997, applied over time). What the ramp costs is measured
//! by `ballot eval --switch-table` (`cache_sim::sim::switch`): any partial switch makes the
//! caches hold both tables' working sets (a term shared by queries on both sides is needed on
//! both sides), so a ramp pays a higher miss ratio for as long as it lasts, while the
//! instant switch's cold spike lasts about one cache refill. The ramp lowers the peak when it
//! is about one refill long (the simulator's default, 2,000 queries; the HTTP balancer's
//! `ramp_queries`); a ramp ten times longer raises it (docs/operations.md, "Switching tables
//! live", shows how to measure both with `ballot eval --switch-table`).
//!
//! The clock counts queries: [`RampPolicy`] is the routing policy of a ramp in progress, and
//! its progress is the number of queries it has routed since the switch over the ramp's
//! length (`ramp_queries` in the HTTP balancer, `--ramp` in `ballot eval --switch-table`),
//! so the simulator and the server roll a table in by the same rule and the same clock, and
//! ramps are reproducible in tests. [`RampedTable::at`] takes any progress. A reload that arrives during a ramp freezes the
//! current mix ([`RampedTable::frozen`]) and ramps from it to the newest table: each query
//! then follows the newest table by its key there, or else the frozen ramp by its key in the
//! table that ramp was rolling in.
//!
//! Scoring reads two tables and allocates nothing; the pick is [`crate::policy::vote::pick`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use data::hash::unit_interval;
use data::rng::Rng;

use crate::load::{LoadView, MAX_REPLICAS};
use crate::policy::vote::{pick, Scores, VoteSource};
use crate::policy::{Decision, PolicyKind, QueryKey, RoutingPolicy};

/// A shareable vote source (a compiled table, or a frozen ramp).
pub type SharedVotes = Arc<dyn VoteSource + Send + Sync>;

/// Clamps `progress` to `[0, 1]`; NaN counts as 0 (nothing migrated).
#[inline]
fn clamp_progress(progress: f64) -> f64 {
    if progress >= 1.0 {
        1.0
    } else if progress > 0.0 {
        progress
    } else {
        0.0
    }
}

/// Whether a query whose key term has hash `key_hash` follows the new table at `progress`.
#[inline]
pub fn follows_new(key_hash: u64, progress: f64) -> bool {
    unit_interval(key_hash) < progress
}

/// The weight of the strongest vote of the term `term_hash` in `votes`, as `(real,
/// stand-in)`: a term missing from a table has a stand-in vote only, a term that abstains
/// has neither.
#[inline]
fn strongest_vote(votes: &dyn VoteSource, term_hash: u64) -> (f64, f64) {
    let mut scores = Scores::new();
    votes.add_votes(term_hash, &mut scores);
    let (mut real, mut stand_in) = (0.0f64, 0.0f64);
    for r in 0..MAX_REPLICAS {
        real = real.max(scores.votes(r));
        stand_in = stand_in.max(scores.fallback(r));
    }
    (real, stand_in)
}

/// The key term of the query `term_hashes` in the table `new`: the term with the strongest
/// real vote, then the strongest stand-in vote, then the smaller hash. `None` for a query
/// without terms.
#[inline]
pub fn key_term(new: &dyn VoteSource, term_hashes: &[u64]) -> Option<u64> {
    let mut best: Option<(f64, f64, u64)> = None;
    for &h in term_hashes {
        let (real, stand_in) = strongest_vote(new, h);
        let better = match best {
            None => true,
            Some((br, bs, bh)) => {
                real > br || (real == br && (stand_in > bs || (stand_in == bs && h < bh)))
            }
        };
        if better {
            best = Some((real, stand_in, h));
        }
    }
    best.map(|(_, _, h)| h)
}

/// A switch from an old vote source to a new one.
#[derive(Clone)]
pub struct RampedTable {
    old: SharedVotes,
    new: SharedVotes,
}

impl std::fmt::Debug for RampedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RampedTable").finish_non_exhaustive()
    }
}

impl RampedTable {
    /// A ramp from `old` to `new`.
    pub fn new(old: SharedVotes, new: SharedVotes) -> Self {
        RampedTable { old, new }
    }

    /// The table being replaced.
    pub fn old(&self) -> &SharedVotes {
        &self.old
    }

    /// The table being rolled in.
    pub fn new_votes(&self) -> &SharedVotes {
        &self.new
    }

    /// The vote source at `progress` (clamped to `[0, 1]`): 0 is all old, 1 is all new.
    #[inline]
    pub fn at(&self, progress: f64) -> RampAt<'_> {
        RampAt {
            ramp: self,
            progress: clamp_progress(progress),
        }
    }

    /// The ramp at `progress`, frozen as a vote source of its own (the old side of a ramp
    /// that starts before this one finished).
    pub fn frozen(&self, progress: f64) -> SharedVotes {
        Arc::new(Frozen {
            ramp: self.clone(),
            progress: clamp_progress(progress),
        })
    }
}

/// The `table` policy while a ramp runs: the old table until routed query `at`, then a
/// [`RampedTable`] whose progress grows from 0 to 1 over the next `len` routed queries
/// (`len = 0`: an instant switch at `at`), picked by the bounded-load vote rule.
///
/// The clock is the policy's own count of `route` calls: one per query in the simulators;
/// in the HTTP balancer a retry is routed (and counted) again, a small overcount.
pub struct RampPolicy {
    ramp: RampedTable,
    replicas: usize,
    eps: f64,
    homes: f64,
    at: u64,
    len: u64,
    routed: AtomicU64,
}

impl std::fmt::Debug for RampPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RampPolicy")
            .field("replicas", &self.replicas)
            .field("eps", &self.eps)
            .field("at", &self.at)
            .field("len", &self.len)
            .field("routed", &self.routed())
            .finish_non_exhaustive()
    }
}

impl RampPolicy {
    /// A switch by `ramp` at routed query `at`, ramped over `len` queries, over `replicas`
    /// replicas with slack `eps` and home share `homes` (see [`crate::policy::vote`]).
    pub fn new(
        ramp: RampedTable,
        replicas: usize,
        eps: f64,
        homes: f64,
        at: u64,
        len: u64,
    ) -> Self {
        RampPolicy {
            ramp,
            replicas,
            eps,
            homes,
            at,
            len,
            routed: AtomicU64::new(0),
        }
    }

    /// The progress after `routed` queries: 0 before the switch, 1 once the ramp is done.
    #[inline]
    pub fn progress_at(&self, routed: u64) -> f64 {
        if routed < self.at {
            0.0
        } else if self.len == 0 {
            1.0
        } else {
            ((routed - self.at) as f64 / self.len as f64).min(1.0)
        }
    }

    /// The progress now.
    pub fn progress(&self) -> f64 {
        self.progress_at(self.routed())
    }

    /// Queries routed so far.
    pub fn routed(&self) -> u64 {
        self.routed.load(Ordering::Relaxed)
    }

    /// The ramp's length in queries.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the ramp is instant.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The two tables.
    pub fn ramp(&self) -> &RampedTable {
        &self.ramp
    }

    /// The current mix, frozen as a vote source (the old side of a ramp that starts before
    /// this one finished).
    pub fn frozen(&self) -> SharedVotes {
        self.ramp.frozen(self.progress())
    }
}

impl RoutingPolicy for RampPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Table
    }

    #[inline]
    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let n = self.routed.fetch_add(1, Ordering::Relaxed);
        let scores = self.ramp.at(self.progress_at(n)).score(query.term_hashes);
        pick(&scores, self.replicas, self.eps, self.homes, load, rng)
    }

    /// The replicas whose votes reach `share` of the top vote, by the side of the ramp
    /// that scores the query now.
    fn alternatives(&self, query: &QueryKey<'_>, share: f64) -> u64 {
        self.ramp
            .at(self.progress())
            .score(query.term_hashes)
            .near_top(self.replicas, share)
    }
}

/// A [`RampedTable`] at one progress value.
#[derive(Clone, Copy, Debug)]
pub struct RampAt<'a> {
    ramp: &'a RampedTable,
    progress: f64,
}

impl RampAt<'_> {
    /// The (clamped) progress.
    pub fn progress(&self) -> f64 {
        self.progress
    }

    /// Whether the query `term_hashes` is scored by the new table (module docs).
    #[inline]
    pub fn query_follows_new(&self, term_hashes: &[u64]) -> bool {
        if self.progress <= 0.0 {
            false
        } else if self.progress >= 1.0 {
            true
        } else {
            key_term(&*self.ramp.new, term_hashes).is_some_and(|k| follows_new(k, self.progress))
        }
    }

    /// The table that scores the query `term_hashes`.
    #[inline]
    pub fn side(&self, term_hashes: &[u64]) -> &dyn VoteSource {
        if self.query_follows_new(term_hashes) {
            &*self.ramp.new
        } else {
            &*self.ramp.old
        }
    }
}

impl VoteSource for RampAt<'_> {
    /// The votes of the term as a query of its own (its own key: it follows the new table
    /// once `unit_interval(term_hash) < progress`).
    #[inline]
    fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
        self.side(&[term_hash]).add_votes(term_hash, scores);
    }

    /// The whole query's votes, all from the table its key term follows.
    #[inline]
    fn score(&self, term_hashes: &[u64]) -> Scores {
        self.side(term_hashes).score(term_hashes)
    }
}

/// A ramp frozen at one progress value.
struct Frozen {
    ramp: RampedTable,
    progress: f64,
}

impl VoteSource for Frozen {
    #[inline]
    fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
        self.ramp.at(self.progress).add_votes(term_hash, scores);
    }

    #[inline]
    fn score(&self, term_hashes: &[u64]) -> Scores {
        self.ramp.at(self.progress).score(term_hashes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;
    use crate::policy::Reason;
    use data::hash::mix64;
    use std::collections::HashMap;

    const R: usize = 8;

    /// Every term votes for one fixed replica.
    struct Fixed(usize);

    impl VoteSource for Fixed {
        fn add_votes(&self, _term_hash: u64, scores: &mut Scores) {
            scores.add_vote(self.0, 1.0);
        }
    }

    /// A table: listed terms cast their real votes; any other term casts a stand-in vote
    /// for `hash % R` weighing `hash % 100 + 1`, like a compiled table's missing term.
    struct Map(HashMap<u64, Vec<(usize, f64)>>);

    impl VoteSource for Map {
        fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
            match self.0.get(&term_hash) {
                Some(votes) => {
                    for &(r, w) in votes {
                        scores.add_vote(r, w);
                    }
                }
                None => {
                    let r = (term_hash % R as u64) as usize;
                    scores.add_fallback(r, (term_hash % 100 + 1) as f64);
                }
            }
        }
    }

    /// A random table over `terms`: most terms one vote, some two, some missing (stand-in),
    /// a few abstaining.
    fn random_map(terms: &[u64], seed: u64) -> Arc<Map> {
        let mut rng = Rng::new(seed);
        let mut m = HashMap::new();
        for &h in terms {
            match rng.below(10) {
                0 => {}
                1 => {
                    m.insert(h, Vec::new());
                }
                2 | 3 => {
                    let a = rng.below(R as u64) as usize;
                    let b = (a + 1 + rng.below(R as u64 - 1) as usize) % R;
                    m.insert(h, vec![(a, 1.0 + rng.unit()), (b, rng.unit())]);
                }
                _ => {
                    m.insert(h, vec![(rng.below(R as u64) as usize, 1.0 + rng.unit())]);
                }
            }
        }
        Arc::new(Map(m))
    }

    fn terms(n: u64) -> Vec<u64> {
        (0..n).map(mix64).collect()
    }

    /// Random queries of 1 to 4 terms drawn from `terms`.
    fn queries(terms: &[u64], n: usize, seed: u64) -> Vec<Vec<u64>> {
        let mut rng = Rng::new(seed);
        (0..n)
            .map(|_| {
                let len = 1 + rng.below(4) as usize;
                (0..len)
                    .map(|_| terms[rng.below(terms.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    fn same(a: &Scores, b: &Scores) -> bool {
        (0..MAX_REPLICAS).all(|r| a.votes(r) == b.votes(r) && a.fallback(r) == b.fallback(r))
    }

    fn ramp(old: usize, new: usize) -> RampedTable {
        RampedTable::new(Arc::new(Fixed(old)), Arc::new(Fixed(new)))
    }

    fn route_one(r: &RampedTable, h: u64, p: f64) -> usize {
        let hashes = [h];
        let q = QueryKey::new(h, &hashes);
        let scores = r.at(p).score(q.term_hashes);
        let d = pick(
            &scores,
            4,
            0.05,
            0.0,
            &StaticLoad::idle(4),
            &mut Rng::new(1),
        )
        .unwrap();
        assert_eq!(d.reason, Reason::Vote);
        usize::from(d.replica)
    }

    #[test]
    fn ends_are_exactly_one_table() {
        let t = terms(500);
        let (old, new) = (random_map(&t, 1), random_map(&t, 2));
        let r = RampedTable::new(old.clone(), new.clone());
        for q in queries(&t, 2_000, 3) {
            for p in [0.0, -1.0, f64::NAN] {
                assert!(same(&r.at(p).score(&q), &old.score(&q)), "{q:?} at {p}");
            }
            for p in [1.0, 7.0, f64::INFINITY] {
                assert!(same(&r.at(p).score(&q), &new.score(&q)), "{q:?} at {p}");
            }
        }
        let r = ramp(1, 2);
        for h in terms(1000) {
            assert_eq!(route_one(&r, h, 0.0), 1);
            assert_eq!(route_one(&r, h, 1.0), 2);
            assert_eq!(route_one(&r, h, f64::NAN), 1);
            assert_eq!(route_one(&r, h, 7.0), 2);
        }
    }

    #[test]
    fn a_query_is_never_scored_from_a_mix() {
        let t = terms(300);
        let (old, new) = (random_map(&t, 4), random_map(&t, 5));
        let r = RampedTable::new(old.clone(), new.clone());
        let mut both_kinds = [0usize; 2];
        for (i, q) in queries(&t, 4_000, 6).iter().enumerate() {
            let p = (i % 101) as f64 / 100.0;
            let s = r.at(p).score(q);
            let follows = r.at(p).query_follows_new(q);
            let want = if follows { new.score(q) } else { old.score(q) };
            assert!(same(&s, &want), "{q:?} at {p}");
            let k = key_term(&*new, q).unwrap();
            assert_eq!(follows, follows_new(k, p), "{q:?} at {p}");
            if q.len() > 1 && !same(&old.score(q), &new.score(q)) {
                both_kinds[usize::from(follows)] += 1;
            }
        }
        assert!(both_kinds.iter().all(|&n| n > 100), "{both_kinds:?}");
    }

    #[test]
    fn migrated_queries_only_grow_and_track_progress() {
        let t = terms(20_000);
        let (old, new) = (random_map(&t, 7), random_map(&t, 8));
        let r = RampedTable::new(old, new);
        // Queries with distinct key terms, so their keys are independent.
        let qs: Vec<Vec<u64>> = t.chunks(2).map(<[u64]>::to_vec).collect();
        let mut before = vec![false; qs.len()];
        for step in 0..=20 {
            let p = f64::from(step) / 20.0;
            let mut moved = 0usize;
            for (i, q) in qs.iter().enumerate() {
                let now = r.at(p).query_follows_new(q);
                assert!(!before[i] || now, "query {i} went back at {p}");
                before[i] = now;
                moved += usize::from(now);
            }
            let share = moved as f64 / qs.len() as f64;
            assert!((share - p).abs() < 0.02, "progress {p}: share {share}");
        }
    }

    #[test]
    fn queries_with_the_same_key_term_move_together() {
        let t = terms(50);
        let hot = t[0];
        let mut m: HashMap<u64, Vec<(usize, f64)>> =
            t.iter().map(|&h| (h, vec![(1, 1.0)])).collect();
        m.insert(hot, vec![(3, 5.0)]);
        let new = Arc::new(Map(m));
        let r = RampedTable::new(Arc::new(Fixed(0)), new.clone());
        let qs: Vec<Vec<u64>> = t[1..].iter().map(|&h| vec![h, hot]).collect();
        for q in &qs {
            assert_eq!(key_term(&*new, q), Some(hot));
        }
        let u = unit_interval(hot);
        for p in [u, u + 1e-9] {
            let moved: Vec<bool> = qs.iter().map(|q| r.at(p).query_follows_new(q)).collect();
            assert!(moved.iter().all(|&m| m == (p > u)), "at {p}: {moved:?}");
        }
    }

    #[test]
    fn the_key_is_the_strongest_new_vote() {
        let [a, b, c, d] = [11u64, 22, 33, 44].map(mix64);
        let mut m = HashMap::new();
        m.insert(a, vec![(0, 1.0), (1, 2.5)]);
        m.insert(b, vec![(2, 2.0)]);
        m.insert(c, Vec::new()); // abstains
        let new = Map(m);
        assert_eq!(key_term(&new, &[b, a, c]), Some(a));
        assert_eq!(key_term(&new, &[b, c]), Some(b));
        // A real vote beats any stand-in vote; among stand-ins the heavier one wins.
        assert_eq!(key_term(&new, &[d, b]), Some(b));
        let (x, y) = (mix64(55), mix64(66));
        let heavier = match (x % 100).cmp(&(y % 100)) {
            std::cmp::Ordering::Greater => x,
            std::cmp::Ordering::Less => y,
            std::cmp::Ordering::Equal => x.min(y),
        };
        assert_eq!(key_term(&new, &[x, y, c]), Some(heavier));
        // Equal votes: the smaller hash.
        let mut m = HashMap::new();
        m.insert(a, vec![(0, 1.0)]);
        m.insert(b, vec![(5, 1.0)]);
        assert_eq!(key_term(&Map(m), &[a, b]), Some(a.min(b)));
        assert_eq!(key_term(&new, &[c]), Some(c));
        assert_eq!(key_term(&new, &[]), None);
        let r = RampedTable::new(Arc::new(Fixed(0)), Arc::new(new));
        assert!(same(&r.at(0.5).score(&[]), &Scores::new()));
    }

    #[test]
    fn a_lone_term_follows_new_exactly_below_progress() {
        let r = ramp(0, 1);
        for h in terms(500) {
            let u = unit_interval(h);
            assert_eq!(route_one(&r, h, u), 0, "at u the term has not moved yet");
            assert_eq!(route_one(&r, h, u + 1e-9), 1);
            let mut s = Scores::new();
            r.at(u + 1e-9).add_votes(h, &mut s);
            assert_eq!((s.votes(0), s.votes(1)), (0.0, 1.0));
        }
    }

    #[test]
    fn frozen_ramp_is_the_old_side_of_the_next() {
        let t = terms(400);
        let (a, b, c) = (random_map(&t, 9), random_map(&t, 10), random_map(&t, 11));
        let first = RampedTable::new(a.clone(), b.clone());
        let second = RampedTable::new(first.frozen(0.5), c.clone());
        for q in queries(&t, 3_000, 12) {
            let first_side = if follows_new(key_term(&*b, &q).unwrap(), 0.5) {
                b.score(&q)
            } else {
                a.score(&q)
            };
            assert!(same(&second.at(0.0).score(&q), &first_side), "{q:?}");
            let mid = if follows_new(key_term(&*c, &q).unwrap(), 0.25) {
                c.score(&q)
            } else {
                first_side
            };
            assert!(same(&second.at(0.25).score(&q), &mid), "{q:?}");
            assert!(same(&second.at(1.0).score(&q), &c.score(&q)), "{q:?}");
        }
    }

    #[test]
    fn the_ramp_policy_counts_its_own_queries() {
        let p = RampPolicy::new(ramp(1, 2), 4, 0.05, 0.0, 10, 100);
        assert_eq!((p.progress_at(0), p.progress_at(9)), (0.0, 0.0));
        assert_eq!((p.progress_at(10), p.progress_at(60)), (0.0, 0.5));
        assert_eq!((p.progress_at(110), p.progress_at(u64::MAX)), (1.0, 1.0));
        let load = StaticLoad::idle(4);
        let mut rng = Rng::new(1);
        let mut to_new = Vec::new();
        for h in terms(120) {
            let hashes = [h];
            let d = p
                .route(&QueryKey::new(h, &hashes), &load, &mut rng)
                .unwrap();
            to_new.push(d.replica == 2);
        }
        assert_eq!(p.routed(), 120);
        assert_eq!(p.progress(), 1.0);
        // Before the switch every query follows the old table; the share that follows the
        // new one grows with the count.
        assert!(to_new[..10].iter().all(|&n| !n));
        let early = to_new[10..35].iter().filter(|&&n| n).count();
        let late = to_new[85..110].iter().filter(|&&n| n).count();
        assert!(early < late, "{early} early vs {late} late");
        let instant = RampPolicy::new(ramp(1, 2), 4, 0.05, 0.0, 3, 0);
        assert_eq!((instant.progress_at(2), instant.progress_at(3)), (0.0, 1.0));
    }

    #[test]
    fn late_binding_alternatives_follow_the_side_that_scores_the_query_now() {
        let p = RampPolicy::new(ramp(1, 2), 4, 0.05, 0.0, 1, 0);
        let (h, load) = (mix64(7), StaticLoad::idle(4));
        let hashes = [h];
        let q = QueryKey::new(h, &hashes);
        assert_eq!(
            p.alternatives(&q, 0.75),
            0b010,
            "before the switch: the old table"
        );
        p.route(&q, &load, &mut Rng::new(1)).unwrap();
        assert_eq!(p.alternatives(&q, 0.75), 0b100, "after it: the new one");
    }
}
