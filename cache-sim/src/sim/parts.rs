//! Flash bytes per replica over parts of the test stream (the hours of a held-out day, or
//! equal slices of it), watched during a replay: what `ballot retrain` compares part by
//! part to say how sure a decision is.

use balancer::policy::Decision;

use super::replay::Observer;
use super::trace::Trace;

/// Per part: test queries, postings bytes requested, and flash bytes read at each replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartFlash {
    /// Test queries of each part.
    pub queries: Vec<u64>,
    /// Bytes of postings requested by each part's queries.
    pub requested: Vec<u64>,
    /// `flash[part][replica]`: bytes read from flash.
    pub flash: Vec<Vec<u64>>,
}

impl PartFlash {
    /// Adds `other`'s counts (a replay of the same parts) to these.
    pub fn add(&mut self, other: &PartFlash) {
        for (a, b) in self.queries.iter_mut().zip(&other.queries) {
            *a += b;
        }
        for (a, b) in self.requested.iter_mut().zip(&other.requested) {
            *a += b;
        }
        for (a, b) in self.flash.iter_mut().zip(&other.flash) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

/// An [`Observer`] filling a [`PartFlash`]: test query `i` (counted from the start of the
/// test part) belongs to part `part_of[i]`.
pub struct PartObserver<'a> {
    trace: &'a Trace,
    part_of: &'a [u32],
    /// The replica of the query being looked up.
    replica: usize,
    /// What was seen.
    pub parts: PartFlash,
}

impl<'a> PartObserver<'a> {
    /// An observer of `trace`'s test part cut into `parts` parts by `part_of` (one entry per
    /// test query, each below `parts`).
    pub fn new(trace: &'a Trace, part_of: &'a [u32], parts: usize, replicas: usize) -> Self {
        assert_eq!(part_of.len(), trace.test_len(), "one part per test query");
        PartObserver {
            trace,
            part_of,
            replica: 0,
            parts: PartFlash {
                queries: vec![0; parts],
                requested: vec![0; parts],
                flash: vec![vec![0; replicas]; parts],
            },
        }
    }

    fn part(&self, query: usize) -> usize {
        self.part_of[query - self.trace.train_len] as usize
    }
}

impl Observer for PartObserver<'_> {
    #[inline]
    fn on_route(&mut self, query: usize, counted: bool, decision: Decision) {
        if counted {
            self.replica = usize::from(decision.replica);
            let p = self.part(query);
            self.parts.queries[p] += 1;
        }
    }

    #[inline]
    fn on_lookup(&mut self, query: usize, counted: bool, _replica: u16, term: u32, hit: bool) {
        if counted {
            let p = self.part(query);
            let bytes = self.trace.term_bytes[term as usize];
            self.parts.requested[p] += bytes;
            if !hit {
                self.parts.flash[p][self.replica] += bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::replay::{replay, SimConfig, SimLoad};
    use balancer::policy::{build_policy, PolicyKind, PolicyParams};
    use data::sizes::{SizeTable, Sizes};
    use eviction::EvictionKind;

    #[test]
    fn the_parts_add_up_to_the_whole_replay() {
        let queries: Vec<String> = (0..3_000)
            .map(|i| format!("t{} t{} u{}", i % 37, i % 11, i % 101))
            .collect();
        let sizes = Sizes::Table(SizeTable::from_pairs(
            (0..101).map(|i| (format!("u{i}"), 100 + 37 * i as u64)),
        ));
        let trace = Trace::build(queries.iter().map(String::as_str), 1_000, &sizes);
        let part_of: Vec<u32> = (0..trace.test_len())
            .map(|i| (i * 4 / trace.test_len()) as u32)
            .collect();
        let cfg = SimConfig {
            admission: None,
            replicas: 4,
            capacity_bytes: trace.capacity_for(0.05),
            eviction: EvictionKind::Lru,
            window: 100,
            seed: 1,
            load: SimLoad::Queries,
        };
        let policy = build_policy(PolicyKind::ChBl, &PolicyParams::new(4)).unwrap();
        let mut obs = PartObserver::new(&trace, &part_of, 4, 4);
        let whole = replay(&trace, policy.as_ref(), &cfg, &mut obs);
        let p = obs.parts;
        assert_eq!(p.queries.iter().sum::<u64>(), whole.queries);
        assert_eq!(p.queries, vec![500; 4]);
        assert_eq!(p.requested.iter().sum::<u64>(), whole.requested_bytes);
        let flash: u64 = p.flash.iter().flatten().sum();
        assert_eq!(flash, whole.miss_bytes);
        for r in 0..4 {
            let at_r: u64 = p.flash.iter().map(|f| f[r]).sum();
            let share = at_r as f64 / whole.miss_bytes as f64;
            assert!((share - whole.flash_shares[r]).abs() < 1e-12);
        }
    }
}
