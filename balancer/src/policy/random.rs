//! `random`: a uniformly random live replica — the load-only baseline that makes every
//! replica cache the same hot postings (Archer et al., PVLDB 2019, section 1).
//!
//! Draws exactly one `rng.below(live)` per decision, so a seeded simulation is reproducible.

use data::rng::Rng;

use crate::load::{live_mask, random_member, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Uniformly random live replica.
#[derive(Clone, Debug)]
pub struct Random {
    replicas: usize,
}

impl Random {
    /// Random routing over `replicas` replicas.
    pub fn new(replicas: usize) -> Self {
        Random { replicas }
    }
}

impl BuildPolicy for Random {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for Random {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Random
    }

    fn route(&self, _query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        if live == 0 {
            return None;
        }
        Some(Decision::to(random_member(live, rng), Reason::NoVote))
    }
}
