//! `stable-hash`: Solr's `shards.preference=replica.base:stable:hash` (`solrj`'s
//! `AffinityReplicaListTransformer`, built by `AffinityReplicaListTransformerFactory`).
//!
//! Solr sorts a shard's replicas by core URL, rotates the list to start at `dividend % size`
//! and queries the first (the rest are the failover order). Here the live replicas, sorted
//! by index (ballot's stand-in for the core URL order), take the query in turn: the
//! `(query_hash % live)`-th live replica, counting from the lowest index. Identical queries
//! meet the same replica while the live set stands, whatever the loads: there is no load
//! bound. Always [`Reason::Vote`]; no draw from the [`Rng`]; no parameters.
//!
//! As in Solr, where `CloudReplicaSource` drops the replicas that are not active before the
//! transform, a replica that dies shrinks the modulus, so queries are remapped across all
//! the survivors, not only the dead replica's (unlike `query-hash`'s ring).
//!
//! Where ballot departs from Solr, and why: the dividend is [`QueryKey::query_hash`] (the
//! 64-bit hash of the normalised query) instead of `|lookup3ycs(q)|`, Jenkins' lookup3 of the
//! raw `q` string, so queries that differ only in case or spacing meet the same replica, and
//! the `Integer.MIN_VALUE` corner (one hash in 2³², whose absolute value stays negative)
//! does not arise. Solr's fallbacks (a random shuffle for a missing `q`, the
//! `stable:dividend` form) have no counterpart: every ballot query has a hash.

use data::rng::Rng;

use crate::load::{live_mask, nth_set_bit, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// The query's hash modulo the live replicas.
#[derive(Clone, Debug)]
pub struct StableHash {
    replicas: usize,
}

impl StableHash {
    /// Stable-hash routing over `replicas` replicas.
    pub fn new(replicas: usize) -> Self {
        StableHash { replicas }
    }
}

impl BuildPolicy for StableHash {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for StableHash {
    fn kind(&self) -> PolicyKind {
        PolicyKind::StableHash
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, _rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        let n = u64::from(live.count_ones());
        if n == 0 {
            return None;
        }
        let r = nth_set_bit(live, query.query_hash % n);
        Some(Decision::to(r, Reason::Vote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;

    /// The dividend of `q="foo"` in the peers notes (§2): `|lookup3ycs("foo")|`.
    const FOO: u64 = 311_607_146;
    /// The dividend of `q="hello"`.
    const HELLO: u64 = 1_782_051_334;

    fn route(load: &StaticLoad, query_hash: u64) -> Option<Decision> {
        let policy = StableHash::build(&PolicyParams::new(load.loads.len())).unwrap();
        policy.route(&QueryKey::new(query_hash, &[]), load, &mut Rng::new(1))
    }

    fn replica(load: &StaticLoad, query_hash: u64) -> Option<u16> {
        route(load, query_hash).map(|d| d.replica)
    }

    #[test]
    fn the_notes_examples() {
        // foo: 311607146 % 3 = 2, the third replica; hello: % 3 = 1.
        let three = StaticLoad::idle(3);
        assert_eq!(route(&three, FOO), Some(Decision::to(2, Reason::Vote)));
        assert_eq!(replica(&three, HELLO), Some(1));
        // With the third down, % 2 = 0: the first.
        let two = StaticLoad::with_live(vec![0; 3], vec![true, true, false]);
        assert_eq!(replica(&two, FOO), Some(0));
        // R = 8: % 8 = 2, the third replica by index.
        assert_eq!(replica(&StaticLoad::idle(8), FOO), Some(2));
    }

    #[test]
    fn a_dead_replica_shrinks_the_modulus() {
        // Replica 2 of 8 is dead: 311607146 % 7 = 4, the fifth live one of
        // [0, 1, 3, 4, 5, 6, 7], replica 5 (not 2's neighbour: the survivors are remapped).
        let mut live = vec![true; 8];
        live[2] = false;
        let load = StaticLoad::with_live(vec![0; 8], live);
        assert_eq!(replica(&load, FOO), Some(5));
        // Loads play no part.
        let busy = StaticLoad::new(vec![0, 0, 1_000, 0, 0, 0, 0, 0]);
        assert_eq!(replica(&busy, FOO), Some(2));
        // Nothing live, nothing chosen.
        let none = StaticLoad::with_live(vec![0; 4], vec![false; 4]);
        assert_eq!(route(&none, FOO), None);
    }

    #[test]
    fn deterministic_and_draws_nothing() {
        let load = StaticLoad::idle(5);
        let policy = StableHash::new(5);
        assert_eq!(policy.kind(), PolicyKind::StableHash);
        for h in [0, 1, 4, 5, 99, u64::MAX] {
            let mut rng = Rng::new(9);
            let d = policy.route(&QueryKey::new(h, &[]), &load, &mut rng);
            assert_eq!(d, Some(Decision::to((h % 5) as usize, Reason::Vote)));
            assert_eq!(d, route(&load, h), "the same query, the same replica");
            assert_eq!(rng.next_u64(), Rng::new(9).next_u64(), "no draw");
        }
        // Only the policy's own replicas are candidates: 3 of the view's 5.
        let small = StableHash::new(3);
        let d = small.route(&QueryKey::new(4, &[]), &load, &mut Rng::new(1));
        assert_eq!(d, Some(Decision::to(1, Reason::Vote)));
    }
}
