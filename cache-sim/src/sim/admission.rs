//! Caching a list only at its homes: an admission rule taken from the voting table. A
//! replica caches a term's postings only if the term votes for it with at least `share`
//! of the term's top vote (a term with no row caches everywhere). Elsewhere a miss reads
//! the list from flash without caching it, so a list fetched for a query the table sent
//! away from the list's homes does not evict what that replica keeps for its own terms.
//!
//! Only the trace simulator models it (`ballot eval --admission`): the replica and the
//! balancer do not do it yet. It measures what the rule would save
//! ([results.md](../../../docs/results.md), "Caching only at the homes").

use data::table::VotingTable;

use super::table_terms::TableTerms;
use super::trace::Trace;

/// Which replicas cache each term of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// Per trace term id: the replicas that cache it, as a bit set.
    caching: Vec<u64>,
}

impl Admission {
    /// The rule of `table` with `share` in `[0, 1]`: term `t` is cached on replica `r` when
    /// its vote for `r` is at least `share` times its largest vote.
    pub fn from_table(trace: &Trace, table: &VotingTable, share: f32) -> Admission {
        let TableTerms { rows, top } = TableTerms::new(trace, table);
        let mut caching: Vec<u64> = top
            .iter()
            .map(|t| if t.is_some() { 0 } else { u64::MAX })
            .collect();
        for (t, r, w) in rows {
            if top[t].is_some_and(|(_, best)| w >= share * best) {
                caching[t] |= 1 << r;
            }
        }
        Admission { caching }
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

    use data::sizes::{SizeTable, Sizes};
    use data::table::TableRow;
    use eviction::EvictionKind;

    use super::*;
    use crate::sim::{replay, NoObserver, SimConfig, SimLoad};

    fn trace(queries: &[&str], train_len: usize) -> Trace {
        let sizes = Sizes::Table(SizeTable::from_pairs(
            [("a", 100u64), ("b", 100), ("c", 100)].map(|(t, b)| (t.to_owned(), b)),
        ));
        Trace::build(queries.iter().copied(), train_len, &sizes)
    }

    #[test]
    fn a_term_is_cached_where_it_votes_enough() {
        let trace = trace(&["a b c"], 1);
        let rows = vec![
            TableRow::new("a", 0, 10.0),
            TableRow::new("a", 1, 6.0),
            TableRow::new("a", 2, 4.0),
            TableRow::new("b", 1, 1.0),
        ];
        let table = VotingTable::new(3, rows, BTreeMap::new()).unwrap();
        let id = |t: &str| trace.dict.get(t).unwrap();
        let adm = Admission::from_table(&trace, &table, 0.5);
        let at = |t: &str| {
            (0..3)
                .filter(|&r| adm.caches(id(t), r))
                .collect::<Vec<u16>>()
        };
        assert_eq!(at("a"), [0, 1], "6 >= 0.5 * 10 > 4");
        assert_eq!(at("b"), [1]);
        assert_eq!(at("c"), [0, 1, 2], "no row: cached everywhere");
        let all = Admission::from_table(&trace, &table, 0.0);
        assert_eq!((0..3).filter(|&r| all.caches(id("a"), r)).count(), 3);
    }

    #[test]
    fn a_list_read_away_from_its_homes_is_not_cached() {
        // Every query goes to replica 0 (round-robin over one replica); "a" may be cached
        // only on replica 1, so each of its lookups misses, while "b" (no row) hits after
        // its first.
        let trace = trace(&["a b", "a b", "a b", "a b"], 1);
        let table = VotingTable::new(2, vec![TableRow::new("a", 1, 1.0)], BTreeMap::new()).unwrap();
        let admission = Admission::from_table(&trace, &table, 0.5);
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
            admission: Some(std::sync::Arc::new(admission)),
        };
        let with = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
        assert_eq!((with.requested_bytes, with.miss_bytes), (600, 300));
        cfg.admission = None;
        let without = replay(&trace, policy.as_ref(), &cfg, &mut NoObserver);
        assert_eq!(without.miss_bytes, 0);
    }
}
