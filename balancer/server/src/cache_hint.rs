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

use std::io::Write;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use data::query::{NO_CACHE_HEADER, NO_CACHE_WITHIN_HEADER};
use data::tokenizer::Tokens;

/// A hint: its header lines (CRLF-terminated) and the number of terms they name.
pub struct Hint {
    /// The header lines, appended to the request's.
    pub lines: Vec<u8>,
    /// Terms named.
    pub terms: u64,
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
    let mut terms = 0u64;
    for term in tokens.iter() {
        if rule.caches(votes, data::hash::term_hash(term), slot) {
            continue;
        }
        terms += 1;
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
    Some(Hint { lines, terms })
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
        assert_eq!(h.terms, 2);
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
    fn without_a_trained_size_the_hint_is_unbounded() {
        let rule = CacheAdmission::new(0.5).unwrap();
        let h = hint(rule, &votes(None), &tokens("cat"), 0).unwrap();
        assert_eq!(h.lines, b"x-ballot-no-cache: cat\r\n");
    }
}
