//! Requests that no query routes, under `fallback = "<policy>"`: those that matched no
//! route, or whose route could not read a query. They are routed by that policy (one of
//! [`QUERYLESS`](crate::routes::QUERYLESS): it reads no query, so the key it is given has
//! no terms) over the same view of the replicas as every other request (liveness, drain,
//! slow start, the stall guard and the load it bounds), and they count in the loads as
//! routed queries do. The policy is built for [`MAX_REPLICAS`] slots, so replicas added
//! or removed at run time need no rebuild: the view says which slots are live.
//!
//! [`State::route_by`] routes them, with this policy instead of the configured one.

use balancer::load::MAX_REPLICAS;
use balancer::policy::{
    build_policy, PolicyError, PolicyKind, PolicyParams, QueryKey, RoutingPolicy,
};

use crate::state::{Choice, NoReplica, State};

/// The fallback policy.
pub struct FallbackRouter {
    policy: Box<dyn RoutingPolicy>,
}

impl FallbackRouter {
    /// A router with policy `kind`.
    pub fn new(kind: PolicyKind) -> Result<Self, PolicyError> {
        let policy = build_policy(kind, &PolicyParams::new(MAX_REPLICAS))?;
        Ok(FallbackRouter { policy })
    }

    /// Routes a request with no query, skipping the replicas in `exclude`: over the live
    /// replicas, or the ejected ones too when none is live. Allocation-free.
    pub fn route(&self, state: &State, exclude: u64) -> Result<Choice, NoReplica> {
        state.route_by(&*self.policy, &QueryKey::new(0, &[]), exclude)
    }
}
