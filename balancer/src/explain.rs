//! A routing decision explained: each term's votes, the query's scores and homes, the load
//! view's numbers for every replica, and the decision with the rule that made it (its
//! [`Reason`](crate::policy::Reason): `vote`, `home`, `overflow`, `stall-guard`, `no-vote`;
//! `stolen` is the balancer's late binding, which moves a query after its decision).
//!
//! The decision is the one [`pick`] makes (the very function every voting policy routes
//! with, over the same view and a copy of the same random state), and the ranking and the
//! homes come from the rule's own helpers, so an explanation cannot drift from routing. The
//! balancer adds what only it knows (the ramp's side, failover, the shadow caches'
//! estimates); `ballot explain` prints the same thing offline.

use data::rng::Rng;

use crate::load::{live_mask, load_cap, LoadView};
use crate::policy::vote::{add_cache_evidence, is_home, pick, rank, Scores, VoteSource};
use crate::policy::{Decision, QueryKey};

/// One term's votes.
#[derive(Clone, Debug, PartialEq)]
pub struct TermVotes {
    /// `data::hash::term_hash` of the term.
    pub hash: u64,
    /// Its real votes, `(replica, weight)`, by replica.
    pub votes: Vec<(usize, f64)>,
    /// Its stand-in vote, `(replica, weight)`, when the table does not have the term.
    pub stand_in: Vec<(usize, f64)>,
}

/// One replica as the decision saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaSeen {
    /// Its index.
    pub index: usize,
    /// Whether it could take queries.
    pub live: bool,
    /// The query's real votes for it from the table.
    pub votes: f64,
    /// The votes its shadow cache added (the evidence: [`add_cache_evidence`]).
    pub evidence: f64,
    /// The query's stand-in votes for it.
    pub stand_in: f64,
    /// Its load in the view (`u64::MAX`: full by the stall guard).
    pub load: u64,
    /// Its backlog (requests in flight and queued), when the view has one.
    pub backlog: Option<u64>,
    /// Whether its load is under the cap.
    pub under_cap: bool,
    /// Whether it is one of the query's homes.
    pub home: bool,
}

/// A decision explained.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// Each term's votes, in query order.
    pub terms: Vec<TermVotes>,
    /// Every replica below the routed count.
    pub replicas: Vec<ReplicaSeen>,
    /// The load bound `load_cap(eps, total, live)`.
    pub cap: u64,
    /// The view's total load.
    pub total: u64,
    /// The top-ranked live replica (the table's first choice), if any term voted.
    pub top: Option<usize>,
    /// The top-ranked live replica under the cap.
    pub best: Option<usize>,
    /// The decision (`None`: no live replica), its reason the rule that made it.
    pub decision: Option<Decision>,
}

/// How the table routes: its replica count, slack `eps`, home share `homes` and the weight
/// of the shadow caches' evidence (`table`'s parameters).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Replicas routed over.
    pub replicas: usize,
    /// Load-bound slack.
    pub eps: f64,
    /// Home share.
    pub homes: f64,
    /// Weight of the shadow caches' evidence (0: the table alone).
    pub evidence: f64,
}

/// Explains routing `term_hashes` by the votes of `source` under `rule`, in the view
/// `load` (whose shadow caches give the evidence), drawing from `rng` as routing does.
pub fn explain(
    source: &dyn VoteSource,
    term_hashes: &[u64],
    rule: Rule,
    load: &dyn LoadView,
    rng: &mut Rng,
) -> Explanation {
    let Rule {
        replicas,
        eps,
        homes,
        evidence,
    } = rule;
    let terms = term_hashes
        .iter()
        .map(|&hash| {
            let mut one = Scores::new();
            source.add_votes(hash, &mut one);
            let of = |weight: &dyn Fn(usize) -> f64| {
                (0..replicas)
                    .map(|r| (r, weight(r)))
                    .filter(|&(_, w)| w > 0.0)
                    .collect::<Vec<_>>()
            };
            TermVotes {
                hash,
                votes: of(&|r| one.votes(r)),
                stand_in: of(&|r| one.fallback(r)),
            }
        })
        .collect();
    let table = source.score(term_hashes);
    let mut scores = table.clone();
    if evidence > 0.0 {
        let key = QueryKey::new(0, term_hashes);
        add_cache_evidence(&mut scores, replicas, evidence, load, &key);
    }
    let live = live_mask(load, replicas);
    let total = load.total();
    let cap = load_cap(eps, total, live.count_ones() as usize);
    let (top, best) = rank(&scores, live, cap, load);
    let floor = best.map_or(0.0, |b| homes * scores.votes(b));
    let seen = (0..replicas)
        .map(|r| {
            let is_live = live & (1u64 << r) != 0;
            ReplicaSeen {
                index: r,
                live: is_live,
                votes: table.votes(r),
                evidence: scores.votes(r) - table.votes(r),
                stand_in: scores.fallback(r),
                load: load.load(r),
                backlog: load.in_flight(r),
                under_cap: load.load(r) < cap,
                home: is_live && best.is_some() && is_home(&scores, r, floor, cap, load),
            }
        })
        .collect();
    Explanation {
        terms,
        replicas: seen,
        cap,
        total,
        top,
        best,
        decision: pick(&scores, replicas, eps, homes, load, rng),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;
    use crate::policy::Reason;

    /// Votes from a fixed list: term hash → `(replica, weight)`.
    struct Fixed(Vec<(u64, usize, f64)>);

    impl VoteSource for Fixed {
        fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
            for &(h, r, w) in &self.0 {
                if h == term_hash {
                    scores.add_vote(r, w);
                }
            }
        }
    }

    #[test]
    fn the_explanation_names_votes_homes_and_the_rule() {
        let votes = Fixed(vec![(1, 1, 10.0), (1, 3, 9.0), (2, 0, 5.0)]);
        // Replica 1 has the top vote but more backlog than replica 3, a home.
        let load = StaticLoad::new(vec![0, 3, 9, 1]);
        let rule = Rule {
            replicas: 4,
            eps: 0.05,
            homes: 0.85,
            evidence: 0.0,
        };
        let e = explain(&votes, &[1, 2, 7], rule, &load, &mut Rng::new(1));
        assert_eq!(e.terms.len(), 3);
        assert_eq!(e.terms[0].votes, vec![(1, 10.0), (3, 9.0)]);
        assert!(e.terms[2].votes.is_empty() && e.terms[2].stand_in.is_empty());
        assert_eq!((e.top, e.best, e.total, e.cap), (Some(1), Some(1), 13, 4));
        let homes: Vec<usize> = e
            .replicas
            .iter()
            .filter(|r| r.home)
            .map(|r| r.index)
            .collect();
        assert_eq!(homes, vec![1, 3]);
        assert_eq!(
            e.decision.map(|d| (d.replica, d.reason)),
            Some((3, Reason::Home))
        );
        assert!(!e.replicas[2].under_cap);
        // The decision is pick's, over the same view.
        let scores = votes.score(&[1, 2, 7]);
        assert_eq!(
            e.decision,
            pick(&scores, 4, 0.05, 0.85, &load, &mut Rng::new(1))
        );
    }
}
