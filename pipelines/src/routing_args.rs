//! The routing options shared by every command that simulates or serves the bounded-load
//! vote rule (`eval`, `train`, `grid`, `demo`, `simulate`): what the load bound counts
//! (`--load`, `--work-query-bytes`, in the simulator exactly as in the HTTP balancer:
//! `balancer::load`) and how `table` spreads a query over its homes (`--homes`); and the
//! check of `--cache-admission`, which `eval`, `grid`, `simulate` and `demo` take.
//!
//! `--load auto` (the default) serves each policy under its own bound: a learned table
//! under `work` (it is trained to balance what the bottleneck does, the flash bytes each
//! replica reads, and the bound keeps that balance when traffic drifts), every other policy
//! under `window` (query counts, DESIGN.md's standard evaluation, where the hashing and
//! voting baselines are at their best).

use std::str::FromStr;

use anyhow::{bail, Result};
use balancer::policy::admission::CacheAdmission;
use balancer::{LoadKind, PolicyKind};
use cache_sim::sim::{PolicyLoads, SimLoad};
use clap::Args;

use balancer::load::DEFAULT_WORK_QUERY_BYTES;

/// `--load`: one load for every policy, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadChoice {
    /// `table` under `work`, every other policy under `window`.
    Auto,
    /// This load for every policy.
    Kind(LoadKind),
}

impl FromStr for LoadChoice {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(LoadChoice::Auto);
        }
        s.parse().map(LoadChoice::Kind).map_err(|_| {
            anyhow::anyhow!("unknown load {s:?} (expected one of: auto, window, work, in-flight)")
        })
    }
}

/// What the bounded-load rule counts, and `table`'s homes.
#[derive(Args, Debug, Clone)]
pub struct RoutingArgs {
    /// What the load bound compares: `window` (queries routed to each replica over the
    /// trailing window), `work` (their flash bytes missed at that replica plus
    /// --work-query-bytes each, so the bound balances flash reads, the bottleneck), or
    /// `auto`: `work` for a learned table, `window` for every other policy.
    #[arg(long, default_value = "auto")]
    pub load: LoadChoice,
    /// With `--load work`: the fixed cost of one query, in flash bytes (its CPU time times
    /// the flash bandwidth, roughly).
    #[arg(long, default_value_t = DEFAULT_WORK_QUERY_BYTES)]
    pub work_query_bytes: u64,
    /// Where the live balancer's `work` load learns each query's flash bytes: `header`
    /// (the replica's `x-ballot-miss-bytes`), `orca` (its ORCA load report), `shadow` (the
    /// balancer's own caches of the replicas' size and policy, fed with the queries it
    /// routes: no feedback from the replica), or `auto` (header, else report, else
    /// shadow). The simulators take it too and compute the same bytes for each: their
    /// replica reads exactly the size table's bytes, so its report and a shadow cache
    /// agree (tests/shadow_vs_sim.rs in balancer-server checks it query by query).
    #[arg(long, default_value = "auto")]
    pub work_source: balancer::WorkSource,
    /// `table`'s home share in [0, 1]: a replica whose votes reach this share of the
    /// chosen one's is a home of the query too, and the least loaded home takes it (0: off).
    #[arg(long, default_value_t = balancer::policy::DEFAULT_HOMES)]
    pub homes: f64,
    /// `table`: the weight of the shadow caches' evidence beside the table's votes (the
    /// balancer's `[policy] cache_evidence`; 0: the table alone).
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EVIDENCE)]
    pub cache_evidence: f64,
}

impl RoutingArgs {
    /// Checks `--homes`.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.homes) {
            bail!("--homes {} is not in [0, 1]", self.homes);
        }
        if !(self.cache_evidence >= 0.0 && self.cache_evidence.is_finite()) {
            bail!(
                "--cache-evidence {} is not a finite number >= 0",
                self.cache_evidence
            );
        }
        Ok(())
    }

    /// The load `kind` is bounded by.
    pub fn load_for(&self, kind: PolicyKind) -> LoadKind {
        match self.load {
            LoadChoice::Kind(k) => k,
            LoadChoice::Auto if kind.needs_table() => LoadKind::Work,
            LoadChoice::Auto => LoadKind::Window,
        }
    }

    /// The load a learned table is trained and served under.
    pub fn table_load(&self) -> LoadKind {
        self.load_for(PolicyKind::Table)
    }

    /// The trace simulator's `load`; `in-flight` needs time (`ballot simulate`).
    pub fn sim_load(&self, load: LoadKind) -> Result<SimLoad> {
        self.validate()?;
        Ok(match load {
            LoadKind::Window => SimLoad::Queries,
            LoadKind::Work => SimLoad::Work {
                query_bytes: self.work_query_bytes,
            },
            LoadKind::InFlight => bail!(
                "--load in-flight needs time: the trace simulator bounds `window` or `work` \
                 (`ballot simulate` models requests in flight)"
            ),
        })
    }

    /// The trace simulator's load for `kind`.
    pub fn sim_load_for(&self, kind: PolicyKind) -> Result<SimLoad> {
        self.sim_load(self.load_for(kind))
    }

    /// The simulator's loads of every policy.
    pub fn policy_loads(&self) -> Result<PolicyLoads> {
        Ok(PolicyLoads {
            table: self.sim_load_for(PolicyKind::Table)?,
            others: self.sim_load_for(PolicyKind::RoundRobin)?,
        })
    }

    /// How `--load` reads in reports: `auto (table: work, others: window)` or the kind.
    pub fn describe(&self) -> String {
        match self.load {
            LoadChoice::Auto => format!(
                "auto (table: {}, others: {})",
                self.table_load(),
                self.load_for(PolicyKind::RoundRobin)
            ),
            LoadChoice::Kind(k) => k.to_string(),
        }
    }
}

/// `--cache-admission SHARE` (`eval`, `grid`, `simulate`, `demo`), checked: the table's cache
/// admission rule ([`balancer::policy::admission`]), or `None` when not given.
pub fn cache_admission(share: Option<f64>) -> Result<Option<CacheAdmission>> {
    share
        .map(|s| CacheAdmission::new(s).map_err(|e| anyhow::anyhow!("--cache-admission: {e}")))
        .transpose()
}

/// Refuses `--cache-admission` when the policies (parsed only if the flag is given) leave
/// out `table`, the only policy it changes: the flag would silently do nothing.
pub fn cache_admission_needs_table(
    share: Option<f64>,
    policies: impl FnOnce() -> Result<Vec<PolicyKind>>,
) -> Result<()> {
    if share.is_some() && !policies()?.contains(&PolicyKind::Table) {
        bail!("--cache-admission changes only policy `table`: add it to --policies");
    }
    Ok(())
}
