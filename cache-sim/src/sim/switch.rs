//! A live switch from one voting table to another, simulated in the middle of the test
//! part: what the caches go through when the balancer reloads its table, with the
//! balancer's own ramp ([`balancer::ramp`]) and without it (an instant switch).
//!
//! The caches warm on the train part with the old table, as in `ballot eval`. The switch
//! happens at test query `at`. From there, the balancer's own [`RampPolicy`] routes by a
//! [`RampedTable`] from the old to the new table, at a progress that grows linearly from 0
//! to 1 over `ramp` queries (`ramp = 0` is the instant switch: every query from `at` on
//! routes by the new table). A query follows the new table once its key term does
//! ([`balancer::ramp::follows_new`]`(key, progress)`, see [`balancer::ramp`]), exactly as
//! in the HTTP balancer, with the same clock: the queries the policy has routed (DESIGN.md: "a new table must be rolled out gradually (move a
//! few terms at a time), or every replica goes cold at once").
//!
//! [`WindowedMisses`] is an [`Observer`] that sums requested and missed postings bytes per
//! window of test queries, so the cold-cache spike after the switch shows up over time.
//! [`simulate_switch`] runs both modes (in parallel) and reports them side by side.
//!
//! # Two peaks
//!
//! The report gives the highest windowed miss bytes ratio of each mode twice:
//!
//! * `peak_*`: over every window from the switch to the end of the test part. On a real
//!   log this often is a window far from the switch where the log itself is expensive (on
//!   AOL, a window 8,500 queries after the switch that the new table alone also peaks in),
//!   and the two modes differ there only because their LRU states drifted apart.
//! * `peak_transition_*`: over the windows that overlap the transition, from the switch to
//!   [`TRANSITION_SETTLE`] queries after the ramp ends (the same span for both modes). This
//!   is the cost of the switch itself: the instant switch's cold spike against the ramp's
//!   spread-out cost, plus what the ramp leaves behind.

use std::sync::Arc;

use balancer::policy::table::TableVotes;
use balancer::policy::PolicyError;
use balancer::ramp::{RampPolicy, RampedTable, SharedVotes};
use data::table::VotingTable;
use serde::Serialize;

use super::movement::{movement, requested_by_term, top_votes};
#[cfg(test)]
use super::replay::SimLoad;
use super::replay::{ratio, replay, Observer, SimConfig, SimResult};
use super::trace::Trace;

/// Default length of the ramp, in queries: about one cache refill. An instant switch's
/// cold spike is over within about a refill, and a ramp costs extra misses for as long as
/// it lasts (the caches hold both tables' working sets), so ramps much longer than that
/// raise the peak instead of lowering it (docs/operations.md, "Switching tables live").
pub const DEFAULT_RAMP: usize = 2_000;
/// Queries after the end of the ramp that still count towards the transition peak.
pub const TRANSITION_SETTLE: usize = 5_000;
/// Default reporting window of the switch simulation, in queries.
pub const DEFAULT_SWITCH_WINDOW: usize = 2_000;

/// Sums requested and missed postings bytes per window of `window` test queries.
#[derive(Clone, Debug)]
pub struct WindowedMisses<'a> {
    term_bytes: &'a [u64],
    train_len: usize,
    window: usize,
    requested: Vec<u64>,
    missed: Vec<u64>,
}

impl<'a> WindowedMisses<'a> {
    /// Windows of `window` (at least 1) queries over the test part of `trace`; the last one
    /// may be shorter.
    pub fn new(trace: &'a Trace, window: usize) -> Self {
        let window = window.max(1);
        let n = trace.test_len().div_ceil(window);
        WindowedMisses {
            term_bytes: &trace.term_bytes,
            train_len: trace.train_len,
            window,
            requested: vec![0; n],
            missed: vec![0; n],
        }
    }

    /// Miss bytes ratio of each window, in order.
    pub fn ratios(&self) -> Vec<f64> {
        self.requested
            .iter()
            .zip(&self.missed)
            .map(|(&r, &m)| ratio(m, r))
            .collect()
    }

