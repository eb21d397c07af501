//! The cache hint a query carries to its replica (a [`Hook`]): the terms whose lists that replica should
//! read from flash without caching, by the table's cache admission rule
//! (`[policy] cache_admission`, [`balancer::policy::admission`]).
//!
//! Written as two request headers ([`data::query::NO_CACHE_HEADER`] with the terms,
//! [`data::query::NO_CACHE_WITHIN_HEADER`] with the cache size the table was trained for,
//! when it says), added after the client's own headers. ballot's replica follows them; an
//! engine that does not know them ignores them, and the shadow caches apply the same rule
//! for it ([`super::shadow`] reads the hint's terms from the attempt). During a table ramp
//! the hint reads the votes of the table the query follows. A client's own headers of these
//! names are never forwarded ([`crate::forward::write_upstream_headers`]), so only the
//! balancer hints.
//!
//! The terms' line is at most [`MAX_HINT_TERM_BYTES`] long: a long query must not push the
//! request head past an engine's header limit (8 KiB in Jetty, Tomcat and nginx). Terms
//! that would pass it are left out of the hint, and the replica caches their lists as it
//! would without a rule: the safe side.

use std::io::Write;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use data::query::{NO_CACHE_HEADER, NO_CACHE_WITHIN_HEADER};
use metrics::Counter;

use super::Hook;
use crate::ctx::{Attempt, Ctx, NoCache, Terms};
use crate::metrics as m;
use crate::shard::Shard;

/// Most bytes of term text (with the spaces between) in the no-cache header's value.
pub const MAX_HINT_TERM_BYTES: usize = 1024;

/// The hint for the query of `terms` sent to table slot `slot`: its header lines
/// (CRLF-terminated, appended to `lines`) and the terms it names, or nothing when the
/// replica caches every term's list.
pub fn hint(
    rule: CacheAdmission,
    votes: &TableVotes,
    terms: &Terms,
    slot: usize,
    lines: &mut Vec<u8>,
) -> NoCache {
    let mut named = NoCache::default();
    let Ok(slot) = u16::try_from(slot) else {
        return named;
    };
    let start = lines.len();
    let mut value_bytes = 0;
    for (term, &hash) in terms.iter().zip(terms.hashes()) {
        if rule.caches(votes, hash, slot) {
            continue;
        }
        let separator = usize::from(value_bytes > 0);
        if value_bytes + separator + term.len() > MAX_HINT_TERM_BYTES {
            continue;
        }
        if value_bytes == 0 {
            lines.extend_from_slice(NO_CACHE_HEADER.as_bytes());
            lines.extend_from_slice(b": ");
        } else {
            lines.push(b' ');
        }
        // The tokenizer keeps letters and digits only: no space, control byte or CR/LF.
        lines.extend_from_slice(term.as_bytes());
        value_bytes += separator + term.len();
        named.push(hash);
    }
    if lines.len() == start {
        return named;
    }
    lines.extend_from_slice(b"\r\n");
    named.within = votes.trained_cache_bytes();
    if let Some(bytes) = named.within {
        let _ = write!(lines, "{NO_CACHE_WITHIN_HEADER}: {bytes}\r\n");
    }
    named
}

/// The cache hint's hook: counted in `ballot_cache_hints_total`.
pub struct CacheHint {
    rule: CacheAdmission,
    queries: Counter,
    terms: Counter,
}

impl CacheHint {
    /// The hook of `rule`.
    pub fn new(rule: CacheAdmission) -> Self {
        CacheHint {
            rule,
            queries: metrics::counter!(m::CACHE_HINTS, "what" => "queries"),
            terms: metrics::counter!(m::CACHE_HINTS, "what" => "terms"),
        }
    }
}

impl Hook for CacheHint {
    fn on_send(&self, ctx: &Ctx, _shard: &Shard, attempt: &mut Attempt) {
        let (Some(terms), Some(table)) = (&ctx.terms, &ctx.routing.table) else {
            return;
        };
        let votes = table.votes_for(terms.hashes());
        let named = hint(
            self.rule,
            votes,
            terms,
            attempt.choice.index,
            &mut attempt.headers,
        );
        if !named.hashes().is_empty() {
            self.queries.increment(1);
            self.terms.increment(named.hashes().len() as u64);
        }
        attempt.no_cache = named;
    }
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

    /// The hint's header text and the hashes it names, or `None` when there is none.
    fn hinted(
        rule: CacheAdmission,
        votes: &TableVotes,
        q: &str,
        slot: usize,
    ) -> Option<(String, Vec<u64>)> {
        let mut lines = Vec::new();
        let named = hint(rule, votes, &Terms::of(q), slot, &mut lines);
        (!lines.is_empty()).then(|| (String::from_utf8(lines).unwrap(), named.hashes().to_vec()))
    }

    #[test]
    fn the_replica_reads_back_the_terms_it_should_not_cache() {
        let rule = CacheAdmission::new(0.5).unwrap();
        let votes = votes(Some("1000"));
        let (text, hashes) = hinted(rule, &votes, "The cat in Straße", 1).unwrap();
        assert_eq!(hashes, ["the", "straße"].map(data::hash::term_hash));
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
        let (at_zero, _) = hinted(rule, &votes, "The cat in Straße", 0).unwrap();
        assert!(
            at_zero.starts_with("x-ballot-no-cache: cat\r\n"),
            "{at_zero}"
        );
        assert!(hinted(rule, &votes, "in the", 0).is_none());
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
        let (text, hashes) = hinted(rule, &votes, &words.join(" "), 0).unwrap();
        let value = text
            .strip_prefix("x-ballot-no-cache: ")
            .and_then(|v| v.strip_suffix("\r\n"))
            .unwrap();
        // Ten terms and nine spaces fill 1,009 of the 1,024 bytes; the rest are left out.
        assert_eq!((hashes.len(), value.len()), (10, 1009));
        assert_eq!(value.split(' ').collect::<Vec<_>>(), words[..10]);
        // A term longer than the whole value is never hinted.
        assert!(hinted(rule, &votes, &words[12], 0).is_none());
    }

    #[test]
    fn without_a_trained_size_the_hint_is_unbounded() {
        let rule = CacheAdmission::new(0.5).unwrap();
        let (text, _) = hinted(rule, &votes(None), "cat", 0).unwrap();
        assert_eq!(text, "x-ballot-no-cache: cat\r\n");
    }
}
