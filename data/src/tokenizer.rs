//! The tokenizer every component uses, so that the balancer, the replica, the simulator and
//! the learner agree on what a term is.
//!
//! Rules (DESIGN.md): lowercase; split on every character that is not alphanumeric in the
//! Unicode sense (`char::is_alphanumeric`); drop empty pieces; keep the first occurrence of
//! each term (de-duplicate within a query, order of first appearance); keep at most
//! [`MAX_TERMS`] terms. Lowercasing is Unicode-aware (`char::to_lowercase`, so `Straße`
//! stays `straße` and `ÉTÉ` becomes `été`); of a lowercase form, only alphanumeric
//! characters are kept (`İ` becomes `i`, without the combining dot `char::to_lowercase`
//! adds), so a term is always lowercase alphanumeric and tokenizing it again returns it.
//!
//! A term is at most [`MAX_TERM_BYTES`] long: the longest term a query the servers accept
//! ([`crate::query::MAX_QUERY_BYTES`]) can hold, since lowercasing makes a character at most
//! 3/2 as long in UTF-8 (`Ⱥ`, 2 bytes, becomes `ⱥ`, 3). A longer piece (only a log line
//! longer than any servable query has one) is dropped, so a trained voting table never
//! holds a term the table loader refuses or a query could never carry.
//!
//! [`Tokens`] is a reusable buffer: after its first few queries, tokenizing allocates
//! nothing, which the balancer's hot path relies on. Its [`Tokens::normalized`] form (terms
//! joined by single spaces) is what query hashing uses.

/// The most terms a query keeps; later terms are ignored.
pub const MAX_TERMS: usize = 32;

/// The longest term, in bytes: a query of [`crate::query::MAX_QUERY_BYTES`] bytes holding one
/// term of characters that lowercasing lengthens by half.
pub const MAX_TERM_BYTES: usize = crate::query::MAX_QUERY_BYTES / 2 * 3;

/// A reusable tokenization of one query.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    buf: String,
    spans: Vec<(u32, u32)>,
    truncated: bool,
}

impl Tokens {
    /// An empty buffer.
    pub fn new() -> Self {
        Tokens {
            buf: String::with_capacity(256),
            spans: Vec::with_capacity(MAX_TERMS),
            truncated: false,
        }
    }

    /// Replaces the contents with the terms of `query`.
    pub fn tokenize(&mut self, query: &str) {
        self.buf.clear();
        self.spans.clear();
        self.truncated = false;
        let mut start = 0usize;
        for c in query.chars() {
            if c.is_alphanumeric() {
                if c.is_ascii() {
                    self.buf.push(c.to_ascii_lowercase());
                } else {
                    // Keep only the letters of the lowercase form: `İ` lowercases to `i`
                    // and a combining dot, which would make the term split differently
                    // when tokenized again (fuzzing found it; no other character does).
                    self.buf
                        .extend(c.to_lowercase().filter(|l| l.is_alphanumeric()));
                }
            } else {
                start = self.end_term(start);
                if self.truncated {
                    break;
                }
            }
        }
        self.end_term(start);
        if self.buf.ends_with(' ') {
            self.buf.pop();
        }
    }

    /// Closes the term that started at byte `start` of `buf`, if any, and returns where the
    /// next term starts.
    fn end_term(&mut self, start: usize) -> usize {
        let end = self.buf.len();
        if end == start {
            return start;
        }
        let term = &self.buf[start..end];
        let duplicate = self
            .spans
            .iter()
            .any(|&(s, e)| &self.buf[s as usize..e as usize] == term);
        if duplicate || self.truncated || term.len() > MAX_TERM_BYTES {
            self.buf.truncate(start);
            return start;
        }
        if self.spans.len() == MAX_TERMS {
            self.truncated = true;
            self.buf.truncate(start);
            return start;
        }
        self.spans.push((start as u32, end as u32));
        self.buf.push(' ');
        end + 1
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when the query has no terms.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// True when the query had more than [`MAX_TERMS`] distinct terms and was cut.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The `i`-th term.
    pub fn get(&self, i: usize) -> &str {
        let (s, e) = self.spans[i];
        &self.buf[s as usize..e as usize]
    }

    /// Each term's `(start, end)` byte offsets in [`Tokens::normalized`], in order.
    pub fn spans(&self) -> &[(u32, u32)] {
        &self.spans
    }

    /// The terms in order of first appearance.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.spans
            .iter()
            .map(|&(s, e)| &self.buf[s as usize..e as usize])
    }

    /// The terms joined by single spaces: the normalized query.
    pub fn normalized(&self) -> &str {
        &self.buf
    }
}

/// Tokenizes `query` into owned terms (convenience for cold paths and tests).
pub fn tokenize(query: &str) -> Vec<String> {
    let mut t = Tokens::new();
    t.tokenize(query);
    t.iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lowercases_and_dedups() {
        assert_eq!(
            tokenize("New York  new-york, NY!"),
            vec!["new", "york", "ny"]
        );
        assert_eq!(tokenize("www.google.com"), vec!["www", "google", "com"]);
        assert_eq!(tokenize("  --  "), Vec::<String>::new());
        assert_eq!(tokenize(""), Vec::<String>::new());
    }

    #[test]
    fn unicode_aware() {
        assert_eq!(tokenize("ÉTÉ à Paris"), vec!["été", "à", "paris"]);
        assert_eq!(tokenize("İSTANBUL İzmir"), vec!["istanbul", "izmir"]);
        assert_eq!(tokenize("Straße_München"), vec!["straße", "münchen"]);
        assert_eq!(tokenize("東京 tokyo2006"), vec!["東京", "tokyo2006"]);
    }

    #[test]
    fn keeps_at_most_32_terms() {
        let q: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        let mut t = Tokens::new();
        t.tokenize(&q.join(" "));
        assert_eq!(t.len(), MAX_TERMS);
        assert!(t.truncated());
        assert_eq!(t.get(31), "t31");
        // Duplicates do not count against the limit.
        let dup = "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a b";
        t.tokenize(dup);
        assert_eq!(t.iter().collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(!t.truncated());
    }

    #[test]
    fn lowercasing_lengthens_a_character_by_at_most_half() {
        let mut worst = (1, 1, 'a');
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let lower: usize = c.to_lowercase().map(char::len_utf8).sum();
            if lower * worst.1 > worst.0 * c.len_utf8() {
                worst = (lower, c.len_utf8(), c);
            }
        }
        assert_eq!((worst.0, worst.1), (3, 2), "worst case {:?}", worst.2);
        // The longest servable query's longest term is kept; a longer piece is dropped.
        let longest = "Ⱥ".repeat(crate::query::MAX_QUERY_BYTES / 2);
        assert_eq!(longest.len(), crate::query::MAX_QUERY_BYTES);
        let terms = tokenize(&longest);
        assert_eq!(terms[0].len(), MAX_TERM_BYTES);
        assert_eq!(
            tokenize(&format!("a {} b", "x".repeat(MAX_TERM_BYTES + 1))),
            ["a", "b"]
        );
    }

    #[test]
    fn normalized_joins_with_single_spaces() {
        let mut t = Tokens::new();
        t.tokenize("  Hello,   WORLD!! hello ");
        assert_eq!(t.normalized(), "hello world");
        t.tokenize("x");
        assert_eq!(t.normalized(), "x");
    }

    #[test]
    fn reuse_does_not_leak_previous_query() {
        let mut t = Tokens::new();
        t.tokenize("alpha beta gamma");
        t.tokenize("delta");
        assert_eq!(t.iter().collect::<Vec<_>>(), vec!["delta"]);
    }
}
