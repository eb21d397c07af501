//! `data`: the vocabulary every ballot crate shares.
//!
//! Tokenizer ([`tokenizer`]), the query-string decoder both servers use ([`query`]), stable
//! term hashing ([`hash`]), a seeded RNG ([`rng`]), the term dictionary ([`dict`]),
//! train/test splits ([`split`]), postings sizes ([`sizes`]), the voting-table format
//! ([`table`]), the ORCA load reports the replica writes and the balancer reads
//! ([`load_report`]), the guard every reader of untrusted Parquet goes through
//! ([`parquet_guard`]) and the synthetic log generator that is the embedded default dataset
//! ([`synth`]). Nothing here does I/O serving, routing or caching, and nothing here reads
//! query logs: that is the `querylog` crate's (text and Parquet logs, gzip, calendar times,
//! log statistics, the word-frequency file), which only the batch jobs need, so the servers
//! build without it.

pub mod dict;
pub mod hash;
pub mod load_report;
pub mod parquet_guard;
pub mod prometheus;
pub mod query;
pub mod rng;
pub mod sizes;
pub mod split;
pub mod synth;
pub mod table;
pub mod tokenizer;
