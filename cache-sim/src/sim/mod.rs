//! The trace simulator: replays a query stream through a routing policy into R simulated
//! replica caches, the way libCacheSim replays a trace into one cache.
//!
//! - [`trace`] turns a log (already split into train and test) into dense term ids with
//!   their hashes and postings bytes, once, so every policy replays the same compact trace.
//! - [`replay`](mod@replay) routes each query with the same `balancer` policy code the HTTP balancer
//!   serves with, and looks each term up in the chosen replica's cache (the same eviction
//!   code the replica caches with); only the test part is counted.
//! - [`admission`] caches a list only at its homes in the table (the balancer's rule, per term id).
//! - [`bound`] is the reference point: one cache of R times the capacity.
//! - [`grid`] runs many (policy, cache size) configurations in parallel.
//! - [`switch`] simulates a live switch between two voting tables, ramped or instant.
//! - [`scale`] simulates replicas joining or leaving under a table over virtual homes.
//! - [`movement`] measures what a table change moves: requested bytes whose top vote changes.
//! - [`misses`] classes a table's test lookups by the role of their replica for the term.
//! - [`parts`] watches a replay's flash bytes per replica over parts of the test stream.

pub mod admission;
pub mod bound;
pub mod grid;
pub mod misses;
pub mod movement;
pub mod parts;
pub mod replay;
pub mod scale;
pub mod switch;
mod table_terms;
pub mod trace;

pub use bound::one_big_cache;
pub use grid::{run_grid, GridConfig, GridOutput, GridResult, PolicyLoads};
pub use replay::{replay, NoObserver, Observer, SimConfig, SimLoad, SimResult};
pub use trace::{capacity_of, distinct_bytes_of, Trace};
