//! A compact, pre-tokenized query trace: term ids, term hashes and postings bytes in flat
//! vectors (CSR layout), with the train/test boundary. Built once per log; every policy and
//! cache size replays the same trace, so tokenizing never shows up in simulation time.

use balancer::policy::TermBytes;
use data::dict::TermDict;
use data::hash::term_hash;
use data::sizes::Sizes;
use data::tokenizer::{Tokens, MAX_TERMS};
use rustc_hash::FxHashSet;

/// A query stream in evaluation order (train part first, then test part).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Term strings ⇄ dense ids.
    pub dict: TermDict,
    /// Postings bytes by term id.
    pub term_bytes: Vec<u64>,
    /// Stable term hash by term id (what routing policies see).
    pub term_hashes: Vec<u64>,
    /// Query `q`'s terms are `query_terms[query_offsets[q]..query_offsets[q + 1]]`.
    pub query_offsets: Vec<u32>,
    /// Term ids of all queries, concatenated.
    pub query_terms: Vec<u32>,
    /// Hash of each query's normalized form (terms joined by single spaces).
    pub query_hashes: Vec<u64>,
    /// Number of leading queries that form the train (warm-up) part.
    pub train_len: usize,
    /// For each query: true when its normalized form never occurs in the train part (always
    /// false for train queries). Used to measure how a learned table generalizes.
    pub novel: Vec<bool>,
}

impl Trace {
    /// Tokenizes `queries` (in evaluation order); the first `train_len` are the train part.
    pub fn build<'a>(
        queries: impl IntoIterator<Item = &'a str>,
        train_len: usize,
        sizes: &Sizes,
    ) -> Trace {
        let mut t = Trace {
            query_offsets: vec![0],
            ..Trace::default()
        };
        let mut tokens = Tokens::new();
        for q in queries {
            tokens.tokenize(q);
            for term in tokens.iter() {
                let id = t.dict.intern(term);
                if id as usize == t.term_bytes.len() {
                    t.term_bytes.push(sizes.bytes(term));
                    t.term_hashes.push(term_hash(term));
                }
                t.query_terms.push(id);
            }
            t.query_offsets
                .push(u32::try_from(t.query_terms.len()).expect("more than 2^32 term occurrences"));
            t.query_hashes.push(term_hash(tokens.normalized()));
        }
        t.train_len = train_len.min(t.len());
        let seen: FxHashSet<u64> = t.query_hashes[..t.train_len].iter().copied().collect();
        t.novel = t
            .query_hashes
            .iter()
            .enumerate()
            .map(|(q, h)| q >= t.train_len && !seen.contains(h))
            .collect();
        t
    }

    /// Number of queries.
    pub fn len(&self) -> usize {
        self.query_hashes.len()
    }

    /// True when there are no queries.
    pub fn is_empty(&self) -> bool {
        self.query_hashes.is_empty()
    }

    /// Number of test queries.
    pub fn test_len(&self) -> usize {
        self.len() - self.train_len
    }

    /// Term ids of query `q`.
    #[inline]
    pub fn terms(&self, q: usize) -> &[u32] {
        &self.query_terms[self.query_offsets[q] as usize..self.query_offsets[q + 1] as usize]
    }

    /// Writes the hashes of query `q`'s first [`MAX_TERMS`] terms, what a routing policy
    /// sees, into `hashes` and returns how many there are.
    #[inline]
    pub fn fill_term_hashes(&self, q: usize, hashes: &mut [u64; MAX_TERMS]) -> usize {
        let terms = self.terms(q);
        let n = terms.len().min(MAX_TERMS);
        for (slot, &t) in hashes.iter_mut().zip(&terms[..n]) {
            *slot = self.term_hashes[t as usize];
        }
        n
    }

    /// Summed postings bytes of all distinct terms in the trace: the base of "cache
    /// fraction" (DESIGN.md: capacity = fraction × this sum).
    pub fn distinct_bytes(&self) -> u64 {
        self.term_bytes.iter().sum()
    }

    /// Per-replica cache capacity for a cache fraction.
    pub fn capacity_for(&self, cache_frac: f64) -> u64 {
        capacity_of(self.distinct_bytes(), cache_frac)
    }

    /// The queries from `start` on, with the same term ids (dictionary, bytes and hashes
    /// are shared by value); the train part shrinks by `start`. For replaying the recent
    /// end of a long trace with the term ids of the whole.
    pub fn suffix(&self, start: usize) -> Trace {
        let start = start.min(self.len());
        let base = self.query_offsets[start];
        Trace {
            dict: self.dict.clone(),
            term_bytes: self.term_bytes.clone(),
            term_hashes: self.term_hashes.clone(),
            query_offsets: self.query_offsets[start..]
                .iter()
                .map(|o| o - base)
                .collect(),
            query_terms: self.query_terms[base as usize..].to_vec(),
            query_hashes: self.query_hashes[start..].to_vec(),
            train_len: self.train_len.saturating_sub(start),
            novel: self.novel[start..].to_vec(),
        }
    }

    /// The term-hash → bytes map a `term-vote` or `table` policy needs for this trace.
    pub fn term_bytes_map(&self) -> TermBytes {
        let mut m = TermBytes::new(data::sizes::UNKNOWN_TERM_BYTES as u32);
        for (h, b) in self.term_hashes.iter().zip(&self.term_bytes) {
            m.insert(*h, *b);
        }
        m
    }
}

