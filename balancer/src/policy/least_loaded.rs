//! `least-loaded`: the live replica with the smallest load, ties to the lowest index — the
//! "join the shortest queue" limit of the power-of-d family (Mitzenmacher, "The power of two
//! choices in randomized load balancing", IEEE TPDS 2001) with d = R.

use data::rng::Rng;

use crate::load::{least_loaded_member, live_mask, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Least loaded live replica.
#[derive(Clone, Debug)]
pub struct LeastLoaded {
    replicas: usize,
}

impl LeastLoaded {
    /// Least-loaded routing over `replicas` replicas.
    pub fn new(replicas: usize) -> Self {
        LeastLoaded { replicas }
    }
}

impl BuildPolicy for LeastLoaded {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for LeastLoaded {
    fn kind(&self) -> PolicyKind {
        PolicyKind::LeastLoaded
    }

    fn route(
        &self,
        _query: &QueryKey<'_>,
        load: &dyn LoadView,
        _rng: &mut Rng,
    ) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        if live == 0 {
            return None;
        }
        Some(Decision::to(
            least_loaded_member(load, live),
            Reason::NoVote,
        ))
    }
}
