//! Summary statistics of a query log: the numbers that say whether a log (real or
//! synthetic) has the skew that makes cache-aware routing matter.
//!
//! [`log_stats`] measures volume and repetition (distinct queries, the share of volume in
//! the most popular 1% of distinct queries) and term skew (the share of term occurrences in
//! the most popular 1% of terms, and how many queries touch one of them), the quantities
//! `../shared/data/README.md` reports for the AOL 2006 log and that [`data::synth`] is
//! calibrated against. [`postings_stats`] measures the postings bytes a log touches under a
//! size function (for example [`data::sizes::SizeModel`] over a frequency table).
//!
//! Definitions, shared by both functions:
//! - queries are taken **as given**: the caller collapses repeated clicks (consecutive
//!   identical lines) first;
//! - terms come from [`data::tokenizer::Tokens`] (lowercased, split on non-alphanumerics,
//!   de-duplicated within a query), so a term occurs at most once per query and "term
//!   occurrences" counts queries containing the term;
//! - a **distinct query** is a distinct raw string (`"Google"` and `"google"` are two
//!   distinct queries, although they have the same terms);
//! - "top 1%" of `n` items is the `ceil(n / 100)` items with the highest counts, ties broken
//!   by the lexicographically smaller string, so the result does not depend on input order.

use rustc_hash::FxHashMap;

use data::tokenizer::Tokens;

/// Headline statistics of a query log (see the module docs for the definitions).
#[derive(Clone, Debug, PartialEq)]
pub struct LogStats {
    /// Number of queries, repeats included.
    pub queries: u64,
    /// Number of distinct raw query strings.
    pub distinct_queries: u64,
    /// Number of distinct terms.
    pub distinct_terms: u64,
    /// Mean number of (de-duplicated) terms per query, over all queries.
    pub terms_per_query: f64,
    /// Share of all term occurrences that are occurrences of a top-1% term.
    pub top1pct_terms_occurrence_share: f64,
    /// Share of queries that contain at least one top-1% term.
    pub queries_with_top1pct_term: f64,
    /// Share of query volume taken by the top 1% of distinct queries.
    pub top1pct_queries_volume_share: f64,
    /// `distinct_queries / queries`.
    pub distinct_ratio: f64,
}

/// Number of items in the "top 1%" of `n` items: `ceil(n / 100)`.
pub fn top1pct_count(n: usize) -> usize {
    n.div_ceil(100)
}

