//! `ch-bl`: consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam,
//! "Consistent hashing with bounded loads", SODA 2018; HAProxy `hash-balance-factor`).
//!
//! The query's point is its `query_hash`; it walks clockwise over the distinct live
//! replicas and takes the first whose load is below
//! `cap = load_cap(eps, total, live)`. The first live replica is the query's home
//! ([`Reason::Vote`]); any later one is an [`Reason::Overflow`]. Since the live loads sum to
//! at most `total`, some live replica is under the cap; if the load view is inconsistent and
//! none is, the least loaded live replica takes the query (Overflow).

use data::rng::Rng;

use crate::load::{least_loaded_member, live_mask, load_cap, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};
use crate::ring::Ring;

/// Consistent hashing with bounded loads.
#[derive(Clone, Debug)]
pub struct ChBl {
    ring: Ring,
    eps: f64,
}

impl ChBl {
    /// Builds the ring of `params.replicas` replicas with `params.vnodes` virtual nodes.
    pub fn new(params: &PolicyParams) -> Result<Self, PolicyError> {
        params.validate()?;
        Ok(ChBl {
            ring: Ring::new(params.replicas, params.vnodes)?,
            eps: params.eps,
        })
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }
}

impl BuildPolicy for ChBl {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Self::new(params)
    }
}

impl RoutingPolicy for ChBl {
    fn kind(&self) -> PolicyKind {
        PolicyKind::ChBl
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, _rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.ring.replicas());
        if live == 0 {
            return None;
        }
        let cap = load_cap(self.eps, load.total(), live.count_ones() as usize);
        let mut reason = Reason::Vote;
        for r in self.ring.walk(query.query_hash) {
            if live & (1 << r) == 0 {
                continue;
            }
            if load.load(r) < cap {
                return Some(Decision::to(r, reason));
            }
            reason = Reason::Overflow;
        }
        Some(Decision::to(
            least_loaded_member(load, live),
            Reason::Overflow,
        ))
    }
}
