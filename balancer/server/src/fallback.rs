//! Requests that no query routes, under `fallback = "<policy>"`: those that matched no
//! route, or whose route could not read a query. They are routed by that policy (one of
//! [`QUERYLESS`](crate::routes::QUERYLESS): it reads no query, so the key it is given has
//! no terms) over the same view of the replicas as every other request (liveness, drain,
//! slow start, the stall guard and the load it bounds), and they count in the loads as
//! routed queries do. The policy is built for [`MAX_REPLICAS`] slots, so replicas added
//! or removed at run time need no rebuild: the view says which slots are live.
//!
//! The view is built here as [`State::route`] builds it, with this policy instead of the
//! configured one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use balancer::load::{LoadView, Stall, MAX_REPLICAS};
use balancer::policy::{
    build_policy, PolicyError, PolicyKind, PolicyParams, QueryKey, RoutingPolicy,
};
use data::rng::Rng;

use crate::state::{Choice, NoReplica, State};
use crate::view::{View, ViewConfig};

/// The fallback policy.
pub struct FallbackRouter {
    policy: Box<dyn RoutingPolicy>,
    seed: AtomicU64,
}

impl FallbackRouter {
    /// A router with policy `kind`.
    pub fn new(kind: PolicyKind) -> Result<Self, PolicyError> {
        let policy = build_policy(kind, &PolicyParams::new(MAX_REPLICAS))?;
        let seed = data::hash::mix64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                ^ 0xfa11_bac4,
        );
        Ok(FallbackRouter {
            policy,
            seed: AtomicU64::new(seed),
        })
    }

    /// The policy's kind.
    pub fn kind(&self) -> PolicyKind {
        self.policy.kind()
    }

    /// Routes a request with no query, skipping the replicas in `exclude`: over the live
    /// replicas, or the ejected ones too when none is live. Allocation-free.
    pub fn route(&self, state: &State, exclude: u64) -> Result<Choice, NoReplica> {
        let members = state.members.load();
        let base: &dyn LoadView = match &state.window {
            Some(w) => w,
            None => &*state.slots,
        };
        let c = &state.cfg.config;
        let vcfg = ViewConfig {
            stall: state.window.is_some().then_some(Stall {
                eps: c.stall_eps,
                slack: c.stall_slack,
            }),
            slow_start: c.slow_start_queries,
            now: state.clock.now(),
        };
        let view_of =
            |ignore_health| View::new(&members, base, &state.slots, exclude, ignore_health, vcfg);
        let mut view = view_of(false);
        if view.live_bits() == 0 {
            view = view_of(true);
            if view.live_bits() == 0 {
                return Err(NoReplica);
            }
        }
        let seed = self
            .seed
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        let mut rng = Rng::new(seed);
        let d = self
            .policy
            .route(&QueryKey::new(0, &[]), &view, &mut rng)
            .ok_or(NoReplica)?;
        let index = usize::from(d.replica);
        if !view.is_live(index) {
            return Err(NoReplica);
        }
        let replica = members
            .slots
            .get(index)
            .and_then(Option::as_ref)
            .ok_or(NoReplica)?;
        Ok(Choice {
            replica: Arc::clone(replica),
            index,
            reason: d.reason,
        })
    }
}
