//! The `--load` and `--work-query-bytes` options shared by every command that simulates or
//! serves the bounded-load rule (`eval`, `train`, `grid`, `demo`): what the load bound
//! counts, in the simulator exactly as in the HTTP balancer (`balancer::load`).

use anyhow::{bail, Result};
use balancer::LoadKind;
use cache_sim::sim::SimLoad;
use clap::Args;

/// Default fixed cost of one query under `--load work`, in flash bytes: about a
/// millisecond of a replica's CPU expressed at the demo's emulated flash bandwidth.
pub const DEFAULT_WORK_QUERY_BYTES: u64 = 4_096;

/// What the bounded-load rule counts.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// What the load bound compares: `window` (queries routed to each replica over the
    /// trailing window) or `work` (their flash bytes missed at that replica plus
    /// --work-query-bytes each, so the bound balances flash reads, the bottleneck).
    #[arg(long, default_value = "window")]
    pub load: LoadKind,
    /// With `--load work`: the fixed cost of one query, in flash bytes.
    #[arg(long, default_value_t = DEFAULT_WORK_QUERY_BYTES)]
    pub work_query_bytes: u64,
}

impl LoadArgs {
    /// The trace simulator's load; `in-flight` needs time (`ballot simulate`).
    pub fn sim_load(&self) -> Result<SimLoad> {
        Ok(match self.load {
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
}
