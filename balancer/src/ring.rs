//! A consistent-hashing ring (Karger et al., "Consistent hashing and random trees", STOC
//! 1997) with virtual nodes, shared by `query-hash`, `ch-bl` (Mirrokni et al. 2018) and
//! `rj-ch` (Chen et al.).
//!
//! Replica `r` owns `vnodes` points on a 64-bit circle; the point of its `v`-th virtual node
//! is `mix64(RING_SALT ^ (r << 32 | v))`. `mix64` is a bijection, so no two virtual nodes
//! share a point and the ring is fully determined by `(replicas, vnodes)`: the simulator and
//! every balancer build the same ring. A key is placed at its 64-bit hash and owned by the
//! first point clockwise (the first point `>= key`, wrapping past the top). Removing a
//! replica therefore moves only the keys it owned.
//!
//! The ring is built once, off the request path; [`Ring::walk`] visits the distinct replicas
//! in clockwise order without allocating.

use crate::load::MAX_REPLICAS;
use data::hash::mix64;

/// The fewest virtual nodes per replica: below ~100 the arcs are too uneven to balance.
pub const MIN_VNODES: usize = 100;
/// The most virtual nodes per replica (keeps the ring at most 4 Mi points).
pub const MAX_VNODES: usize = 1 << 16;
/// The default number of virtual nodes per replica.
pub const DEFAULT_VNODES: usize = 160;

/// Salt that separates ring points from term and query hashes.
const RING_SALT: u64 = 0x6261_6c6c_6f74_5f72; // "ballot_r"

/// A ring that cannot be built (the policies report it as their
/// [`PolicyError`](crate::PolicyError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The replica count is 0 or above [`MAX_REPLICAS`].
    Replicas(usize),
    /// The virtual-node count is outside `MIN_VNODES..=MAX_VNODES`.
    Vnodes(usize),
}

/// A sorted ring of virtual nodes.
#[derive(Clone, Debug)]
pub struct Ring {
    points: Box<[u64]>,
    owners: Box<[u16]>,
    replicas: usize,
    vnodes: usize,
}

impl Ring {
    /// Builds the ring of `replicas` replicas with `vnodes` virtual nodes each.
    ///
    /// Errors unless `1 <= replicas <= MAX_REPLICAS` and
    /// `MIN_VNODES <= vnodes <= MAX_VNODES`.
    pub fn new(replicas: usize, vnodes: usize) -> Result<Self, RingError> {
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(RingError::Replicas(replicas));
        }
        if !(MIN_VNODES..=MAX_VNODES).contains(&vnodes) {
            return Err(RingError::Vnodes(vnodes));
        }
        let mut nodes: Vec<(u64, u16)> = Vec::with_capacity(replicas * vnodes);
        for r in 0..replicas {
            for v in 0..vnodes {
                let point = mix64(RING_SALT ^ ((r as u64) << 32 | v as u64));
                nodes.push((point, r as u16));
            }
        }
        nodes.sort_unstable();
        let points = nodes.iter().map(|&(p, _)| p).collect();
        let owners = nodes.iter().map(|&(_, o)| o).collect();
        Ok(Ring {
            points,
            owners,
            replicas,
            vnodes,
        })
    }

    /// Number of replicas on the ring.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Virtual nodes per replica.
    pub fn vnodes(&self) -> usize {
        self.vnodes
    }

    /// Number of points (`replicas * vnodes`).
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Never true for a built ring; present for symmetry with [`Ring::len`].
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Number of points owned by `replica`.
    pub fn points_of(&self, replica: usize) -> usize {
        self.owners
            .iter()
            .filter(|&&o| usize::from(o) == replica)
            .count()
    }

    /// The points in clockwise order with their owners.
    pub fn points(&self) -> impl Iterator<Item = (u64, u16)> + '_ {
        self.points.iter().copied().zip(self.owners.iter().copied())
    }

    /// Index of the first point clockwise from `key` (the first point `>= key`, wrapping).
    #[inline]
    pub fn start(&self, key: u64) -> usize {
        let i = self.points.partition_point(|&p| p < key);
        if i == self.points.len() {
            0
        } else {
            i
        }
    }

    /// The replica that owns `key` when every replica is present.
    #[inline]
    pub fn owner(&self, key: u64) -> usize {
        usize::from(self.owners[self.start(key)])
    }

    /// The distinct replicas in clockwise order from `key`: each replica once, in the order
    /// of its first point at or after `key`. Allocation-free.
    #[inline]
    pub fn walk(&self, key: u64) -> Walk<'_> {
        Walk {
            owners: &self.owners,
            pos: self.start(key),
            steps: 0,
            seen: 0,
            all: full_mask(self.replicas),
        }
    }

    /// The first replica clockwise from `key` that is in `mask`, if any.
    #[inline]
    pub fn first_in(&self, key: u64, mask: u64) -> Option<usize> {
        self.walk(key).find(|&r| mask & (1 << r) != 0)
    }
}

/// Mask with the low `n` bits set (`n <= 64`).
#[inline]
fn full_mask(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Iterator over the distinct replicas clockwise from a key; see [`Ring::walk`].
#[derive(Clone, Debug)]
pub struct Walk<'a> {
    owners: &'a [u16],
    pos: usize,
    steps: usize,
    seen: u64,
    all: u64,
}

impl Iterator for Walk<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.seen != self.all && self.steps < self.owners.len() {
            let r = usize::from(self.owners[self.pos]);
            self.pos += 1;
            if self.pos == self.owners.len() {
                self.pos = 0;
            }
            self.steps += 1;
            let bit = 1u64 << r;
            if self.seen & bit == 0 {
                self.seen |= bit;
                return Some(r);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_replica_has_its_vnodes() {
        let ring = Ring::new(8, 160).expect("valid ring");
        assert_eq!(ring.len(), 8 * 160);
        for r in 0..8 {
            assert_eq!(ring.points_of(r), 160);
        }
        let pts: Vec<u64> = ring.points().map(|(p, _)| p).collect();
        assert!(pts.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
    }

    #[test]
    fn walk_visits_each_replica_once() {
        let ring = Ring::new(8, 100).expect("valid ring");
        for key in [0, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            let mut order: Vec<usize> = ring.walk(key).collect();
            assert_eq!(order[0], ring.owner(key));
            order.sort_unstable();
            assert_eq!(order, (0..8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn wraps_past_the_top() {
        let ring = Ring::new(3, 100).expect("valid ring");
        let (first, owner) = ring.points().next().expect("non-empty");
        assert_eq!(ring.owner(u64::MAX), usize::from(owner));
        assert_eq!(ring.start(first), 0);
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(Ring::new(0, 160).is_err());
        assert!(Ring::new(65, 160).is_err());
        assert!(Ring::new(8, 99).is_err());
        assert!(Ring::new(64, 100).is_ok());
    }
}
