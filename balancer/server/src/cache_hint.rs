//! The cache hint a query carries to its replica: the terms whose lists that replica should
//! read from flash without caching, by the table's cache admission rule
//! (`[policy] cache_admission`, [`balancer::policy::admission`]).
//!
//! Written as two request headers ([`data::query::NO_CACHE_HEADER`] with the terms,
//! [`data::query::NO_CACHE_WITHIN_HEADER`] with the cache size the table was trained for,
//! when it says), added after the client's own headers. ballot's replica follows them; an
//! engine that does not know them ignores them, and the shadow caches apply the same rule
//! for it. A client's own headers of these names are never forwarded
//! ([`crate::forward::write_upstream_headers`]), so only the balancer hints.
//!
//! The terms' line is at most [`MAX_HINT_TERM_BYTES`] long: a long query must not push the
//! request head past an engine's header limit (8 KiB in Jetty, Tomcat and nginx). Terms
//! that would pass it are left out of the hint, and the replica caches their lists as it
//! would without a rule: the safe side.

use std::io::Write;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use data::query::{NO_CACHE_HEADER, NO_CACHE_WITHIN_HEADER};
use data::tokenizer::{Tokens, MAX_TERMS};

/// Most bytes of term text (with the spaces between) in the no-cache header's value.
pub const MAX_HINT_TERM_BYTES: usize = 1024;

/// A hint: its header lines (CRLF-terminated) and the terms they name.
pub struct Hint {
    /// The header lines, appended to the request's.
    pub lines: Vec<u8>,
    /// Hashes (`data::hash::term_hash`) of the terms named, the first `named` of them (a
    /// query has at most `MAX_TERMS`: no allocation on the request path).
    hashes: [u64; MAX_TERMS],
    named: usize,
}

impl Hint {
    /// Hashes of the terms named: the lists the replica reads without caching, which the
    /// balancer's shadow cache of it keeps out too.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes[..self.named]
    }
}

/// Logs what the rule does under the table `votes` once it is loaded: the cache size it
/// holds within (the table's trained size), and a warning when the shadow caches
/// (`shadow_bytes`) are larger, so the rule does not apply to them.
pub fn log_rule(rule: CacheAdmission, votes: &TableVotes, shadow_bytes: Option<u64>) {
    let share = rule.share();
    match votes.trained_cache_bytes() {
        Some(trained) => {
            tracing::info!(
                "cache admission {share}: replica caches up to {trained} bytes (the table's \
                 trained size) keep a list only at its homes"
            );
            if let Some(shadow) = shadow_bytes.filter(|&s| s > trained) {
                tracing::warn!(
                    "[shadow] cache_bytes = {shadow} is larger than the table's trained size \
                     {trained}: the shadow caches keep every list they read, as a replica \
                     cache of that size does, and the rule saves nothing there"
                );
            }
        }
        None => tracing::info!(
            "cache admission {share}: the table records no trained size, so every replica \
             cache keeps a list only at its homes"
        ),
    }
}

