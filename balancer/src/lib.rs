//! `balancer`: every ballot routing policy behind one trait, pure and allocation-free on the
//! routing path.
//!
//! A policy ([`RoutingPolicy`]) sees a query as hashes ([`QueryKey`]), the replicas as a
//! [`LoadView`] (load and liveness), and a caller-owned seeded [`data::rng::Rng`]; it returns
//! a [`Decision`]. Policies are listed in [`PolicyKind`] and built by [`build_policy`]:
//! load-only baselines (round-robin, random, least-loaded, power of two choices after
//! Mitzenmacher 2001), consistent hashing (Karger et al. 1997) with bounded loads (Mirrokni
//! et al., SODA 2018) or random jumps (Chen et al., RJ-CH), and voting (Archer et al.,
//! PVLDB 2019) by term hash or by a learned voting table. The simulator and the HTTP
//! balancer call the same code.
//!
//! [`ramp`] rolls a new voting table in a slice of queries at a time (grouped by their
//! strongest new-table term). The HTTP load balancer that serves these policies is the
//! `balancer-server` crate; this one compiles without tokio, axum or hyper.

#![forbid(unsafe_code)]

pub mod explain;
pub mod explain_doc;
pub mod load;
pub mod policy;
pub mod ramp;
pub mod ring;
pub mod shadow;
pub mod virtual_homes;

pub use load::{load_cap, InFlight, LoadKind, LoadView, StaticLoad, Window, WorkSource};

/// The most replicas a policy routes over. Replica sets are kept as `u64` bit masks and
/// per-replica scores as fixed `[_; MAX_REPLICAS]` stack arrays, so routing never allocates.
pub const MAX_REPLICAS: usize = 64;
pub use policy::{
    build_policy, hash_tokens, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, Reason,
    RoutingPolicy, TermBytes,
};
