//! `tantivy-engine`: a search engine ballot did not write, so that ballot's gains can be
//! measured in front of one (issue 30, `bench/engine-e2e.sh`). It owns three things:
//!
//! * [`build`]: a Tantivy index holding the documents of a ballot replica index (regenerated
//!   by `replica::doc_ids`, numbered by Tantivy), merged into one segment;
//! * [`search`] and [`http`]: a small Tantivy search server speaking tantivy-cli's API
//!   (`GET /api/?q=&nhits=`), reading the index through the kernel's page cache (mapped or
//!   with `pread`, [`directory`]), which a memory cgroup can size and a block-IO cgroup can
//!   throttle; [`page_cache`] evicts the index's pages so each run starts cold, and
//!   [`directory`] keeps the term dictionary in memory, so the page cache holds postings
//!   only;
//! * [`sizes`]: the `(term, bytes)` size table of any Tantivy index, read from its term
//!   dictionary (postings bytes per term, summed over segments), which `ballot sizes
//!   --tantivy` writes for the balancer's shadow caches and the learner.
//!
//! The index schema is one text field ([`schema::BODY`]), whitespace-tokenized, doc ids only
//! (no frequencies, positions or field norms), nothing stored: a query reads its terms'
//! postings lists and nothing else of size, as a ballot replica does.

pub mod build;
pub mod cli;
pub mod directory;
pub mod http;
pub mod page_cache;
pub mod schema;
pub mod search;
pub mod sizes;
