//! What a routing policy may know about the replicas: their load and whether they are live.
//!
//! The bound is the one of consistent hashing with bounded loads (Mirrokni, Thorup and
//! Zadimoghaddam, "Consistent hashing with bounded loads", SODA 2018), as deployed in HAProxy
//! (`hash-balance-factor`) and Envoy (`hash_balance_factor`): a replica may take a query only
//! while its load is below `ceil((1 + eps) * (n + 1) / live)`, where `n` is the summed load
//! and `live` the number of live replicas. Because the live loads sum to at most `n`, some
//! live replica is always strictly below that cap, so bounded policies always have somewhere
//! to go.
//!
//! There is one implementation of each load, shared by the trace simulator, the queueing
//! simulator and the HTTP balancer ([`LoadKind`]):
//!
//! - [`Window`]: queries (`window`) or their work (`work`: flash bytes missed at the
//!   replica plus a fixed per-query cost) over a trailing window of routing decisions;
//! - [`InFlight`]: requests in flight (`in-flight`, HAProxy's rule), which needs time, so
//!   only the HTTP balancer and the queueing simulator have it.
//!
//! Each implements [`LoadView`] with every replica live. [`Guarded`] adds liveness and the
//! stall guard over a base load, for the HTTP balancer and the queueing simulator alike.
//! [`StaticLoad`] is the plain-vector view for tests.

pub mod guard;
pub mod in_flight;
pub mod latency;
pub mod signals;
pub mod window;

pub use guard::{Guarded, Stall, DEFAULT_STALL_EPS, DEFAULT_STALL_SLACK};
pub use in_flight::InFlight;
pub use latency::{Latency, LatencyStats};
pub use signals::{Signaled, Signals};
pub use window::Window;

/// What a replica's shadow cache ([`crate::shadow`]) holds of one query: the postings
/// bytes of its terms held there, their bytes in all, and how full the cache is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheMatch {
    /// Bytes of the query's lists the cache holds.
    pub held: u64,
    /// Bytes of the query's lists in all.
    pub all: u64,
    /// The cache's fill, 0 to 1.
    pub fill: f64,
}

impl CacheMatch {
    /// The share of the query's bytes held (0 for a query of no bytes).
    pub fn share(&self) -> f64 {
        if self.all == 0 {
            0.0
        } else {
            self.held as f64 / self.all as f64
        }
    }
}

pub use crate::MAX_REPLICAS;

/// Load and health of the replicas, as seen by one routing decision.
pub trait LoadView {
    /// Number of replicas (the table's index space), at most [`MAX_REPLICAS`].
    fn replicas(&self) -> usize;
    /// Load of `replica` (queries in the trailing window, or requests in flight).
    fn load(&self, replica: usize) -> u64;
    /// Summed load of all replicas.
    fn total(&self) -> u64;
    /// Bit mask of the live replicas (bit `r` set when replica `r` may receive queries:
    /// healthy, not draining, not excluded). The default is every replica live; views with
    /// liveness override this one method, and [`is_live`](LoadView::is_live) and
    /// [`live_count`](LoadView::live_count) follow from it.
    #[inline]
    fn live_bits(&self) -> u64 {
        first_n_bits(self.replicas())
    }
    /// Whether `replica` may receive queries.
    #[inline]
    fn is_live(&self, replica: usize) -> bool {
        replica < MAX_REPLICAS && self.live_bits() & (1 << replica) != 0
    }
    /// Number of live replicas.
    #[inline]
    fn live_count(&self) -> usize {
        self.live_bits().count_ones() as usize
    }
    /// Requests in flight at `replica`, when this view has time (the HTTP balancer and
    /// the queueing simulator); `None` in the trace simulator. The `table` policy sends a
    /// query to the home with the fewest requests in flight when it is known
    /// ([`crate::policy::vote`]).
    fn in_flight(&self, replica: usize) -> Option<u64> {
        let _ = replica;
        None
    }
    /// What `replica`'s recent answers say about its speed (response and service time,
    /// its queue: [`Latency`]), for the latency-driven policies (`ars`, `prequal`): the HTTP
    /// balancer and the queueing simulator keep them; `None` in the trace simulator and
    /// before a replica's first answer.
    fn latency(&self, replica: usize) -> Option<Latency> {
        let _ = replica;
        None
    }
    /// Elasticsearch's `adjustStats` after `ars` chose `winner`: every other member of
    /// `mask` with samples takes one synthetic sample halfway to the winner's
    /// ([`LatencyStats::adjust`]), so a replica that lost stays in contention. A no-op where
    /// the view keeps no latencies.
    fn adjust_latency(&self, winner: usize, mask: u64) {
        let _ = (winner, mask);
    }
    /// What `replica`'s shadow cache holds of the lists of `term_hashes` ([`CacheMatch`]),
    /// for the `cache-aware` policy; `None` where no shadow caches are kept.
    fn cached(&self, replica: usize, term_hashes: &[u64]) -> Option<CacheMatch> {
        let _ = (replica, term_hashes);
        None
    }
    /// The members of `mask` whose load is strictly below `cap`. Views with their loads in a
    /// slice override this with a tight loop.
    fn below_cap_bits(&self, mask: u64, cap: u64) -> u64 {
        members(mask)
            .filter(|&r| self.load(r) < cap)
            .fold(0u64, |under, r| under | 1 << r)
    }
}

