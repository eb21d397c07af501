//! `query-hash`: consistent hashing of the whole query (Karger et al., "Consistent hashing
//! and random trees", STOC 1997), with no load bound.
//!
//! The query's point on the ring is its `query_hash`; it goes to the first live replica
//! clockwise. Identical queries always meet the same cache, but a query's terms are not
//! co-located with the same terms in other queries, and a hot query overloads its owner —
//! the two weaknesses `ch-bl` and the voting policies address.

use data::rng::Rng;

use crate::load::{live_mask, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};
use crate::ring::Ring;

/// Consistent hashing of the query, first live replica clockwise.
#[derive(Clone, Debug)]
pub struct QueryHash {
    ring: Ring,
}

impl QueryHash {
    /// Builds the ring of `params.replicas` replicas with `params.vnodes` virtual nodes.
    pub fn new(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(QueryHash {
            ring: Ring::new(params.replicas, params.vnodes)?,
        })
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }
}

impl BuildPolicy for QueryHash {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Self::new(params)
    }
}

impl RoutingPolicy for QueryHash {
    fn kind(&self) -> PolicyKind {
        PolicyKind::QueryHash
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, _rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.ring.replicas());
        let r = self.ring.first_in(query.query_hash, live)?;
        Some(Decision::to(r, Reason::Vote))
    }
}
