//! Runs a grid of (routing policy × cache size) replays of one trace in parallel (rayon),
//! plus the one-big-cache bound for each cache size. This is what `ballot eval` reports.

use std::sync::Arc;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::{build_policy, PolicyError, PolicyKind, PolicyParams};
use data::table::VotingTable;
use rayon::prelude::*;
use serde::Serialize;

use super::admission::Admission;
use super::bound::one_big_cache;
use super::replay::{replay, NoObserver, SimConfig, SimLoad, SimResult};
use super::trace::Trace;
use eviction::EvictionKind;

/// What to run.
#[derive(Clone, Debug)]
pub struct GridConfig {
    /// Replica count R.
    pub replicas: usize,
    /// Per-replica capacities as fractions of the trace's distinct postings bytes.
    pub cache_fracs: Vec<f64>,
    /// Policies to replay.
    pub policies: Vec<PolicyKind>,
    /// Eviction policy of the simulated caches.
    pub eviction: EvictionKind,
    /// Load-bound slack of bounded policies.
    pub eps: f64,
    /// Load window in queries.
    pub window: usize,
    /// Routing RNG seed.
    pub seed: u64,
    /// Voting table for the `table` policy.
    pub table: Option<Arc<VotingTable>>,
    /// What each policy's load window counts.
    pub loads: PolicyLoads,
    /// `table`'s home share (`balancer::policy::vote`).
    pub homes: f64,
    /// `table`'s weight of the shadow caches' evidence
    /// (`balancer::policy::vote::add_cache_evidence`; 0: the table alone).
    pub evidence: f64,
    /// With a table: its replicas cache a list only where it votes enough for the list's
    /// term ([`Admission`]); every other policy's replicas cache all they read.
    pub admission: Option<CacheAdmission>,
}

/// What the load window counts, per policy: a learned table is served under the bound it
/// was trained with (by default the work a query costs its replica), every other policy
/// under its own (by default query counts, DESIGN.md's standard evaluation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyLoads {
    /// For policies that route by a voting table.
    pub table: SimLoad,
    /// For every other policy.
    pub others: SimLoad,
}

impl PolicyLoads {
    /// The same load for every policy.
    pub fn uniform(load: SimLoad) -> Self {
        PolicyLoads {
            table: load,
            others: load,
        }
    }

    /// The load of `kind`.
    pub fn of(self, kind: PolicyKind) -> SimLoad {
        if kind.needs_table() {
            self.table
        } else {
            self.others
        }
    }
}

/// One (policy, cache size) result, as `ballot eval` writes it to JSON.
#[derive(Clone, Debug, Serialize)]
pub struct GridResult {
    /// Policy name.
    pub policy: String,
    /// Cache fraction.
    pub cache_frac: f64,
    /// Replica count.
    pub replicas: usize,
    /// Eviction policy name.
    pub eviction: String,
    /// What the load window counted (`window` or `work`).
    pub load: String,
    /// Per-replica capacity in bytes.
    pub capacity_bytes: u64,
    /// The measurements.
    #[serde(flatten)]
    pub sim: SimResult,
}

/// A reference bound at one cache size.
#[derive(Clone, Debug, Serialize)]
pub struct BoundResult {
    /// Bound name (`one-big-cache`).
    pub name: String,
    /// Cache fraction (per replica; the bound's cache is R times larger).
    pub cache_frac: f64,
    /// Miss bytes ratio over the test part.
    pub miss_bytes_ratio: f64,
}

/// Everything a grid run produced.
#[derive(Clone, Debug, Serialize)]
pub struct GridOutput {
    /// One row per (policy, cache size), in the order policies × sizes were given.
    pub results: Vec<GridResult>,
    /// One bound per cache size.
    pub bounds: Vec<BoundResult>,
    /// Median over the replays of single-thread term lookups per second (routing plus
    /// cache access, with the configured eviction policy).
    pub lookups_per_sec: f64,
}

