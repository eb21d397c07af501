//! Where a voting table's flash bytes go: every test lookup of a replay through the `table`
//! policy, classed by the role the replica it went to plays for the term in the table, by
//! why the query went there, and by term. `ballot eval --breakdown` prints it; the learner's
//! work reads it to see which misses a better table could still remove
//! ([learner.md](../../../docs/learner.md)).

use balancer::policy::{Decision, Reason};
use data::table::VotingTable;
use serde::Serialize;

use super::replay::Observer;
use super::table_terms::TableTerms;
use super::trace::Trace;

/// The role of a lookup's replica for its term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The replica is the term's top vote (its home).
    Top,
    /// Not the term's top vote, but the top vote of another term of the same query with at
    /// least as many postings bytes: a co-occurring larger list pulled the query away from
    /// this term's home.
    LargerTermsTop,
    /// As [`Role::LargerTermsTop`], but every such co-occurring term is smaller.
    SmallerTermsTop,
    /// The term votes for the replica with a lower weight, and no other term of the query
    /// has it as its top.
    Secondary,
    /// The term votes, but not for this replica, and no other term of the query has it as
    /// its top (an overflow, the home rule, or a tie).
    NotVoted,
    /// The term has no row in the table.
    Abstains,
}

impl Role {
    /// Every role, in report order (their declaration order: `role as usize` indexes it).
    pub const ALL: [Role; 6] = [
        Role::Top,
        Role::LargerTermsTop,
        Role::SmallerTermsTop,
        Role::Secondary,
        Role::NotVoted,
        Role::Abstains,
    ];

    /// The report's name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Top => "term's top vote",
            Role::LargerTermsTop => "a larger term's top vote",
            Role::SmallerTermsTop => "a smaller term's top vote",
            Role::Secondary => "term's lower vote",
            Role::NotVoted => "not voted by the term",
            Role::Abstains => "term abstains",
        }
    }
}

/// Requested and missed postings bytes of one class of lookups.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Bytes {
    /// Bytes requested.
    pub requested: u64,
    /// Bytes read from flash (missed).
    pub missed: u64,
}

impl Bytes {
    fn add(&mut self, bytes: u64, hit: bool) {
        self.requested += bytes;
        if !hit {
            self.missed += bytes;
        }
    }
}

/// One term's test lookups.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TermMisses {
    /// The term.
    pub term: String,
    /// Its postings bytes.
    pub bytes: u64,
    /// Test lookups.
    pub lookups: u64,
    /// Of which missed.
    pub misses: u64,
    /// Replicas it was looked up on.
    pub replicas: u32,
    /// Its top vote in the table, if it votes.
    pub top: Option<u16>,
}

/// The report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Breakdown {
    /// All test lookups.
    pub total: Bytes,
    /// Per [`Role`], in [`Role::ALL`] order, with the role's name.
    pub by_role: Vec<(String, Bytes)>,
    /// Per routing reason ([`Reason::ALL`] order), with its name.
    pub by_reason: Vec<(String, Bytes)>,
    /// Terms by missed bytes, most first (the first `top_terms` asked for).
    pub terms: Vec<TermMisses>,
    /// Share of all missed bytes that the 10, 100 and 1,000 terms missing the most read.
    pub top_shares: Vec<(usize, f64)>,
}

/// The [`Observer`] behind [`Breakdown`].
pub struct MissWatch<'a> {
    trace: &'a Trace,
    /// Top vote of each trace term (`None`: abstains).
    top: Vec<Option<u16>>,
    /// Replicas each trace term votes for, as a bit set.
    voted: Vec<u64>,
    /// The replica the current query went to, and why.
    decision: Option<Decision>,
    by_role: [Bytes; 6],
    by_reason: [Bytes; 5],
    lookups: Vec<u32>,
    misses: Vec<u32>,
    seen_on: Vec<u64>,
}

impl<'a> MissWatch<'a> {
    /// A watch of `trace` replayed through `table`.
    pub fn new(trace: &'a Trace, table: &VotingTable) -> Self {
        let n = trace.dict.len();
        let TableTerms { rows, top } = TableTerms::new(trace, table);
        let mut voted = vec![0u64; n];
        for (t, r, _) in rows {
            voted[t] |= 1 << r;
        }
        MissWatch {
            trace,
            top: top.into_iter().map(|v| v.map(|(r, _)| r)).collect(),
            voted,
            decision: None,
            by_role: Default::default(),
            by_reason: Default::default(),
            lookups: vec![0; n],
            misses: vec![0; n],
            seen_on: vec![0; n],
        }
    }

    fn role(&self, query: usize, term: u32, replica: u16) -> Role {
        let t = term as usize;
        let Some(top) = self.top[t] else {
            return Role::Abstains;
        };
        if top == replica {
            return Role::Top;
        }
        let bytes = &self.trace.term_bytes;
        let pulled_by = self
            .trace
            .terms(query)
            .iter()
            .filter(|&&u| u != term && self.top[u as usize] == Some(replica))
            .map(|&u| bytes[u as usize])
            .max();
        if let Some(largest) = pulled_by {
            if largest >= bytes[t] {
                Role::LargerTermsTop
            } else {
                Role::SmallerTermsTop
            }
        } else if self.voted[t] & (1 << replica) != 0 {
            Role::Secondary
        } else {
            Role::NotVoted
        }
    }

