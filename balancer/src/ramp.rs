//! Rolling a new voting table in gradually: a [`RampedTable`] votes each term from either
//! the old or the new table, and moves terms over a slice at a time as `progress` goes from
//! 0 to 1.
//!
//! A term follows the new table once `unit_interval(term_hash) < progress`, so the set of
//! migrated terms only grows and every balancer agrees on it without coordination. Switching
//! all terms at once would send every query to a replica whose cache holds the wrong lists;
//! moving a slice at a time lets each replica's cache warm the terms it gains while it still
//! serves the rest (DESIGN.md, "a new table must be rolled out gradually"; the same idea as
//! consistent hashing's minimal movement, Karger et al. 1997, applied over time).
//!
//! The clock is the caller's: [`RampedTable::at`] takes the progress, so ramps are
//! reproducible in tests and simulations. A reload that arrives during a ramp freezes the
//! current mix ([`RampedTable::frozen`]) and ramps from it to the newest table.
//!
//! Scoring reads two tables and allocates nothing; the pick is [`crate::policy::vote::pick`].

use std::sync::Arc;

use data::hash::unit_interval;
use data::rng::Rng;

use crate::load::LoadView;
use crate::policy::vote::{pick, Scores, VoteSource};
use crate::policy::{Decision, QueryKey};

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

/// Whether the term with hash `term_hash` follows the new table at `progress`.
#[inline]
pub fn follows_new(term_hash: u64, progress: f64) -> bool {
    unit_interval(term_hash) < progress
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

    /// The mix at `progress`, frozen as a vote source of its own (the old side of a ramp
    /// that starts before this one finished).
    pub fn frozen(&self, progress: f64) -> SharedVotes {
        Arc::new(Frozen {
            ramp: self.clone(),
            progress: clamp_progress(progress),
        })
    }

    /// Routes `query` at `progress` by the bounded-load vote rule over `replicas` replicas.
    #[inline]
    pub fn route(
        &self,
        query: &QueryKey<'_>,
        progress: f64,
        replicas: usize,
        eps: f64,
        load: &dyn LoadView,
        rng: &mut Rng,
    ) -> Decision {
        let scores = self.at(progress).score(query.term_hashes);
        pick(&scores, replicas, eps, load, rng)
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
}

impl VoteSource for RampAt<'_> {
    #[inline]
    fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
        if follows_new(term_hash, self.progress) {
            self.ramp.new.add_votes(term_hash, scores);
        } else {
            self.ramp.old.add_votes(term_hash, scores);
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;
    use crate::policy::Reason;

    /// Every term votes for one fixed replica.
    struct Fixed(usize);

    impl VoteSource for Fixed {
        fn add_votes(&self, _term_hash: u64, scores: &mut Scores) {
            scores.add_vote(self.0, 1.0);
        }
    }

    fn ramp(old: usize, new: usize) -> RampedTable {
        RampedTable::new(Arc::new(Fixed(old)), Arc::new(Fixed(new)))
    }

    fn route_one(r: &RampedTable, h: u64, p: f64) -> usize {
        let hashes = [h];
        let q = QueryKey::new(h, &hashes);
        let d = r.route(&q, p, 4, 0.05, &StaticLoad::idle(4), &mut Rng::new(1));
        assert_eq!(d.reason, Reason::Vote);
        usize::from(d.replica)
    }

    #[test]
    fn ends_follow_one_table() {
        let r = ramp(1, 2);
        for h in (0..1000u64).map(data::hash::mix64) {
            assert_eq!(route_one(&r, h, 0.0), 1);
            assert_eq!(route_one(&r, h, 1.0), 2);
            assert_eq!(route_one(&r, h, f64::NAN), 1);
            assert_eq!(route_one(&r, h, 7.0), 2);
        }
    }

    #[test]
    fn migrated_share_tracks_progress_and_only_grows() {
        let r = ramp(0, 3);
        let hashes: Vec<u64> = (0..20_000u64).map(data::hash::mix64).collect();
        let mut before = vec![false; hashes.len()];
        for step in 0..=10 {
            let p = f64::from(step) / 10.0;
            let mut moved = 0usize;
            for (i, &h) in hashes.iter().enumerate() {
                let now = route_one(&r, h, p) == 3;
                assert!(!before[i] || now, "a migrated term went back at {p}");
                before[i] = now;
                moved += usize::from(now);
            }
            let share = moved as f64 / hashes.len() as f64;
            assert!((share - p).abs() < 0.02, "progress {p}: share {share}");
        }
    }

    #[test]
    fn a_term_follows_new_exactly_below_progress() {
        let r = ramp(0, 1);
        for h in (0..500u64).map(data::hash::mix64) {
            let u = unit_interval(h);
            assert_eq!(route_one(&r, h, u), 0, "at u the term has not moved yet");
            assert_eq!(route_one(&r, h, u + 1e-9), 1);
        }
    }

    #[test]
    fn frozen_ramp_is_the_old_side_of_the_next() {
        let first = ramp(0, 1);
        let second = RampedTable::new(first.frozen(0.5), Arc::new(Fixed(2)));
        for h in (0..2000u64).map(data::hash::mix64) {
            let u = unit_interval(h);
            let want_at_0 = if u < 0.5 { 1 } else { 0 };
            assert_eq!(route_one(&second, h, 0.0), want_at_0);
            let want_mid = if u < 0.25 { 2 } else { want_at_0 };
            assert_eq!(route_one(&second, h, 0.25), want_mid);
            assert_eq!(route_one(&second, h, 1.0), 2);
        }
    }

    #[test]
    fn mixed_queries_count_each_term_once() {
        // Two terms on either side of the progress: one old vote, one new vote.
        let r = ramp(0, 1);
        let hs: Vec<u64> = (0..10_000u64).map(data::hash::mix64).collect();
        let low = *hs
            .iter()
            .find(|&&h| unit_interval(h) < 0.2)
            .expect("a low term");
        let high = *hs
            .iter()
            .find(|&&h| unit_interval(h) > 0.8)
            .expect("a high term");
        let s = r.at(0.5).score(&[low, high]);
        assert_eq!((s.votes(0), s.votes(1)), (1.0, 1.0));
    }
}
