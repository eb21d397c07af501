//! Caching a list only at its homes: the cache admission rule of a voting table, one rule
//! for the trace simulator, the balancer's shadow caches and ballot's replica.
//!
//! A replica caches a term's postings only where the table votes for the term with at least
//! `share` of the term's top vote. A term the table does not know, or one that abstains,
//! caches everywhere. Elsewhere a miss reads the list from flash and does not cache it, so a
//! large list fetched for a query the table sent away from that list's homes (a stopword
//! beside a rarer term, say) does not evict what the replica keeps for its own terms.
//!
//! The homes were sized for the cache the table was trained for. A larger cache has room
//! for more than the homes, and there the rule costs hits, so it applies only to caches no
//! larger than the table's `ballot.train.capacity_bytes` (to every cache if the table does
//! not say). docs/learner.md, "Caching only at the homes", has the measurements.

use super::table::TableVotes;

/// The admission rule: the share of a term's top vote a replica's vote must reach for the
/// replica to cache the term's list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheAdmission {
    share: f32,
}

impl CacheAdmission {
    /// The rule with `share` in `(0, 1]`; errors otherwise.
    pub fn new(share: f64) -> Result<Self, String> {
        if share.is_finite() && share > 0.0 && share <= 1.0 {
            Ok(CacheAdmission {
                share: share as f32,
            })
        } else {
            Err(format!(
                "the admission share must be in (0, 1] (a share of the term's top vote), got {share}"
            ))
        }
    }

    /// The share.
    pub fn share(self) -> f32 {
        self.share
    }

    /// Whether the rule applies to a replica cache of `cache_bytes` under `votes`: when the
    /// cache is no larger than the table was trained for, or the table does not say.
    pub fn applies(votes: &TableVotes, cache_bytes: u64) -> bool {
        votes
            .trained_cache_bytes()
            .is_none_or(|trained| cache_bytes <= trained)
    }

    /// Whether `replica` caches the list of the term hashed `term_hash`.
    #[inline]
    pub fn caches(self, votes: &TableVotes, term_hash: u64, replica: u16) -> bool {
        let Some(term_votes) = votes.get(term_hash) else {
            return true;
        };
        let top = term_votes.iter().map(|&(_, w)| w).fold(0.0f32, f32::max);
        if top <= 0.0 {
            return true;
        }
        let own = term_votes
            .iter()
            .find(|&&(r, _)| r == replica)
            .map_or(0.0, |&(_, w)| w);
        own >= self.share * top
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use data::hash::term_hash;
    use data::table::{TableRow, VotingTable, KEY_TRAINED_CACHE_BYTES};

    use super::*;
    use crate::policy::TermBytes;

    fn votes(metadata: BTreeMap<String, String>) -> TableVotes {
        let rows = vec![
            TableRow::new("a", 0, 10.0),
            TableRow::new("a", 1, 6.0),
            TableRow::new("a", 2, 4.0),
            TableRow::new("b", 1, 1.0),
            TableRow::new("z", 0, 0.0),
        ];
        let table = VotingTable::new(3, rows, metadata).unwrap();
        TableVotes::build(&table, 3, Arc::new(TermBytes::new(21))).unwrap()
    }

    #[test]
    fn a_term_is_cached_where_it_votes_enough() {
        let votes = votes(BTreeMap::new());
        let rule = CacheAdmission::new(0.5).unwrap();
        let at = |t: &str| {
            (0..3)
                .filter(|&r| rule.caches(&votes, term_hash(t), r))
                .collect::<Vec<u16>>()
        };
        assert_eq!(at("a"), [0, 1], "6 >= 0.5 * 10 > 4");
        assert_eq!(at("b"), [1]);
        assert_eq!(at("z"), [0, 1, 2], "an abstaining term caches everywhere");
        assert_eq!(at("c"), [0, 1, 2], "no row: cached everywhere");
        let all = CacheAdmission::new(1e-9).unwrap();
        assert_eq!(
            (0..3)
                .filter(|&r| all.caches(&votes, term_hash("a"), r))
                .count(),
            3
        );
    }

    #[test]
    fn the_rule_applies_up_to_the_trained_cache_size() {
        assert!(CacheAdmission::applies(&votes(BTreeMap::new()), u64::MAX));
        let trained = BTreeMap::from([(KEY_TRAINED_CACHE_BYTES.to_owned(), "1000".to_owned())]);
        let votes = votes(trained);
        assert_eq!(votes.trained_cache_bytes(), Some(1000));
        assert!(CacheAdmission::applies(&votes, 1000));
        assert!(!CacheAdmission::applies(&votes, 1001));
    }

    #[test]
    fn shares_outside_the_unit_interval_are_refused() {
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(CacheAdmission::new(bad).is_err(), "{bad}");
        }
        assert_eq!(CacheAdmission::new(1.0).unwrap().share(), 1.0);
    }
}
