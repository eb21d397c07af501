//! `p2c`: power of two choices (Mitzenmacher, "The power of two choices in randomized load
//! balancing", IEEE TPDS 2001; used between cache nodes by DistCache, FAST 2019).
//!
//! Draws two distinct live replicas uniformly at random and takes the less loaded; on a tie
//! the first drawn. With a single live replica it takes it without drawing. Exactly two
//! draws otherwise: `a = below(live)`, then `b = below(live - 1)` shifted past `a`.

use data::rng::Rng;

use crate::load::{live_mask, nth_set_bit, LoadView};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason, RoutingPolicy,
};

/// Power of two choices over the live replicas.
#[derive(Clone, Debug)]
pub struct P2c {
    replicas: usize,
}

impl P2c {
    /// Power-of-two-choices routing over `replicas` replicas.
    pub fn new(replicas: usize) -> Self {
        P2c { replicas }
    }
}

impl BuildPolicy for P2c {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Ok(Self::new(params.replicas))
    }
}

impl RoutingPolicy for P2c {
    fn kind(&self) -> PolicyKind {
        PolicyKind::P2c
    }

    fn route(&self, _query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let live = live_mask(load, self.replicas);
        let n = u64::from(live.count_ones());
        match n {
            0 => None,
            1 => Some(Decision::to(live.trailing_zeros() as usize, Reason::NoVote)),
            _ => {
                let i = rng.below(n);
                let mut j = rng.below(n - 1);
                if j >= i {
                    j += 1;
                }
                let a = nth_set_bit(live, i);
                let b = nth_set_bit(live, j);
                let pick = if load.load(b) < load.load(a) { b } else { a };
                Some(Decision::to(pick, Reason::NoVote))
            }
        }
    }
}