    /// The window length in queries.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Requested and missed bytes of each window, in order.
    pub(crate) fn totals(&self) -> (&[u64], &[u64]) {
        (&self.requested, &self.missed)
    }
}

impl Observer for WindowedMisses<'_> {
    #[inline]
    fn on_lookup(&mut self, query: usize, counted: bool, _replica: u16, term: u32, hit: bool) {
        if !counted {
            return;
        }
        let w = (query - self.train_len) / self.window;
        let bytes = self.term_bytes[term as usize];
        self.requested[w] += bytes;
        if !hit {
            self.missed[w] += bytes;
        }
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Replicas, capacity, eviction, load window and seed, as for a plain replay.
    pub sim: SimConfig,
    /// Load-bound slack of the vote rule.
    pub eps: f64,
    /// Home share of the vote rule (`balancer::policy::vote`; 0: off).
    pub homes: f64,
    /// Test query (counted from the start of the test part) at which the switch happens.
    pub at: usize,
    /// Queries over which the ramp's progress goes from 0 to 1 (0 makes the "ramp" mode
    /// an instant switch too).
    pub ramp: usize,
    /// Reporting window in test queries.
    pub window: usize,
}

/// One reporting window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchWindow {
    /// First test query of the window.
    pub start: usize,
    /// Miss bytes ratio with an instant switch.
    pub instant: f64,
    /// Miss bytes ratio with the ramp.
    pub ramp: f64,
}

/// Both modes of one switch, side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchReport {
    /// Test query at which the switch happens.
    pub at: usize,
    /// Ramp length in queries.
    pub ramp: usize,
    /// Reporting window in queries.
    pub window: usize,
    /// Miss bytes ratio per window of test queries.
    pub windows: Vec<SwitchWindow>,
    /// Highest windowed miss bytes ratio among the windows that hold a query routed at or
    /// after the switch, instant switch.
    pub peak_instant: f64,
    /// The same with the ramp.
    pub peak_ramp: f64,
    /// End (exclusive, in test queries) of the transition: `at + ramp +`
    /// [`TRANSITION_SETTLE`].
    pub transition_end: usize,
    /// Highest windowed miss bytes ratio among the windows that overlap the transition
    /// `[at, transition_end)`, instant switch.
    pub peak_transition_instant: f64,
    /// The same with the ramp.
    pub peak_transition_ramp: f64,
    /// Share of the test part's requested postings bytes whose term's top vote moves
    /// ([`super::movement`]): how much of the cached working set must move.
    pub moved_bytes_share: f64,
    /// Miss bytes ratio over the whole test part, instant switch.
    pub overall_instant: f64,
    /// The same with the ramp.
    pub overall_ramp: f64,
    /// The instant switch's full replay result.
    #[serde(skip)]
    pub instant: SimResult,
    /// The ramped switch's full replay result.
    #[serde(skip)]
    pub ramped: SimResult,
}

/// Compiles `table` for routing over `trace`'s terms (stand-in votes use its bytes).
pub fn compile_table(
    trace: &Trace,
    table: &VotingTable,
    replicas: usize,
) -> Result<SharedVotes, PolicyError> {
    let term_bytes = Arc::new(trace.term_bytes_map());
    Ok(Arc::new(TableVotes::build(table, replicas, term_bytes)?))
}

/// Replays `trace` through one switch from `old` to `new`, ramped over `ramp` queries
/// (0: instant), and returns the replay result with its windowed miss bytes ratios.
pub fn replay_switch(
    trace: &Trace,
    old: &SharedVotes,
    new: &SharedVotes,
    cfg: &SwitchConfig,
    ramp: usize,
) -> (SimResult, Vec<f64>) {
    let policy = RampPolicy::new(
        RampedTable::new(Arc::clone(old), Arc::clone(new)),
        cfg.sim.replicas,
        cfg.eps,
        cfg.homes,
        (trace.train_len + cfg.at) as u64,
        ramp as u64,
    );
    let mut windows = WindowedMisses::new(trace, cfg.window);
    let sim = replay(trace, &policy, &cfg.sim, &mut windows);
    (sim, windows.ratios())
}

