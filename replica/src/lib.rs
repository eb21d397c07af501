//! `replica`: one search replica of ballot. Postings lists live on flash ([`store`], in the
//! format of [`index`]), a byte-capacity RAM cache fronts them with the same eviction code as
//! the simulator ([`cache`]), holding them compressed with skip tables ([`postings`]), queries
//! are conjunctive intersections ([`query`]), and an axum HTTP API serves them with
//! Prometheus and JSON counters ([`http`], [`metrics`]), admitting queries within a byte
//! budget for the lists they hold ([`budget`]).
//!
//! The layering follows the classic search-engine caching study (Baeza-Yates et al.,
//! "The impact of caching on search engines", SIGIR 2007): a posting-list cache whose misses
//! cost flash bandwidth, which is what cache-aware routing (Archer et al., PVLDB 2019) saves.

pub mod budget;
pub mod cache;
pub mod cli;
pub mod http;
pub mod index;
pub mod metrics;
pub mod postings;
pub mod query;
pub mod store;
pub mod varint;

pub use index::build::{build_index, build_shards, doc_ids, shard_dir, BuildSummary};
pub use index::format::{IndexError, Shard};