/// `num / den`, or 0 when `den` is 0 (statistics of an empty log are all zero).
fn ratio(num: f64, den: f64) -> f64 {
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// Term ids of a log: each distinct term gets a dense id, each query the span of its ids.
struct TermIndex {
    ids: FxHashMap<String, u32>,
    names: Vec<String>,
    counts: Vec<u64>,
    occurrences: Vec<u32>,
    query_ends: Vec<usize>,
}

impl TermIndex {
    fn new() -> Self {
        TermIndex {
            ids: FxHashMap::default(),
            names: Vec::new(),
            counts: Vec::new(),
            occurrences: Vec::new(),
            query_ends: Vec::new(),
        }
    }

    fn add_query(&mut self, tokens: &Tokens) {
        for term in tokens.iter() {
            let id = match self.ids.get(term) {
                Some(&id) => id,
                None => {
                    let id = self.names.len() as u32;
                    self.ids.insert(term.to_owned(), id);
                    self.names.push(term.to_owned());
                    self.counts.push(0);
                    id
                }
            };
            self.counts[id as usize] += 1;
            self.occurrences.push(id);
        }
        self.query_ends.push(self.occurrences.len());
    }

    /// Marks the top-1% terms by count (ties: smaller term first).
    fn top1pct(&self) -> Vec<bool> {
        let n = self.names.len();
        let k = top1pct_count(n);
        let mut is_top = vec![false; n];
        if k == 0 {
            return is_top;
        }
        let mut order: Vec<u32> = (0..n as u32).collect();
        let by_rank = |a: &u32, b: &u32| {
            let (a, b) = (*a as usize, *b as usize);
            self.counts[b]
                .cmp(&self.counts[a])
                .then_with(|| self.names[a].cmp(&self.names[b]))
        };
        if k < n {
            order.select_nth_unstable_by(k - 1, by_rank);
        }
        for &id in &order[..k] {
            is_top[id as usize] = true;
        }
        is_top
    }
}

/// Computes [`LogStats`] of `queries` (taken as given: collapse repeated clicks first).
/// Every share is 0 for an empty log.
pub fn log_stats<'a>(queries: impl IntoIterator<Item = &'a str>) -> LogStats {
    let mut query_counts: FxHashMap<&'a str, u64> = FxHashMap::default();
    let mut index = TermIndex::new();
    let mut tokens = Tokens::new();
    for q in queries {
        *query_counts.entry(q).or_insert(0) += 1;
        tokens.tokenize(q);
        index.add_query(&tokens);
    }
    let queries = index.query_ends.len() as u64;
    let total_occurrences = index.occurrences.len() as u64;

    let is_top = index.top1pct();
    let top_occurrences: u64 = index
        .counts
        .iter()
        .zip(&is_top)
        .filter(|(_, &top)| top)
        .map(|(&c, _)| c)
        .sum();
    let mut queries_with_top = 0u64;
    let mut start = 0usize;
    for &end in &index.query_ends {
        if index.occurrences[start..end]
            .iter()
            .any(|&id| is_top[id as usize])
        {
            queries_with_top += 1;
        }
        start = end;
    }

    let mut volumes: Vec<u64> = query_counts.values().copied().collect();
    volumes.sort_unstable_by(|a, b| b.cmp(a));
    let top_volume: u64 = volumes[..top1pct_count(volumes.len())].iter().sum();
    let distinct_queries = volumes.len() as u64;

    let q = queries as f64;
    LogStats {
        queries,
        distinct_queries,
        distinct_terms: index.names.len() as u64,
        terms_per_query: ratio(total_occurrences as f64, q),
        top1pct_terms_occurrence_share: ratio(top_occurrences as f64, total_occurrences as f64),
        queries_with_top1pct_term: ratio(queries_with_top as f64, q),
        top1pct_queries_volume_share: ratio(top_volume as f64, q),
        distinct_ratio: ratio(distinct_queries as f64, q),
    }
}

/// `1234567` as `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

impl LogStats {
    /// `(label, value)` rows for printing, in a fixed order.
    pub fn table_rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("queries", thousands(self.queries)),
            ("distinct queries", thousands(self.distinct_queries)),
            ("distinct terms", thousands(self.distinct_terms)),
            ("terms per query", format!("{:.2}", self.terms_per_query)),
            (
                "top 1% of terms: share of term occurrences",
                percent(self.top1pct_terms_occurrence_share),
            ),
            (
                "queries containing a top-1% term",
                percent(self.queries_with_top1pct_term),
            ),
            (
                "top 1% of distinct queries: share of volume",
                percent(self.top1pct_queries_volume_share),
            ),
            (
                "distinct / total queries",
                format!("{:.3}", self.distinct_ratio),
            ),
        ]
    }
}

/// Postings bytes a log touches (see the module docs for the definitions).
#[derive(Clone, Debug, PartialEq)]
pub struct PostingsStats {
    /// Number of distinct terms.
    pub distinct_terms: u64,
    /// Sum of the postings bytes of the distinct terms (what per-replica cache capacity is a
    /// share of in the standard evaluation).
    pub total_bytes: u64,
    /// Share of `total_bytes` in the top 1% of distinct terms by bytes.
    pub top1pct_bytes_share: f64,
    /// Mean over queries of the summed postings bytes of the query's terms (bytes a query
    /// asks the cache for).
    pub requested_bytes_per_query: f64,
}

/// Computes [`PostingsStats`] of `queries`, `bytes_of` giving a term's postings bytes (it is
/// called once per distinct term).
pub fn postings_stats<'a>(
    queries: impl IntoIterator<Item = &'a str>,
    mut bytes_of: impl FnMut(&str) -> u64,
) -> PostingsStats {
    let mut index = TermIndex::new();
    let mut tokens = Tokens::new();
    for q in queries {
        tokens.tokenize(q);
        index.add_query(&tokens);
    }
    let mut bytes: Vec<u64> = index.names.iter().map(|t| bytes_of(t)).collect();
    let requested: u128 = index
        .counts
        .iter()
        .zip(&bytes)
        .map(|(&c, &b)| u128::from(c) * u128::from(b))
        .sum();
    bytes.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = bytes.iter().sum();
    let top: u64 = bytes[..top1pct_count(bytes.len())].iter().sum();
    PostingsStats {
        distinct_terms: bytes.len() as u64,
        total_bytes: total,
        top1pct_bytes_share: ratio(top as f64, total as f64),
        requested_bytes_per_query: ratio(requested as f64, index.query_ends.len() as f64),
    }
}

