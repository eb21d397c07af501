//! `rj-ch`: random-jump consistent hashing (Chen et al., RJ-CH): bounded loads without
//! cascaded overflow.
//!
//! The query's home is the first live replica clockwise from its `query_hash`. If the home
//! is below `cap = load_cap(eps, total, live)` it takes the query ([`Reason::Vote`]);
//! otherwise the query jumps to a uniformly random live replica under the cap
//! ([`Reason::Overflow`]), never to a fixed neighbour, so one hot key's overflow does not
//! pile onto the next replica on the ring. If the load view is inconsistent and no live
//! replica is under the cap, the least loaded live replica takes it (Overflow).

use data::rng::Rng;

use crate::load::{
    least_loaded_member, live_mask, load_cap, random_member, under_cap_mask, LoadView,
};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};
use crate::ring::Ring;

/// Random-jump consistent hashing.
#[derive(Clone, Debug)]
pub struct RjCh {
    ring: Ring,
    eps: f64,
}

impl RjCh {
    /// Builds the ring of `params.replicas` replicas with `params.vnodes` virtual nodes.
    pub fn new(params: &PolicyParams) -> Result<Self, PolicyError> {
        params.validate()?;
        Ok(RjCh {
            ring: Ring::new(params.replicas, params.vnodes)?,
            eps: params.eps,
        })
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }
}

impl BuildPolicy for RjCh {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Self::new(params)
    }
}

impl RoutingPolicy for RjCh {
    fn kind(&self) -> PolicyKind {
        PolicyKind::RjCh
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.ring.replicas());
        let home = self.ring.first_in(query.query_hash, live)?;
        let cap = load_cap(self.eps, load.total(), live.count_ones() as usize);
        if load.load(home) < cap {
            return Some(Decision::to(home, Reason::Vote));
        }
        let under = under_cap_mask(load, live, cap);
        let r = if under != 0 {
            random_member(under, rng)
        } else {
            least_loaded_member(load, live)
        };
        Some(Decision::to(r, Reason::Overflow))
    }
}
