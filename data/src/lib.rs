//! `data`: the vocabulary every ballot crate shares.
//!
//! Tokenizer ([`tokenizer`]), the query-string decoder both servers use ([`query`]), stable
//! term hashing ([`hash`]), a seeded RNG ([`rng`]), the term dictionary ([`dict`]),
//! query-log readers and writers ([`log`]), train/test splits ([`split`]), postings sizes
//! ([`sizes`]), the voting-table format ([`table`]), log statistics ([`stats`]) and the
//! synthetic log generator that is the embedded default dataset ([`synth`]). Nothing here
//! does I/O serving, routing or caching.

pub mod dict;
pub mod hash;
pub mod io;
pub mod log;
pub mod query;
pub mod rng;
pub mod sizes;
pub mod split;
pub mod stats;
pub mod synth;
pub mod table;
pub mod time;
pub mod tokenizer;
