//! One client request's context, built once when the request arrives and handed to every
//! step and hook after it (pingora's `ProxyHttp` context): its times and request id, its
//! query tokenized once into fixed arrays ([`Terms`]), one snapshot of the routing state
//! ([`Routing`]), and what the hooks leave for one another ([`Attempt`]).
//!
//! Nothing after [`Terms::of`] tokenizes the query again and nothing after [`Ctx::new`]
//! loads the routing state again: the routing decision, the cache hint, the shadow caches,
//! the ramp accounting and a sharded query's every shard read the same terms and the same
//! table. [`probe`] counts both per thread, so a test can check it.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderValue;
use balancer::policy::QueryKey;
use data::tokenizer::{Tokens, MAX_TERMS};

use crate::access;
use crate::metrics::RequestReason;
use crate::router::Routing;
use crate::shard::Choice;

thread_local! {
    /// The tokenizer's reusable buffers (no allocation once warm).
    static TOKENS: RefCell<Tokens> = RefCell::new(Tokens::new());
    /// Tokenizations and routing snapshots made on this thread ([`probe`]).
    static PROBE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Tokenizations and routing-state snapshots made on this thread so far: a test serving
/// requests on one thread reads them before and after (two thread-local additions per
/// request, no shared cache line).
pub fn probe() -> (u64, u64) {
    PROBE.with(Cell::get)
}

fn count(tokenized: u64, snapshots: u64) {
    PROBE.with(|p| {
        let (t, s) = p.get();
        p.set((t + tokenized, s + snapshots));
    });
}

/// A query's terms, tokenized once: the normalized text (terms joined by single spaces),
/// each term's span in it and hash, and the query hash, in fixed arrays.
#[derive(Clone, Debug)]
pub struct Terms {
    text: String,
    spans: [(u16, u16); MAX_TERMS],
    hashes: [u64; MAX_TERMS],
    len: usize,
    query_hash: u64,
}

impl Terms {
    /// Tokenizes and hashes `query` (one allocation: the normalized text).
    pub fn of(query: &str) -> Terms {
        count(1, 0);
        TOKENS.with(|t| {
            let mut tokens = t.borrow_mut();
            tokens.tokenize(query);
            let mut spans = [(0u16, 0u16); MAX_TERMS];
            let mut hashes = [0u64; MAX_TERMS];
            // A normalized query is at most 32 terms of MAX_TERM_BYTES: its offsets fit u16.
            for (i, (&(s, e), term)) in tokens.spans().iter().zip(tokens.iter()).enumerate() {
                spans[i] = (s as u16, e as u16);
                hashes[i] = data::hash::term_hash(term);
            }
            Terms {
                text: tokens.normalized().to_owned(),
                spans,
                hashes,
                len: tokens.len(),
                query_hash: data::hash::term_hash(tokens.normalized()),
            }
        })
    }

    /// The routing key.
    pub fn key(&self) -> QueryKey<'_> {
        QueryKey::new(self.query_hash, self.hashes())
    }

    /// Each term's hash, in query order.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes[..self.len]
    }

    /// The terms, in query order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.spans[..self.len]
            .iter()
            .map(|&(s, e)| &self.text[usize::from(s)..usize::from(e)])
    }

    /// The number of terms.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the query has no term.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One client request, from its arrival to its answer.
pub struct Ctx {
    /// When it came in.
    pub start: Instant,
    /// When it must be answered, retries, queues and the body's relay included.
    pub deadline: Instant,
    /// Its request id, sent upstream and echoed.
    pub id: HeaderValue,
    /// The client.
    pub peer: IpAddr,
    /// Its query's terms (`None`: routed by the fallback policy, with no query).
    pub terms: Option<Terms>,
    /// The routing state every decision for it reads.
    pub routing: Arc<Routing>,
    /// Its access-log line, when the access log is on ([`crate::hooks::access`]).
    pub access: Option<access::Entry>,
}

impl Ctx {
    /// The context of a request that arrived at `start` from `peer`, with the routing
    /// state `routing` (the one snapshot).
    pub fn new(
        start: Instant,
        deadline: Instant,
        id: HeaderValue,
        peer: IpAddr,
        routing: Arc<Routing>,
    ) -> Ctx {
        count(0, 1);
        Ctx {
            start,
            deadline,
            id,
            peer,
            terms: None,
            routing,
            access: None,
        }
    }
}

/// One attempt to send a request (or a sharded request's part) to a replica: the choice,
/// and what the hooks computed for it, for one another (the cache hint's terms for the
/// shadow cache, the shadow's estimate for the work load) and for the upstream request
/// (header lines).
pub struct Attempt {
    /// The replica and why.
    pub choice: Choice,
    /// 0 for the first attempt.
    pub number: u32,
    /// Why the request went there, as counted (`failover` after a failed attempt).
    pub why: RequestReason,
    /// Header lines to add to the upstream request (CRLF-terminated each).
    pub headers: Vec<u8>,
    /// The terms the replica is asked not to cache (the cache hint).
    pub no_cache: NoCache,
    /// The replica's shadow cache's estimate of the flash bytes it reads for the query.
    pub shadow_miss: Option<u64>,
    /// When the attempt was made (its answer's response time runs from here).
    pub sent: Instant,
}

impl Attempt {
    /// Attempt `number` on `choice`, of a request routed `blind` (no query read) or by its
    /// query.
    pub fn new(choice: Choice, number: u32, blind: bool) -> Attempt {
        let why = match (number, blind) {
            (0, true) => RequestReason::Fallback,
            (0, false) => RequestReason::of(choice.reason),
            _ => RequestReason::Failover,
        };
        Attempt {
            choice,
            number,
            why,
            headers: Vec::new(),
            no_cache: NoCache::default(),
            shadow_miss: None,
            sent: Instant::now(),
        }
    }
}

/// The terms a cache hint asks a replica not to cache, and the cache size up to which it
/// asks (the table's trained size; `None`: any size).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCache {
    hashes: [u64; MAX_TERMS],
    len: usize,
    /// The cache size the rule holds within.
    pub within: Option<u64>,
}

impl NoCache {
    /// Adds a term (at most [`MAX_TERMS`], a query's most).
    pub fn push(&mut self, hash: u64) {
        if let Some(slot) = self.hashes.get_mut(self.len) {
            *slot = hash;
            self.len += 1;
        }
    }

    /// The hashes of the terms named.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes[..self.len]
    }

    /// Whether a cache of `bytes` follows the hint.
    pub fn applies_to(&self, bytes: u64) -> bool {
        self.within.is_none_or(|w| bytes <= w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_the_tokenizers_with_their_hashes() {
        let t = Terms::of("The Cat, the HAT straße");
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            ["the", "cat", "hat", "straße"]
        );
        let mut tokens = Tokens::new();
        tokens.tokenize("The Cat, the HAT straße");
        let mut hashes = Vec::new();
        let qh = balancer::policy::hash_tokens(&tokens, &mut hashes);
        assert_eq!(t.hashes(), &hashes[..]);
        assert_eq!(t.key().query_hash, qh);
        assert_eq!(t.len(), 4);
        assert!(Terms::of(" ,, ").is_empty());
        let (tok, _) = probe();
        Terms::of("a");
        assert_eq!(probe().0, tok + 1);
    }
}
