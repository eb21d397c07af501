//! Caching a list only at its homes, in the trace simulator: the table's admission rule
//! ([`balancer::policy::admission`], the rule the balancer's shadow caches and ballot's
//! replica apply) precomputed per trace term id, so a replay checks it with one bit test.
//! `ballot eval --cache-admission SHARE` replays the table with it (docs/learner.md, "Caching only
//! at the homes").

use std::sync::Arc;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use balancer::policy::PolicyError;
use data::table::VotingTable;

use super::trace::Trace;

/// Which replicas cache each term of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// Per trace term id: the replicas that cache it, as a bit set.
    caching: Vec<u64>,
    /// The cache size the table was trained for (the rule applies up to it), if known.
    trained_cache_bytes: Option<u64>,
}

impl Admission {
    /// `rule` under `votes` for every term of `trace`.
    pub fn new(trace: &Trace, votes: &TableVotes, rule: CacheAdmission) -> Admission {
        let replicas = votes.replicas() as u16;
        let caching = trace
            .dict
            .terms()
            .map(|term| {
                let h = data::hash::term_hash(term);
                (0..replicas)
                    .filter(|&r| rule.caches(votes, h, r))
                    .fold(0u64, |set, r| set | 1 << r)
            })
            .collect();
        Admission {
            caching,
            trained_cache_bytes: votes.trained_cache_bytes(),
        }
    }

    /// `rule` under `table` (of `replicas` replicas, with `trace`'s sizes) for every term of
    /// `trace`.
    pub fn for_table(
        trace: &Trace,
        table: &VotingTable,
        replicas: usize,
        rule: CacheAdmission,
    ) -> Result<Admission, PolicyError> {
        let votes = TableVotes::build(table, replicas, Arc::new(trace.term_bytes_map()))?;
        Ok(Admission::new(trace, &votes, rule))
    }

    /// Whether the rule applies to caches of `capacity_bytes` ([`CacheAdmission::applies`]).
    pub fn applies(&self, capacity_bytes: u64) -> bool {
        self.trained_cache_bytes
            .is_none_or(|trained| capacity_bytes <= trained)
    }

    /// Whether `replica` caches `term`'s list after a miss.
    #[inline]
    pub fn caches(&self, term: u32, replica: u16) -> bool {
        self.caching
            .get(term as usize)
            .is_none_or(|set| set & (1 << replica) != 0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use balancer::policy::TermBytes;
    use data::sizes::{SizeTable, Sizes};
    use data::table::{TableRow, VotingTable, KEY_TRAINED_CACHE_BYTES};
    use eviction::EvictionKind;

    use super::*;
    use crate::sim::{replay, NoObserver, SimConfig, SimLoad};

    fn trace(queries: &[&str], train_len: usize) -> Trace {
        let sizes = Sizes::Table(SizeTable::from_pairs(
            [("a", 100u64), ("b", 100), ("c", 100)].map(|(t, b)| (t.to_owned(), b)),
        ));
        Trace::build(queries.iter().copied(), train_len, &sizes)
    }

    fn admission(trace: &Trace, rows: Vec<TableRow>, trained: Option<u64>) -> Admission {
        let metadata = trained
            .map(|b| (KEY_TRAINED_CACHE_BYTES.to_owned(), b.to_string()))
            .into_iter()
            .collect::<BTreeMap<_, _>>();
        let table = VotingTable::new(2, rows, metadata).unwrap();
        let votes = TableVotes::build(&table, 2, Arc::new(TermBytes::new(21))).unwrap();
        Admission::new(trace, &votes, CacheAdmission::new(0.5).unwrap())
    }

    #[test]
    fn each_trace_term_gets_the_rule_of_its_votes() {
        let trace = trace(&["a b c"], 1);
        let rows = vec![
            TableRow::new("a", 0, 10.0),
            TableRow::new("a", 1, 4.0),
            TableRow::new("b", 1, 1.0),
        ];
        let adm = admission(&trace, rows, Some(500));
        let id = |t: &str| trace.dict.get(t).unwrap();
        let at = |t: &str| {
            (0..2)
                .filter(|&r| adm.caches(id(t), r))
                .collect::<Vec<u16>>()
        };
        assert_eq!(at("a"), [0]);
        assert_eq!(at("b"), [1]);
        assert_eq!(at("c"), [0, 1], "no row: cached everywhere");
        assert!(adm.applies(500) && !adm.applies(501));
    }

    #[test]
    fn a_list_read_away_from_its_homes_is_not_cached() {
        // Every query goes to replica 0 (round-robin over one replica); "a" may be cached
        // only on replica 1, so each of its lookups misses, while "b" (no row) hits after
        // its first.
        let trace = trace(&["a b", "a b", "a b", "a b"], 1);
        let admission = admission(&trace, vec![TableRow::new("a", 1, 1.0)], None);
        let params = balancer::policy::PolicyParams::new(1);
        let policy =
            balancer::policy::build_policy(balancer::policy::PolicyKind::RoundRobin, &params)
                .unwrap();
        let mut cfg = SimConfig {
            replicas: 1,
            capacity_bytes: 1_000,
            eviction: EvictionKind::Lru,
            window: 10,
            seed: 1,
            load: SimLoad::Queries,
            admission: Some(Arc::new(admission)),
        };
        let with = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
        assert_eq!((with.requested_bytes, with.miss_bytes), (600, 300));
        cfg.admission = None;
        let without = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
        assert_eq!(without.miss_bytes, 0);
    }
}