impl PostingsStats {
    /// `(label, value)` rows for printing, in a fixed order.
    pub fn table_rows(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "postings bytes, all distinct terms",
                thousands(self.total_bytes),
            ),
            (
                "top 1% of terms by size: share of bytes",
                percent(self.top1pct_bytes_share),
            ),
            (
                "postings bytes requested per query",
                thousands(self.requested_bytes_per_query.round() as u64),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_numbers_on_a_tiny_log() {
        // 10 queries, 7 distinct raw strings ("A b" and "a b" differ), 5 distinct terms.
        let log = [
            "a b", "a b", "A b", "a", "c d", "a b", "e", "a b", "b-b", "c",
        ];
        let s = log_stats(log);
        // Terms per query: 2+2+2+1+2+2+1+2+1+1 = 16.
        // Counts: a 6, b 6, c 2, d 1, e 1 → top ceil(5/100)=1 term: tie a/b → "a".
        // Volumes: "a b" 4, others 1 → top ceil(6/100)=1 query: 4/10.
        assert_eq!(
            s,
            LogStats {
                queries: 10,
                distinct_queries: 7,
                distinct_terms: 5,
                terms_per_query: 1.6,
                top1pct_terms_occurrence_share: 6.0 / 16.0,
                queries_with_top1pct_term: 0.6,
                top1pct_queries_volume_share: 0.4,
                distinct_ratio: 0.7,
            }
        );
        let rows = s.table_rows();
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[0], ("queries", "10".to_string()));
        assert_eq!(rows[4].1, "37.5%");
    }

    #[test]
    fn order_does_not_matter() {
        let mut log = ["x y", "y z", "x", "z w", "q", "x y", "w"];
        let a = log_stats(log.iter().copied());
        log.reverse();
        assert_eq!(a, log_stats(log.iter().copied()));
    }

    #[test]
    fn top_percent_rounds_up() {
        assert_eq!(top1pct_count(0), 0);
        assert_eq!(top1pct_count(1), 1);
        assert_eq!(top1pct_count(100), 1);
        assert_eq!(top1pct_count(101), 2);
        // 200 terms: the top 2 are "hot" and "cold".
        let mut log: Vec<String> = (0..198).map(|i| format!("w{i}")).collect();
        log.push("hot cold".into());
        log.push("hot cold x".into());
        log.push("w0".into());
        let s = log_stats(log.iter().map(String::as_str));
        assert_eq!(s.distinct_terms, 201);
        // Top 3 of 201 terms: cold 2, hot 2, w0 2 → 6 of 204 occurrences; 4 of 201
        // queries contain one of them.
        assert_eq!(s.top1pct_terms_occurrence_share, 6.0 / 204.0);
        assert_eq!(s.queries_with_top1pct_term, 4.0 / 201.0);
    }

    #[test]
    fn empty_log_is_all_zero() {
        let s = log_stats(std::iter::empty());
        assert_eq!(s.queries, 0);
        assert_eq!(s.terms_per_query, 0.0);
        assert_eq!(s.distinct_ratio, 0.0);
        let p = postings_stats(std::iter::empty(), |_| 1);
        assert_eq!(p.total_bytes, 0);
        assert_eq!(p.top1pct_bytes_share, 0.0);
    }

    #[test]
    fn postings_bytes() {
        let log = ["a b", "a", "c"];
        let p = postings_stats(log, |t| match t {
            "a" => 100,
            "b" => 10,
            _ => 1,
        });
        assert_eq!(p.distinct_terms, 3);
        assert_eq!(p.total_bytes, 111);
        assert_eq!(p.top1pct_bytes_share, 100.0 / 111.0);
        // (100 + 10) + 100 + 1 over 3 queries.
        assert_eq!(p.requested_bytes_per_query, 211.0 / 3.0);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(554_541), "554,541");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
