//! Replicas joining or leaving in the middle of the test part: a table over virtual homes
//! (`balancer::virtual_homes`) serving `from` replicas is mapped onto `to` at test query
//! `at` and ramps in as the balancer ramps it when its replica set changes (the same
//! [`RampPolicy`] over the two mappings). The replicas that join start with cold caches and
//! get nothing before `at`; those that leave get nothing after it.
//!
//! The report gives, per window of test queries, the miss bytes ratio and the busiest live
//! replica's share of the flash bytes read: the transient before, during and after the
//! change. The steady state after it compares with a table trained for `to` in `ballot
//! eval`.

use std::sync::Arc;

use balancer::load::first_n_bits;
use balancer::policy::table::TableVotes;
use balancer::policy::PolicyError;
use balancer::ramp::{RampPolicy, RampedTable, SharedVotes};
use data::table::VotingTable;
use serde::Serialize;

use super::replay::{ratio, replay_live, Observer, SimConfig, SimResult};
use super::switch::{SwitchConfig, WindowedMisses, TRANSITION_SETTLE};
use super::trace::Trace;

/// What to simulate: a change at test query `change.at`, ramped over `change.ramp`
/// queries, reported per `change.window`, from `change.sim.replicas` replicas to `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleConfig {
    /// The change as a table switch would be simulated, on the replicas before it.
    pub change: SwitchConfig,
    /// The replica count after the change.
    pub to: usize,
}

/// One reporting window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleWindow {
    /// First test query of the window.
    pub start: usize,
    /// Live replicas at its start.
    pub replicas: usize,
    /// Its miss bytes ratio.
    pub miss_bytes_ratio: f64,
    /// The busiest replica's share of the flash bytes read in it.
    pub flash_share_max: f64,
    /// Each replica's share of the flash bytes read in it.
    pub flash_shares: Vec<f64>,
}

/// The transient of one change of replica count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleReport {
    /// Replicas before.
    pub from: usize,
    /// Replicas after.
    pub to: usize,
    /// Test query of the change.
    pub at: usize,
    /// Ramp length in queries.
    pub ramp: usize,
    /// Every window.
    pub windows: Vec<ScaleWindow>,
    /// Miss bytes ratio over the windows that end before the change.
    pub before: f64,
    /// Miss bytes ratio over the windows from the change to [`TRANSITION_SETTLE`] queries
    /// after the ramp.
    pub transition: f64,
    /// Miss bytes ratio over the windows after that.
    pub after: f64,
    /// The busiest replica's flash share over the windows after the transition.
    pub flash_share_max_after: f64,
    /// The whole replay.
    #[serde(skip)]
    pub result: SimResult,
}

/// Per window: requested and missed bytes ([`WindowedMisses`]), and flash bytes per
/// replica.
struct Windows<'a> {
    misses: WindowedMisses<'a>,
    term_bytes: &'a [u64],
    train_len: usize,
    flash: Vec<Vec<u64>>,
}

impl Observer for Windows<'_> {
    #[inline]
    fn on_lookup(&mut self, query: usize, counted: bool, replica: u16, term: u32, hit: bool) {
        self.misses.on_lookup(query, counted, replica, term, hit);
        if counted && !hit {
            let w = (query - self.train_len) / self.misses.window();
            self.flash[w][usize::from(replica)] += self.term_bytes[term as usize];
        }
    }
}