/// Default fixed cost of one query under the `work` load, in flash bytes: about a
/// millisecond of a replica's CPU at the demo's emulated flash bandwidth (4 MB/s). Set it
/// to a query's CPU time times the flash bandwidth (`docs/queueing.md` shows how to
/// measure both).
pub const DEFAULT_WORK_QUERY_BYTES: u64 = 4_096;

/// Which load the bounded-load rule compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoadKind {
    /// Queries routed to each replica over a trailing window of decisions.
    #[default]
    Window,
    /// Work routed to each replica over a trailing window: each query counts its flash
    /// bytes missed at the replica it went to plus a fixed per-query cost.
    Work,
    /// Requests in flight per replica (needs time: the HTTP balancer and the queueing
    /// simulator).
    InFlight,
}

impl LoadKind {
    /// Every load kind.
    pub const ALL: [LoadKind; 3] = [LoadKind::Window, LoadKind::Work, LoadKind::InFlight];

    /// `"window"`, `"work"` or `"in-flight"`.
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Window => "window",
            LoadKind::Work => "work",
            LoadKind::InFlight => "in-flight",
        }
    }
}

impl std::fmt::Display for LoadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A load name that is not one of [`LoadKind::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown load {0:?} (expected one of: window, work, in-flight)")]
pub struct UnknownLoad(pub String);

impl std::str::FromStr for LoadKind {
    type Err = UnknownLoad;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LoadKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownLoad(s.to_owned()))
    }
}

/// Where the `work` load learns the flash bytes a query read at its replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WorkSource {
    /// The replica's `x-ballot-miss-bytes` answer header (ballot's replica).
    Header,
    /// The `request_cost.miss_bytes` entry of the backend's ORCA load report
    /// (`endpoint-load-metrics`).
    Orca,
    /// The balancer's own shadow cache of that replica (any backend).
    Shadow,
    /// The header if the answer has one, else the ORCA report if it has one, else the
    /// shadow cache if one is configured, else the fixed per-query cost alone.
    #[default]
    Auto,
}

impl WorkSource {
    /// Every source.
    pub const ALL: [WorkSource; 4] = [
        WorkSource::Header,
        WorkSource::Orca,
        WorkSource::Shadow,
        WorkSource::Auto,
    ];

    /// `"header"`, `"orca"`, `"shadow"` or `"auto"`.
    pub fn name(self) -> &'static str {
        match self {
            WorkSource::Header => "header",
            WorkSource::Orca => "orca",
            WorkSource::Shadow => "shadow",
            WorkSource::Auto => "auto",
        }
    }
}

impl std::fmt::Display for WorkSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A work source name that is not one of [`WorkSource::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown work source {0:?} (expected one of: header, orca, shadow, auto)")]
pub struct UnknownWorkSource(pub String);

impl std::str::FromStr for WorkSource {
    type Err = UnknownWorkSource;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WorkSource::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownWorkSource(s.to_owned()))
    }
}