/// Simulates the switch from `old` to `new` both instantly and with the ramp (the two
/// replays run in parallel) and reports them side by side.
///
/// Errors if either table was learned for a replica count other than `cfg.sim.replicas`.
pub fn simulate_switch(
    trace: &Trace,
    old: &VotingTable,
    new: &VotingTable,
    cfg: &SwitchConfig,
) -> Result<SwitchReport, PolicyError> {
    let test = trace.train_len..trace.len();
    let moved = movement(
        &top_votes(trace, old),
        &top_votes(trace, new),
        &requested_by_term(trace, test),
    );
    let old = compile_table(trace, old, cfg.sim.replicas)?;
    let new = compile_table(trace, new, cfg.sim.replicas)?;
    let ((instant, instant_w), (ramped, ramp_w)) = rayon::join(
        || replay_switch(trace, &old, &new, cfg, 0),
        || replay_switch(trace, &old, &new, cfg, cfg.ramp),
    );
    let window = cfg.window.max(1);
    let windows: Vec<SwitchWindow> = instant_w
        .iter()
        .zip(&ramp_w)
        .enumerate()
        .map(|(i, (&instant, &ramp))| SwitchWindow {
            start: i * window,
            instant,
            ramp,
        })
        .collect();
    // Windows that end after the switch point hold at least one switched query.
    let after = |w: &&SwitchWindow| w.start + window > cfg.at;
    let transition_end = cfg
        .at
        .saturating_add(cfg.ramp)
        .saturating_add(TRANSITION_SETTLE);
    let during = |w: &&SwitchWindow| after(w) && w.start < transition_end;
    let peak = |keep: &dyn Fn(&&SwitchWindow) -> bool, f: fn(&SwitchWindow) -> f64| {
        windows.iter().filter(keep).map(f).fold(0.0f64, f64::max)
    };
    Ok(SwitchReport {
        at: cfg.at,
        ramp: cfg.ramp,
        window,
        moved_bytes_share: moved.share(),
        peak_instant: peak(&after, |w| w.instant),
        peak_ramp: peak(&after, |w| w.ramp),
        transition_end,
        peak_transition_instant: peak(&during, |w| w.instant),
        peak_transition_ramp: peak(&during, |w| w.ramp),
        overall_instant: instant.miss_bytes_ratio,
        overall_ramp: ramped.miss_bytes_ratio,
        windows,
        instant,
        ramped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::replay::replay;
    use balancer::policy::table::TablePolicy;
    use balancer::policy::PolicyParams;
    use data::rng::Rng as DataRng;
    use data::sizes::{SizeTable, Sizes};
    use data::table::TableRow;
    use eviction::EvictionKind;
    use std::collections::BTreeMap;

    const R: usize = 4;
    const TERMS: usize = 400;

    fn term(i: usize) -> String {
        format!("t{i}")
    }

    fn sizes() -> Sizes {
        Sizes::Table(SizeTable::from_pairs((0..TERMS).map(|i| (term(i), 100))))
    }

    /// Synthetic queries: mostly one term, some two, mildly skewed towards low term ids.
    fn trace() -> Trace {
        let mut rng = DataRng::new(7);
        let queries: Vec<String> = (0..60_000)
            .map(|_| {
                let n = 1 + usize::from(rng.below(4) == 0);
                (0..n)
                    .map(|_| term((rng.unit().powf(1.5) * TERMS as f64) as usize))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        Trace::build(queries.iter().map(String::as_str), 40_000, &sizes())
    }

    /// Every term votes for `home(i)` with weight 1.
    fn table(home: impl Fn(usize) -> u16) -> VotingTable {
        VotingTable {
            replicas: R as u16,
            rows: (0..TERMS)
                .map(|i| TableRow {
                    term: term(i),
                    replica: home(i),
                    weight: 1.0,
                })
                .collect(),
            metadata: BTreeMap::new(),
        }
    }

    fn cfg(trace: &Trace) -> SwitchConfig {
        SwitchConfig {
            sim: SimConfig {
                admission: None,
                replicas: R,
                // 120 of the 400 terms fit in each replica: the four caches together
                // hold all of them only when each term has one home.
                capacity_bytes: trace.capacity_for(0.3),
                eviction: EvictionKind::Lru,
                window: 1_000,
                seed: 1,
                load: SimLoad::Queries,
            },
            eps: 0.05,
            homes: balancer::policy::DEFAULT_HOMES,
            at: trace.test_len() / 2,
            ramp: 4_000,
            window: 500,
        }
    }

    #[test]
    fn ramp_lowers_the_peak_after_a_total_switch() {
        let trace = trace();
        let cfg = cfg(&trace);
        // The new table disagrees with the old one on every term.
        let old = table(|i| (i % R) as u16);
        let new = table(|i| ((i + 1) % R) as u16);
        let rep = simulate_switch(&trace, &old, &new, &cfg).unwrap();
        assert_eq!(rep.windows.len(), trace.test_len().div_ceil(cfg.window));
        // Measured: 0.379 against 0.548.
        assert!(
            rep.peak_ramp + 0.05 < rep.peak_instant,
            "ramp peak {} vs instant peak {}",
            rep.peak_ramp,
            rep.peak_instant
        );
        // The transition holds the instant switch's spike; its peaks are at most the
        // whole peaks.
        assert_eq!(rep.transition_end, cfg.at + cfg.ramp + TRANSITION_SETTLE);
        assert_eq!(rep.peak_transition_instant, rep.peak_instant);
        assert!(rep.peak_transition_ramp <= rep.peak_ramp);
        assert!(rep.peak_transition_ramp + 0.05 < rep.peak_transition_instant);
        // Before the switch both modes route the same queries the same way.
        for w in rep
            .windows
            .iter()
            .filter(|w| w.start + cfg.window <= cfg.at)
        {
            assert_eq!(w.instant, w.ramp, "window {}", w.start);
        }
        assert_eq!(rep.moved_bytes_share, 1.0);
        // The instant switch really does spike above the steady state before it.
        let before = rep.windows[cfg.at / cfg.window - 1].instant;
        assert!(rep.peak_instant > before + 0.1, "{rep:?}");
    }

    #[test]
    fn switching_to_the_same_table_is_a_plain_replay() {
        let trace = trace();
        let cfg = cfg(&trace);
        let t = table(|i| (i * 7 % R) as u16);
        let rep = simulate_switch(&trace, &t, &t, &cfg).unwrap();

        let params = PolicyParams {
            eps: cfg.eps,
            homes: cfg.homes,
            term_bytes: Arc::new(trace.term_bytes_map()),
            ..PolicyParams::new(R)
        }
        .with_table(Arc::new(t.clone()));
        let plain = TablePolicy::new(&params).unwrap();
        let mut windows = WindowedMisses::new(&trace, cfg.window);
        let base = replay(&trace, &plain, &cfg.sim, &mut windows);
        let base_w = windows.ratios();

        for sim in [&rep.instant, &rep.ramped] {
            let strip = |s: &SimResult| SimResult {
                seconds: 0.0,
                ..s.clone()
            };
            assert_eq!(strip(sim), strip(&base));
        }
        assert_eq!(rep.overall_instant, base.miss_bytes_ratio);
        assert_eq!(rep.overall_ramp, base.miss_bytes_ratio);
        assert_eq!(rep.windows.len(), base_w.len());
        for (w, &b) in rep.windows.iter().zip(&base_w) {
            assert_eq!((w.instant, w.ramp), (b, b), "window {}", w.start);
        }
        assert_eq!(rep.peak_instant, rep.peak_ramp);
        assert_eq!(rep.peak_transition_instant, rep.peak_transition_ramp);
        assert!(rep.peak_transition_instant <= rep.peak_instant);
        assert_eq!(rep.moved_bytes_share, 0.0);
    }

    #[test]
    fn a_table_for_another_replica_count_is_rejected() {
        let trace = trace();
        let mut other = table(|i| (i % R) as u16);
        other.replicas = 8;
        assert!(matches!(
            simulate_switch(&trace, &table(|_| 0), &other, &cfg(&trace)),
            Err(PolicyError::TableReplicas {
                table: 8,
                expected: 4
            })
        ));
    }
}
