//! While a reloaded table ramps in, each query is scored entirely by the old or the new
//! table ([`balancer::ramp`]); `ballot_ramp_queries_total{table}` counts them by the side,
//! read from the request's routing snapshot (the very ramp that routes it).

use metrics::Counter;

use super::Hook;
use crate::ctx::Ctx;
use crate::metrics as m;

/// The ramp accounting's hook.
pub struct RampCount {
    old: Counter,
    new: Counter,
}

impl Default for RampCount {
    /// The hook, with its two counters.
    fn default() -> Self {
        RampCount {
            old: metrics::counter!(m::RAMP_QUERIES, "table" => "old"),
            new: metrics::counter!(m::RAMP_QUERIES, "table" => "new"),
        }
    }
}

impl Hook for RampCount {
    fn on_query(&self, ctx: &Ctx) {
        let ramp = ctx.routing.table.as_ref().and_then(|t| t.ramp.as_ref());
        let (Some(terms), Some(ramp)) = (&ctx.terms, ramp) else {
            return;
        };
        if ramp
            .ramp()
            .at(ramp.progress())
            .query_follows_new(terms.hashes())
        {
            self.new.increment(1);
        } else {
            self.old.increment(1);
        }
    }
}