/// Per-replica cache capacity for a cache fraction of `distinct_bytes` (DESIGN.md).
pub fn capacity_of(distinct_bytes: u64, cache_frac: f64) -> u64 {
    (distinct_bytes as f64 * cache_frac).round() as u64
}

/// [`Trace::distinct_bytes`] of a log without building its trace: pass each distinct query
/// text once (or any texts; repeats change nothing).
pub fn distinct_bytes_of<'a>(queries: impl IntoIterator<Item = &'a str>, sizes: &Sizes) -> u64 {
    let mut tokens = Tokens::new();
    let mut dict = TermDict::default();
    let mut total = 0u64;
    for q in queries {
        tokens.tokenize(q);
        for term in tokens.iter() {
            // Ids are dense in order of first appearance: a new term gets the next one.
            let known = dict.len();
            if dict.intern(term) as usize == known {
                total += sizes.bytes(term);
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use data::sizes::SizeTable;

    #[test]
    fn builds_csr_with_shared_ids() {
        let sizes = Sizes::Table(SizeTable::from_pairs([
            ("a".to_string(), 100),
            ("b".to_string(), 7),
        ]));
        let t = Trace::build(["A b", "b c b", "", "a  B"], 1, &sizes);
        assert_eq!(t.len(), 4);
        assert_eq!(t.novel, vec![false, true, true, false]);
        assert_eq!(t.train_len, 1);
        assert_eq!(t.terms(0), &[0, 1]);
        assert_eq!(t.terms(1), &[1, 2]);
        assert!(t.terms(2).is_empty());
        let tail = t.suffix(1);
        assert_eq!((tail.len(), tail.train_len), (3, 0));
        assert_eq!(tail.terms(0), &[1, 2]);
        assert_eq!(tail.terms(2), &[0, 1]);
        assert_eq!(tail.query_hashes, t.query_hashes[1..]);
        assert_eq!(tail.dict.len(), t.dict.len());
        assert_eq!(t.suffix(0).query_terms, t.query_terms);
        assert!(t.suffix(9).is_empty());
        assert_eq!(
            distinct_bytes_of(["A b", "b c b", "", "a  B"], &sizes),
            t.distinct_bytes()
        );
        assert_eq!(t.term_bytes, vec![100, 7, 21]);
        assert_eq!(t.distinct_bytes(), 128);
        assert_eq!(t.query_hashes[0], term_hash("a b"));
        assert_eq!(t.capacity_for(0.5), 64);
    }
}