    /// The report, with the `top_terms` terms that missed the most bytes.
    pub fn report(&self, top_terms: usize) -> Breakdown {
        let bytes = |t: usize| self.trace.term_bytes[t];
        let mut order: Vec<usize> = (0..self.lookups.len())
            .filter(|&t| self.misses[t] > 0)
            .collect();
        order.sort_by_key(|&t| std::cmp::Reverse((u64::from(self.misses[t]) * bytes(t), t)));
        let missed_by = |t: usize| u64::from(self.misses[t]) * bytes(t);
        let all_missed: u64 = order.iter().map(|&t| missed_by(t)).sum();
        let top_shares = [10, 100, 1000]
            .into_iter()
            .map(|k| {
                let m: u64 = order.iter().take(k).map(|&t| missed_by(t)).sum();
                (k, m as f64 / all_missed.max(1) as f64)
            })
            .collect();
        let total = self.by_role.iter().fold(Bytes::default(), |acc, b| Bytes {
            requested: acc.requested + b.requested,
            missed: acc.missed + b.missed,
        });
        Breakdown {
            total,
            by_role: Role::ALL
                .iter()
                .zip(&self.by_role)
                .map(|(r, b)| (r.as_str().to_owned(), b.clone()))
                .collect(),
            by_reason: Reason::ALL
                .iter()
                .zip(&self.by_reason)
                .map(|(r, b)| (r.as_str().to_owned(), b.clone()))
                .collect(),
            terms: order
                .iter()
                .take(top_terms)
                .map(|&t| TermMisses {
                    term: self.trace.dict.term(t as u32).to_owned(),
                    bytes: bytes(t),
                    lookups: u64::from(self.lookups[t]),
                    misses: u64::from(self.misses[t]),
                    replicas: self.seen_on[t].count_ones(),
                    top: self.top[t],
                })
                .collect(),
            top_shares,
        }
    }
}

impl Observer for MissWatch<'_> {
    #[inline]
    fn on_route(&mut self, _query: usize, counted: bool, decision: Decision) {
        self.decision = counted.then_some(decision);
    }

    fn on_lookup(&mut self, query: usize, counted: bool, replica: u16, term: u32, hit: bool) {
        let Some(decision) = self.decision.filter(|_| counted) else {
            return;
        };
        let t = term as usize;
        let b = self.trace.term_bytes[t];
        let role = self.role(query, term, replica);
        self.by_role[role as usize].add(b, hit);
        let reason_at = Reason::ALL
            .iter()
            .position(|&r| r == decision.reason)
            .unwrap_or(0);
        self.by_reason[reason_at].add(b, hit);
        self.lookups[t] += 1;
        self.misses[t] += u32::from(!hit);
        self.seen_on[t] |= 1 << replica;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use balancer::policy::{PolicyKind, PolicyParams};
    use data::sizes::{SizeTable, Sizes};
    use data::table::TableRow;
    use eviction::EvictionKind;

    use super::*;
    use crate::sim::{replay, SimConfig, SimLoad};

    #[test]
    fn lookups_are_classed_by_the_role_of_their_replica() {
        // "big" lives on 0, "small" on 1 with a lower vote on 0; "lone" abstains. The
        // query "big small" goes to 0 (big outweighs small), big's top, so small is pulled
        // there by a larger term; "small lone" goes to 1, small's top, where lone abstains.
        let sizes = Sizes::Table(SizeTable::from_pairs(
            [("big", 1000u64), ("small", 10), ("lone", 5)].map(|(t, b)| (t.to_owned(), b)),
        ));
        let queries = ["big small", "small lone", "big small", "small lone"];
        let trace = Trace::build(queries, 2, &sizes);
        let rows = vec![
            TableRow::new("big", 0, 1000.0),
            TableRow::new("small", 1, 10.0),
            TableRow::new("small", 0, 1.0),
        ];
        let table = VotingTable::new(2, rows, BTreeMap::new()).unwrap();
        let params = PolicyParams {
            table: Some(std::sync::Arc::new(table.clone())),
            term_bytes: std::sync::Arc::new(trace.term_bytes_map()),
            eps: 10.0,
            ..PolicyParams::new(2)
        };
        let policy = balancer::policy::build_policy(PolicyKind::Table, &params).unwrap();
        let cfg = SimConfig {
            admission: None,
            replicas: 2,
            // Room for the small lists only: "big" misses every time.
            capacity_bytes: 100,
            eviction: EvictionKind::Lru,
            window: 100,
            seed: 1,
            load: SimLoad::Queries,
        };
        let mut watch = MissWatch::new(&trace, &table);
        replay(&trace, policy.as_ref(), &cfg, &mut watch);
        let report = watch.report(10);
        let role = |name: &str| &report.by_role.iter().find(|(n, _)| n == name).unwrap().1;
        // Test part: "big small" at 0 (big top, small lower vote), "small lone" at 1.
        assert_eq!(role("term's top vote").requested, 1000 + 10);
        assert_eq!(role("a larger term's top vote").requested, 10);
        assert_eq!(role("term's lower vote").requested, 0);
        assert_eq!(role("term abstains").requested, 5);
        assert_eq!(report.total.requested, 1025);
        assert_eq!(role("term's top vote").missed, 1000);
        assert_eq!(report.total.missed, 1000);
        assert_eq!(report.terms.len(), 1);
        let big = &report.terms[0];
        assert_eq!(
            (big.term.as_str(), big.lookups, big.misses, big.top),
            ("big", 1, 1, Some(0))
        );
        assert_eq!(report.top_shares[0], (10, 1.0));
    }
}
