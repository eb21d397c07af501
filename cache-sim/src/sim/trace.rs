//! A compact, pre-tokenized query trace: term ids, term hashes and postings bytes in flat
//! vectors (CSR layout), with the train/test boundary. Built once per log; every policy and
//! cache size replays the same trace, so tokenizing never shows up in simulation time.

use balancer::policy::TermBytes;
use data::dict::TermDict;
use data::hash::term_hash;
use data::sizes::Sizes;
use data::tokenizer::Tokens;
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

    /// Summed postings bytes of all distinct terms in the trace: the base of "cache
    /// fraction" (DESIGN.md: capacity = fraction × this sum).
    pub fn distinct_bytes(&self) -> u64 {
        self.term_bytes.iter().sum()
    }

    /// Per-replica cache capacity for a cache fraction.
    pub fn capacity_for(&self, cache_frac: f64) -> u64 {
        (self.distinct_bytes() as f64 * cache_frac).round() as u64
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
        assert_eq!(t.term_bytes, vec![100, 7, 21]);
        assert_eq!(t.distinct_bytes(), 128);
        assert_eq!(t.query_hashes[0], term_hash("a b"));
        assert_eq!(t.capacity_for(0.5), 64);
    }
}