/// Simulates `table` (over virtual homes) serving `change.sim.replicas` replicas, then
/// `to` from test query `change.at` on.
///
/// Errors if the table is not over virtual homes or cannot serve either count.
pub fn simulate_scale(
    trace: &Trace,
    table: &VotingTable,
    scale: &ScaleConfig,
) -> Result<ScaleReport, PolicyError> {
    let cfg = &scale.change;
    let (from, to) = (cfg.sim.replicas, scale.to);
    if !matches!(table.virtual_homes(), Ok(Some(_))) {
        return Err(PolicyError::VirtualHomes(
            "a change of replica count needs a table trained with --virtual-homes".into(),
        ));
    }
    let term_bytes = Arc::new(trace.term_bytes_map());
    let old: SharedVotes = Arc::new(TableVotes::build(table, from, Arc::clone(&term_bytes))?);
    let new: SharedVotes = Arc::new(TableVotes::build(table, to, term_bytes)?);
    let width = from.max(to);
    let change = trace.train_len + cfg.at;
    let policy = RampPolicy::new(
        RampedTable::new(old, new),
        width,
        cfg.eps,
        cfg.homes,
        change as u64,
        cfg.ramp as u64,
    );
    let sim = SimConfig {
        replicas: width,
        ..cfg.sim.clone()
    };
    let misses = WindowedMisses::new(trace, cfg.window);
    let window = misses.window();
    let n = trace.test_len().div_ceil(window);
    let mut windows = Windows {
        misses,
        term_bytes: &trace.term_bytes,
        train_len: trace.train_len,
        flash: vec![vec![0; width]; n],
    };
    let (before_bits, after_bits) = (first_n_bits(from), first_n_bits(to));
    let live = |q: usize| if q < change { before_bits } else { after_bits };
    let result = replay_live(trace, &policy, &sim, &live, &mut windows);
    let (requested, missed) = windows.misses.totals();

    let settled = cfg
        .at
        .saturating_add(cfg.ramp)
        .saturating_add(TRANSITION_SETTLE);
    let rows: Vec<ScaleWindow> = (0..n)
        .map(|w| {
            let flash = &windows.flash[w];
            let total: u64 = flash.iter().sum();
            ScaleWindow {
                start: w * window,
                replicas: if w * window < cfg.at { from } else { to },
                miss_bytes_ratio: ratio(missed[w], requested[w]),
                flash_share_max: ratio(flash.iter().copied().max().unwrap_or(0), total),
                flash_shares: flash.iter().map(|&f| ratio(f, total)).collect(),
            }
        })
        .collect();
    let over = |keep: &dyn Fn(usize) -> bool| {
        let (mut missed_sum, mut requested_sum) = (0, 0);
        for w in (0..n).filter(|&w| keep(w * window)) {
            missed_sum += missed[w];
            requested_sum += requested[w];
        }
        ratio(missed_sum, requested_sum)
    };
    let mut flash_after = vec![0u64; width];
    for w in (0..n).filter(|&w| w * window >= settled) {
        for (f, &x) in flash_after.iter_mut().zip(&windows.flash[w]) {
            *f += x;
        }
    }
    let flash_total: u64 = flash_after.iter().sum();
    Ok(ScaleReport {
        from,
        to,
        at: cfg.at,
        ramp: cfg.ramp,
        before: over(&|s| s + window <= cfg.at),
        transition: over(&|s| s + window > cfg.at && s < settled),
        after: over(&|s| s >= settled),
        flash_share_max_after: ratio(flash_after.iter().copied().max().unwrap_or(0), flash_total),
        windows: rows,
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimLoad;
    use data::rng::Rng;
    use data::sizes::{SizeTable, Sizes};
    use data::table::{TableRow, VirtualHomes};
    use eviction::EvictionKind;
    use std::collections::BTreeMap;

    const TERMS: usize = 400;

    /// 60,000 queries of one or two of 400 terms of 100 bytes, skewed to the low ids;
    /// the first half trains.
    fn trace() -> Trace {
        let mut rng = Rng::new(7);
        let queries: Vec<String> = (0..60_000)
            .map(|_| {
                let n = 1 + usize::from(rng.below(4) == 0);
                (0..n)
                    .map(|_| {
                        let a = rng.below(TERMS as u64) as usize;
                        let b = rng.below(TERMS as u64) as usize;
                        format!("t{}", a.min(b))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let sizes = Sizes::Table(SizeTable::from_pairs(
            (0..TERMS).map(|i| (format!("t{i}"), 100)),
        ));
        Trace::build(queries.iter().map(String::as_str), 30_000, &sizes)
    }

    /// Twelve homes of equal work on two replicas; term i votes for home i % 12.
    fn homes_table() -> VotingTable {
        let mut metadata = BTreeMap::new();
        VirtualHomes {
            replicas: 2,
            trained: (0..12).map(|h| h / 6).collect(),
            work: vec![100; 12],
            work_at: Default::default(),
        }
        .insert_into(&mut metadata);
        let rows = (0..TERMS)
            .map(|i| TableRow::new(&format!("t{i}"), (i % 12) as u16, 1.0))
            .collect();
        VotingTable::new(12, rows, metadata).unwrap()
    }

    fn config(from: usize, to: usize) -> ScaleConfig {
        ScaleConfig {
            change: SwitchConfig {
                sim: SimConfig {
                    admission: None,
                    replicas: from,
                    capacity_bytes: 100 * 100,
                    eviction: EvictionKind::Lru,
                    window: 1_000,
                    seed: 1,
                    load: SimLoad::Queries,
                },
                eps: 0.05,
                homes: 0.0,
                at: 10_000,
                ramp: 0,
                window: 2_000,
            },
            to,
        }
    }

    #[test]
    fn a_joining_replica_gets_nothing_before_it_joins_starts_cold_and_then_adds_its_cache() {
        let trace = trace();
        let rep = simulate_scale(&trace, &homes_table(), &config(2, 3)).unwrap();
        for w in &rep.windows {
            let joined = w.start >= rep.at;
            assert_eq!(w.replicas, if joined { 3 } else { 2 });
            assert_eq!(
                w.flash_shares[2] > 0.0,
                joined,
                "window at {}: {:?}",
                w.start,
                w.flash_shares
            );
        }
        // Three caches of 100 lists hold more of the 400 than two.
        assert!(
            rep.after < rep.before,
            "{} after, {} before",
            rep.after,
            rep.before
        );
        // The window of the change pays for the new replica's cold cache.
        let first = &rep.windows[rep.at / 2_000];
        assert!(
            first.miss_bytes_ratio > rep.after,
            "{} vs {}",
            first.miss_bytes_ratio,
            rep.after
        );
        assert!(
            rep.flash_share_max_after < 0.5,
            "{}",
            rep.flash_share_max_after
        );
    }

    #[test]
    fn a_leaving_replica_gets_nothing_after_it_leaves_and_a_plain_table_is_refused() {
        let trace = trace();
        let rep = simulate_scale(&trace, &homes_table(), &config(3, 2)).unwrap();
        for w in rep.windows.iter().filter(|w| w.start >= rep.at) {
            assert_eq!(w.flash_shares[2], 0.0, "window at {}", w.start);
        }
        assert!(
            rep.after > rep.before,
            "{} after, {} before",
            rep.after,
            rep.before
        );
        let plain = VotingTable::new(2, vec![TableRow::new("t0", 0, 1.0)], BTreeMap::new());
        let e = simulate_scale(&trace, &plain.unwrap(), &config(2, 3)).unwrap_err();
        assert!(e.to_string().contains("--virtual-homes"), "{e}");
    }
}