impl GridConfig {
    /// The routing policies' parameters over `trace`, the table's included.
    pub fn policy_params(&self, trace: &Trace) -> PolicyParams {
        PolicyParams {
            eps: self.eps,
            homes: self.homes,
            evidence: self.evidence,
            term_bytes: Arc::new(trace.term_bytes_map()),
            table: self.table.clone(),
            ..PolicyParams::new(self.replicas)
        }
    }

    /// The table's admission rule over `trace`, when one is asked for.
    pub fn admission_rule(&self, trace: &Trace) -> Result<Option<Arc<Admission>>, PolicyError> {
        let (Some(rule), Some(table)) = (self.admission, self.table.as_ref()) else {
            return Ok(None);
        };
        Ok(Some(Arc::new(Admission::for_table(
            trace,
            table,
            self.replicas,
            rule,
        )?)))
    }

    /// One replay's parameters: cache size `frac`, load view `load`, and `admission` (for
    /// the table's replay; dropped where the caches are larger than the table was trained
    /// for, see [`Admission::applies`]).
    pub fn sim_config(
        &self,
        trace: &Trace,
        frac: f64,
        load: SimLoad,
        admission: Option<Arc<Admission>>,
    ) -> SimConfig {
        let capacity_bytes = trace.capacity_for(frac);
        SimConfig {
            replicas: self.replicas,
            capacity_bytes,
            eviction: self.eviction,
            window: self.window,
            seed: self.seed,
            load,
            admission: admission.filter(|a| a.applies(capacity_bytes)),
        }
    }
}

/// Runs every (policy, cache size) pair of `cfg` over `trace`.
pub fn run_grid(trace: &Trace, cfg: &GridConfig) -> Result<GridOutput, PolicyError> {
    let params = cfg.policy_params(trace);
    // Build every policy once up front so a bad configuration fails before any work.
    for &kind in &cfg.policies {
        build_policy(kind, &params)?;
    }
    let jobs: Vec<(PolicyKind, f64)> = cfg
        .policies
        .iter()
        .flat_map(|&k| cfg.cache_fracs.iter().map(move |&f| (k, f)))
        .collect();
    let admission = cfg.admission_rule(trace)?;
    let results: Vec<GridResult> = jobs
        .par_iter()
        .map(|&(kind, frac)| {
            let load = cfg.loads.of(kind);
            let rule = admission.clone().filter(|_| kind == PolicyKind::Table);
            let sc = cfg.sim_config(trace, frac, load, rule);
            // A fresh policy per job: round-robin keeps a counter, and runs must not share
            // state across threads. It was built successfully above, so this cannot fail.
            let policy = build_policy(kind, &params)?;
            let sim = replay(trace, policy.as_ref(), &sc, &mut NoObserver);
            Ok(GridResult {
                policy: kind.name().to_owned(),
                cache_frac: frac,
                replicas: cfg.replicas,
                eviction: cfg.eviction.name().to_owned(),
                load: load.kind().name().to_owned(),
                capacity_bytes: sc.capacity_bytes,
                sim,
            })
        })
        .collect::<Result<_, PolicyError>>()?;
    let bounds = cfg
        .cache_fracs
        .par_iter()
        .map(|&frac| BoundResult {
            name: "one-big-cache".to_owned(),
            cache_frac: frac,
            miss_bytes_ratio: one_big_cache(
                trace,
                &cfg.sim_config(trace, frac, SimLoad::Queries, None),
            ),
        })
        .collect();
    let mut speeds: Vec<f64> = results.iter().map(|r| r.sim.lookups_per_sec()).collect();
    speeds.sort_by(f64::total_cmp);
    let lookups_per_sec = speeds.get(speeds.len() / 2).copied().unwrap_or(0.0);
    Ok(GridOutput {
        results,
        bounds,
        lookups_per_sec,
    })
}