/// The hint for the query of `tokens` sent to table slot `slot`, or `None` when the
/// replica caches every term's list.
pub fn hint(
    rule: CacheAdmission,
    votes: &TableVotes,
    tokens: &Tokens,
    slot: usize,
) -> Option<Hint> {
    let slot = u16::try_from(slot).ok()?;
    let mut lines = Vec::new();
    let mut hashes = [0u64; MAX_TERMS];
    let mut named = 0;
    for term in tokens.iter() {
        let hash = data::hash::term_hash(term);
        if named == MAX_TERMS || rule.caches(votes, hash, slot) {
            continue;
        }
        let value_bytes = lines.len().saturating_sub(NO_CACHE_HEADER.len() + 2);
        let separator = usize::from(!lines.is_empty());
        if value_bytes + separator + term.len() > MAX_HINT_TERM_BYTES {
            continue;
        }
        hashes[named] = hash;
        named += 1;
        if lines.is_empty() {
            lines.extend_from_slice(NO_CACHE_HEADER.as_bytes());
            lines.extend_from_slice(b": ");
        } else {
            lines.push(b' ');
        }
        // The tokenizer keeps letters and digits only: no space, control byte or CR/LF.
        lines.extend_from_slice(term.as_bytes());
    }
    if lines.is_empty() {
        return None;
    }
    lines.extend_from_slice(b"\r\n");
    if let Some(bytes) = votes.trained_cache_bytes() {
        let _ = write!(lines, "{NO_CACHE_WITHIN_HEADER}: {bytes}\r\n");
    }
    Some(Hint {
        lines,
        hashes,
        named,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use balancer::policy::TermBytes;
    use data::query::CacheHint;
    use data::table::{TableRow, VotingTable, KEY_TRAINED_CACHE_BYTES};

    use super::*;

    fn votes(trained: Option<&str>) -> TableVotes {
        let rows = vec![
            TableRow::new("the", 0, 10.0),
            TableRow::new("cat", 1, 3.0),
            TableRow::new("straße", 0, 1.0),
        ];
        let metadata = trained
            .map(|b| (KEY_TRAINED_CACHE_BYTES.to_owned(), b.to_owned()))
            .into_iter()
            .collect::<BTreeMap<_, _>>();
        let table = VotingTable::new(2, rows, metadata).unwrap();
        TableVotes::build(&table, 2, Arc::new(TermBytes::new(21))).unwrap()
    }

    fn tokens(q: &str) -> Tokens {
        let mut t = Tokens::new();
        t.tokenize(q);
        t
    }

    #[test]
    fn the_replica_reads_back_the_terms_it_should_not_cache() {
        let rule = CacheAdmission::new(0.5).unwrap();
        let votes = votes(Some("1000"));
        let q = tokens("The cat in Straße");
        let h = hint(rule, &votes, &q, 1).unwrap();
        assert_eq!(h.hashes(), ["the", "straße"].map(data::hash::term_hash));
        let text = String::from_utf8(h.lines).unwrap();
        assert_eq!(
            text,
            "x-ballot-no-cache: the straße\r\nx-ballot-no-cache-within: 1000\r\n"
        );
        // Parsed as the replica parses the two values.
        let values: Vec<&str> = text
            .split("\r\n")
            .filter_map(|l| l.split_once(": ").map(|(_, v)| v))
            .collect();
        let read =
            CacheHint::read(Some(values[0].as_bytes()), Some(values[1].as_bytes()), 1000).unwrap();
        assert!(read.skips("the") && read.skips("straße"));
        assert!(
            !read.skips("cat") && !read.skips("in"),
            "cat's home; in: no row"
        );
        // Slot 0 is home to the and straße, and cat's votes are all on slot 1.
        let at_zero = String::from_utf8(hint(rule, &votes, &q, 0).unwrap().lines).unwrap();
        assert!(
            at_zero.starts_with("x-ballot-no-cache: cat\r\n"),
            "{at_zero}"
        );
        assert!(hint(rule, &votes, &tokens("in the"), 0).is_none());
    }

    #[test]
    fn a_long_query_names_only_the_terms_that_fit_the_hint() {
        let rule = CacheAdmission::new(0.5).unwrap();
        // Twelve terms of 100 letters and one of 2,000, each voted for slot 1 only.
        let words: Vec<String> = (b'a'..b'm')
            .map(|c| String::from(c as char).repeat(100))
            .chain(["z".repeat(2000)])
            .collect();
        let rows = words.iter().map(|w| TableRow::new(w, 1, 1.0)).collect();
        let table = VotingTable::new(2, rows, BTreeMap::new()).unwrap();
        let votes = TableVotes::build(&table, 2, Arc::new(TermBytes::new(21))).unwrap();
        let h = hint(rule, &votes, &tokens(&words.join(" ")), 0).unwrap();
        let text = String::from_utf8(h.lines.clone()).unwrap();
        let value = text
            .strip_prefix("x-ballot-no-cache: ")
            .and_then(|v| v.strip_suffix("\r\n"))
            .unwrap();
        // Ten terms and nine spaces fill 1,009 of the 1,024 bytes; the rest are left out.
        assert_eq!((h.hashes().len(), value.len()), (10, 1009));
        assert_eq!(value.split(' ').collect::<Vec<_>>(), words[..10]);
        // A term longer than the whole value is never hinted.
        assert!(hint(rule, &votes, &tokens(&words[12]), 0).is_none());
    }

    #[test]
    fn without_a_trained_size_the_hint_is_unbounded() {
        let rule = CacheAdmission::new(0.5).unwrap();
        let h = hint(rule, &votes(None), &tokens("cat"), 0).unwrap();
        assert_eq!(h.lines, b"x-ballot-no-cache: cat\r\n");
    }
}
