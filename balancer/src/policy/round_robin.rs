//! `round-robin`: the live replicas in turn — the cache-oblivious baseline (DESIGN.md's
//! reference point).
//!
//! A shared atomic counter `i` picks the `(i mod live)`-th live replica, so a dead replica's
//! turns are spread evenly over the others instead of all going to its successor. No paper:
//! this is the classical baseline the voting paper (Archer et al., PVLDB 2019) compares to.

use std::sync::atomic::{AtomicU64, Ordering};

use data::rng::Rng;

use crate::load::{live_mask, nth_set_bit, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Round-robin over the live replicas.
#[derive(Debug)]
pub struct RoundRobin {
    replicas: usize,
    next: AtomicU64,
}

impl RoundRobin {
    /// Round-robin over `replicas` replicas, starting at the first live one.
    pub fn new(replicas: usize) -> Self {
        RoundRobin {
            replicas,
            next: AtomicU64::new(0),
        }
    }
}

impl BuildPolicy for RoundRobin {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for RoundRobin {
    fn kind(&self) -> PolicyKind {
        PolicyKind::RoundRobin
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
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let k = turn % u64::from(live.count_ones());
        Some(Decision::to(nth_set_bit(live, k), Reason::NoVote))
    }
}
