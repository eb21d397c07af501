//! Query evaluation: tokenize (the shared `data` tokenizer, so the replica, balancer and
//! simulator agree on terms), fetch each term's list through the RAM cache, intersect.
//!
//! Conjunctive (AND) semantics. Lists are intersected document-at-a-time from the shortest:
//! each candidate is located in the longer lists by skipping whole blocks through their
//! skip tables ([`crate::postings::intersect`]; the skip-based intersection of Culpepper &
//! Moffat, "Efficient set intersection for inverted indexing", TOIS 2010), so the cost
//! follows the short list, not the long ones, and no list is ever fully decompressed. Every
//! known term is looked up even when another term is unknown (and the answer is then
//! empty), so the cache sees the same accesses as the simulator's replay.
//!
//! A query is first planned ([`Engine::plan`]: tokenize and resolve its terms, no I/O), so
//! the HTTP layer can reserve the bytes its lists will hold from the in-flight budget
//! ([`crate::budget`], [`Plan::need`]) before it runs ([`Engine::run`]).

use std::sync::Arc;
use std::time::Instant;

use data::query::CacheHint;
use data::tokenizer::Tokens;
use serde::Serialize;

use crate::cache::{FetchError, Outcome, RamCache};
use crate::metrics::Stats;
use crate::postings::{intersect, Postings};
use crate::store::FlashStore;

/// Longest accepted query, in bytes (after percent-decoding): the balancer's limit too.
pub const MAX_QUERY_BYTES: usize = data::query::MAX_QUERY_BYTES;
/// Most distinct terms accepted in a query.
pub const MAX_QUERY_TERMS: usize = data::tokenizer::MAX_TERMS;
/// Largest accepted `k`.
pub const MAX_K: usize = 1000;

/// Why a query was not answered.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request is invalid (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// A list could not be read (HTTP 503).
    #[error("postings unavailable: {0}")]
    Unavailable(#[from] FetchError),
}

/// This query's cache accesses (the answer's `cache`, which a sharded balancer sums).
pub use data::query::CacheCounts;

/// A query's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The query's terms, in order of first appearance.
    pub terms: Vec<String>,
    /// Documents containing every term.
    pub total_hits: u64,
    /// The first `k` of them, in doc-id order.
    pub doc_ids: Vec<u32>,
    /// Cache accesses.
    pub cache: CacheCounts,
}

/// The store, its cache and the counters.
#[derive(Debug)]
pub struct Engine {
    /// The postings on flash.
    pub store: FlashStore,
    /// The RAM cache in front of it.
    pub cache: RamCache,
    /// Counters.
    pub stats: Stats,
}

/// A query resolved against the term directory, ready to [`Engine::run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The query's terms, in order of first appearance (at most [`MAX_QUERY_TERMS`]).
    terms: Vec<String>,
    /// Each term's id, `None` for terms the index does not have.
    ids: Vec<Option<u32>>,
    /// Per term: whether a miss caches its list (false where the balancer's hint says not).
    admit: Vec<bool>,
    /// Stored bytes of the known terms' lists.
    list_bytes: u64,
    /// The largest of them.
    largest: u64,
}

impl Plan {
    /// Bytes the query holds at most while it runs, as reserved from the in-flight budget
    /// ([`crate::budget`]): its lists' stored bytes plus one read buffer of the largest.
    pub fn need(&self) -> u64 {
        self.list_bytes + self.largest
    }

    /// The query's terms.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }
}

impl Engine {
    /// Assembles an engine.
    pub fn new(store: FlashStore, cache: RamCache) -> Self {
        Engine {
            store,
            cache,
            stats: Stats::default(),
        }
    }

    /// Evaluates `query`, returning up to `k` doc ids. Blocks on flash reads.
    pub fn search(&self, query: &str, k: usize) -> Result<Answer, QueryError> {
        self.run(self.plan(query, &CacheHint::default())?, k)
    }

    /// Tokenizes `query` and resolves its terms (no I/O, no cache access); the terms `hint`
    /// skips will not be cached.
    pub fn plan(&self, query: &str, hint: &CacheHint) -> Result<Plan, QueryError> {
        if query.len() > MAX_QUERY_BYTES {
            return Err(QueryError::BadRequest(format!(
                "q is {} bytes; at most {MAX_QUERY_BYTES} are accepted",
                query.len()
            )));
        }
        // The query is its first MAX_QUERY_TERMS distinct terms, exactly as the balancer
        // routes it and the simulator counts it (web engines cap query words the same way).
        let mut tokens = Tokens::new();
        tokens.tokenize(query);
        let directory = self.store.directory();
        let terms: Vec<String> = tokens.iter().map(str::to_owned).collect();
        let ids: Vec<Option<u32>> = terms.iter().map(|t| directory.id(t)).collect();
        let admit = terms.iter().map(|t| !hint.skips(t)).collect();
        let (mut list_bytes, mut largest) = (0u64, 0u64);
        for &id in ids.iter().flatten() {
            let len = directory.entry(id).map_or(0, |e| u64::from(e.len));
            list_bytes += len;
            largest = largest.max(len);
        }
        Ok(Plan {
            terms,
            ids,
            admit,
            list_bytes,
            largest,
        })
    }

    /// Evaluates a planned query, returning up to `k` doc ids. Blocks on flash reads.
    pub fn run(&self, plan: Plan, k: usize) -> Result<Answer, QueryError> {
        let start = Instant::now();
        let result = self.run_inner(plan, k);
        self.stats.query_latency(start.elapsed().as_secs_f64());
        result
    }

    fn run_inner(&self, plan: Plan, k: usize) -> Result<Answer, QueryError> {
        if k > MAX_K {
            return Err(QueryError::BadRequest(format!("k must be at most {MAX_K}")));
        }
        let Plan {
            terms, ids, admit, ..
        } = plan;
        // A query with no terms (only punctuation, say) matches nothing, like unknown terms.
        if terms.is_empty() {
            return Ok(Answer {
                terms,
                total_hits: 0,
                doc_ids: Vec::new(),
                cache: CacheCounts::default(),
            });
        }
        let mut lists: Vec<Arc<Postings>> = Vec::with_capacity(terms.len());
        let mut counts = CacheCounts::default();
        let mut any_unknown = false;
        let mut failure = None;
        for (id, admit) in ids.into_iter().zip(admit) {
            let Some(id) = id else {
                self.stats.unknown_term();
                any_unknown = true;
                continue;
            };
            match self.cache.get(&self.store, id, admit) {
                Ok(f) => {
                    self.stats.lookup(f.outcome, f.bytes, f.read_secs);
                    if f.outcome == Outcome::Miss && !admit {
                        self.stats.uncached_read();
                    }
                    if f.outcome == Outcome::Miss {
                        counts.misses += 1;
                        counts.miss_bytes += f.bytes;
                    } else {
                        counts.hits += 1;
                        counts.hit_bytes += f.bytes;
                    }
                    lists.push(f.list);
                }
                Err(e) => {
                    if e.is_corrupt() {
                        self.stats.corrupt();
                    }
                    failure.get_or_insert(e);
                }
            }
        }
        self.stats.cache_bytes(self.cache.used_bytes());
        if let Some(e) = failure {
            return Err(QueryError::Unavailable(e));
        }
        let (total_hits, doc_ids) = if any_unknown {
            (0, Vec::new())
        } else {
            let refs: Vec<&Postings> = lists.iter().map(|l| &**l).collect();
            intersect(&refs, k)
        };
        Ok(Answer {
            terms,
            total_hits,
            doc_ids,
            cache: counts,
        })
    }
}