/// The mask of the first `n` replicas (all 64 bits for `n >= 64`).
#[inline]
pub fn first_n_bits(n: usize) -> u64 {
    if n >= MAX_REPLICAS {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The bounded-load cap `ceil((1 + eps) * (total + 1) / live)`: a replica may take the next
/// query only while its load is strictly below it.
///
/// The `+ 1` counts the query being placed, so the cap is at least 1 and an idle replica can
/// always take a query. Returns 0 when `live` is 0 (nothing can take a query) and saturates
/// at `u64::MAX` for an infinite `eps`. `eps` is validated by [`crate::build_policy`]; a
/// negative or NaN `eps` here is treated as 0.
#[inline]
pub fn load_cap(eps: f64, total: u64, live: usize) -> u64 {
    if live == 0 {
        return 0;
    }
    let eps = if eps >= 0.0 { eps } else { 0.0 };
    let cap = ((1.0 + eps) * (total as f64 + 1.0) / live as f64).ceil();
    // `as` saturates: +inf becomes u64::MAX.
    cap as u64
}

/// A load view over plain vectors.
///
/// `live[r]` says whether replica `r` is live; a replica with no entry in `live` (for
/// example when `live` is empty) counts as live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaticLoad {
    /// Load of each replica; its length is the number of replicas.
    pub loads: Vec<u64>,
    /// Liveness of each replica; missing entries are live.
    pub live: Vec<bool>,
}

impl StaticLoad {
    /// `replicas` live replicas with no load.
    pub fn idle(replicas: usize) -> Self {
        StaticLoad {
            loads: vec![0; replicas],
            live: vec![true; replicas],
        }
    }

    /// All replicas live, with the given loads.
    pub fn new(loads: Vec<u64>) -> Self {
        let live = vec![true; loads.len()];
        StaticLoad { loads, live }
    }

    /// The given loads and liveness.
    pub fn with_live(loads: Vec<u64>, live: Vec<bool>) -> Self {
        StaticLoad { loads, live }
    }
}

impl LoadView for StaticLoad {
    fn replicas(&self) -> usize {
        self.loads.len()
    }

    fn load(&self, replica: usize) -> u64 {
        self.loads.get(replica).copied().unwrap_or(0)
    }

    fn total(&self) -> u64 {
        self.loads.iter().fold(0u64, |a, &l| a.saturating_add(l))
    }

    fn live_bits(&self) -> u64 {
        let n = self.loads.len().min(MAX_REPLICAS);
        (0..n)
            .filter(|&r| self.live.get(r).copied().unwrap_or(true))
            .fold(0, |m, r| m | 1 << r)
    }
}

/// Bit mask of the live replicas among the first `replicas` (bit `r` set when replica `r`
/// is live). Replicas beyond `load.replicas()` or [`MAX_REPLICAS`] are never live.
#[inline]
pub fn live_mask(load: &dyn LoadView, replicas: usize) -> u64 {
    load.live_bits() & first_n_bits(replicas.min(load.replicas()))
}

/// The `k`-th (0-based) set bit of `mask`, counting from bit 0; `k` must be below
/// `mask.count_ones()`.
#[inline]
pub(crate) fn nth_set_bit(mut mask: u64, k: u64) -> usize {
    for _ in 0..k {
        mask &= mask.wrapping_sub(1);
    }
    mask.trailing_zeros() as usize
}

/// A uniformly random member of `mask` (which must be non-empty), drawn from `rng`.
#[inline]
pub(crate) fn random_member(mask: u64, rng: &mut data::rng::Rng) -> usize {
    let k = rng.below(u64::from(mask.count_ones()));
    nth_set_bit(mask, k)
}

/// The members of `live` whose load is strictly below `cap`.
#[inline]
pub(crate) fn under_cap_mask(load: &dyn LoadView, live: u64, cap: u64) -> u64 {
    load.below_cap_bits(live, cap)
}

/// The members of a replica mask, lowest index first.
#[inline]
pub fn members(mask: u64) -> Members {
    Members(mask)
}

/// [`members`]' iterator: pops the lowest set bit.
pub struct Members(u64);

impl Iterator for Members {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let r = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(r)
    }
}

/// The least loaded member of `mask` (ties to the lowest index); `mask` must be non-empty.
#[inline]
pub(crate) fn least_loaded_member(load: &dyn LoadView, mask: u64) -> usize {
    let mut best = mask.trailing_zeros() as usize;
    let mut best_load = u64::MAX;
    for r in members(mask) {
        let l = load.load(r);
        if l < best_load {
            best = r;
            best_load = l;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_matches_the_formula() {
        // ceil(1.05 * 101 / 8) = ceil(13.25625) = 14
        assert_eq!(load_cap(0.05, 100, 8), 14);
        // ceil(1.0 * 8 / 8) = 1: with eps 0 and one query per replica pending.
        assert_eq!(load_cap(0.0, 7, 8), 1);
        assert_eq!(load_cap(0.05, 0, 8), 1);
        assert_eq!(load_cap(0.05, 10, 0), 0);
        assert_eq!(load_cap(f64::INFINITY, 10, 3), u64::MAX);
        assert_eq!(load_cap(-1.0, 7, 8), 1);
    }

    #[test]
    fn static_load_defaults_to_live() {
        let l = StaticLoad::with_live(vec![1, 2, 3], vec![true, false]);
        assert_eq!(l.total(), 6);
        assert!(l.is_live(0) && !l.is_live(1) && l.is_live(2) && !l.is_live(3));
        assert_eq!(l.live_count(), 2);
        assert_eq!(live_mask(&l, 8), 0b101);
        assert_eq!(live_mask(&l, 1), 0b1);
    }

    #[test]
    fn bit_helpers() {
        assert_eq!(nth_set_bit(0b1011_0100, 0), 2);
        assert_eq!(nth_set_bit(0b1011_0100, 1), 4);
        assert_eq!(nth_set_bit(0b1011_0100, 3), 7);
        let l = StaticLoad::new(vec![5, 3, 3, 9]);
        assert_eq!(least_loaded_member(&l, 0b1111), 1);
        assert_eq!(least_loaded_member(&l, 0b1101), 2);
        assert_eq!(under_cap_mask(&l, 0b1111, 5), 0b0110);
    }
}
