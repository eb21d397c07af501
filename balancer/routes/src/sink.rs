//! The query text of one request, gathered clause by clause from its body: the texts of
//! the request's text clauses, trimmed, joined by single spaces, at most a fixed number of
//! bytes. Shared by the engine readers ([`crate::es_dsl`], [`crate::solr_json`]).
//!
//! The cap exists because routing reads only the first 32 terms of a query: a client that
//! sends a megabyte of `terms` must not make the balancer copy a megabyte. Once the text
//! is full it is cut at the last UTF-8 char boundary that fits (UTF-8: RFC 3629, so the
//! text stays a valid `String`), [`TextSink::cut`] says so, and later clauses are ignored.

/// Query text gathered from the clauses of a request, space-separated, at most `limit` bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextSink {
    text: String,
    limit: usize,
    clauses: usize,
    cut: bool,
}

impl TextSink {
    /// An empty sink that will hold at most `limit` bytes of text (no allocation yet).
    pub fn new(limit: usize) -> Self {
        TextSink {
            text: String::new(),
            limit,
            clauses: 0,
            cut: false,
        }
    }

    /// Appends one clause's text (trimmed; blank text is skipped and not counted). Once the
    /// text would pass `limit` bytes it is cut at the last char boundary that fits and
    /// later pushes are ignored (routing needs only the first 32 terms; `cut()` says so).
    pub fn push(&mut self, s: &str) {
        let s = s.trim();
        if s.is_empty() || self.cut {
            return;
        }
        // One space between clauses, none before the first.
        let sep = usize::from(!self.text.is_empty());
        let room = self.limit.saturating_sub(self.text.len());
        let fit = if sep + s.len() <= room {
            s
        } else {
            self.cut = true;
            prefix_within(s, room.saturating_sub(sep))
        };
        // A clause none of whose bytes fit leaves no trailing space and is not counted.
        if fit.is_empty() {
            return;
        }
        if sep == 1 {
            self.text.push(' ');
        }
        self.text.push_str(fit);
        self.clauses += 1;
    }

    /// How many non-blank clauses have text (whole or, for the last one, cut) in the sink.
    pub fn clauses(&self) -> usize {
        self.clauses
    }

    /// Whether the text reached `limit` and was cut (later clauses were dropped).
    pub fn cut(&self) -> bool {
        self.cut
    }

    /// The text gathered so far (what [`TextSink::into_text`] will return).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The gathered text.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn prefix_within(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    // A UTF-8 char is at most 4 bytes, so this walks back at most 3 steps.
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_are_trimmed_and_joined_by_one_space() {
        let mut sink = TextSink::new(64);
        sink.push("  rust borrow checker ");
        sink.push("\t\n");
        sink.push("");
        sink.push("lifetimes");
        assert_eq!(sink.clauses(), 2);
        assert!(!sink.cut());
        assert_eq!(sink.into_text(), "rust borrow checker lifetimes");
    }

    #[test]
    fn text_is_cut_at_the_limit_and_later_pushes_are_ignored() {
        let mut sink = TextSink::new(10);
        sink.push("new york");
        sink.push("city");
        sink.push("big apple");
        assert!(sink.cut());
        assert_eq!(sink.clauses(), 2);
        // "new york" (8) + " " (1) + "c" (1) = 10 bytes.
        assert_eq!(sink.into_text(), "new york c");
    }

    #[test]
    fn an_exact_fit_is_not_a_cut() {
        let mut sink = TextSink::new(9);
        sink.push("new");
        sink.push("york");
        assert!(!sink.cut());
        assert_eq!(sink.as_str(), "new york");
        sink.push("x");
        assert!(sink.cut());
        assert_eq!(sink.into_text(), "new york");
    }

    #[test]
    fn a_cut_never_splits_a_char() {
        // "zürich" is z(1) ü(2) r i c h: 7 bytes; 2 bytes of room end inside the ü.
        let mut sink = TextSink::new(2);
        sink.push("zürich");
        assert!(sink.cut());
        assert_eq!(sink.into_text(), "z");

        // "日本" is two 3-byte chars; room for 4 keeps only the first.
        let mut sink = TextSink::new(4);
        sink.push("日本");
        assert_eq!(sink.into_text(), "日");
    }

    #[test]
    fn a_clause_with_no_room_leaves_no_trailing_space() {
        let mut sink = TextSink::new(4);
        sink.push("rust");
        sink.push("go");
        assert!(sink.cut());
        assert_eq!(sink.clauses(), 1);
        assert_eq!(sink.into_text(), "rust");

        let mut sink = TextSink::new(0);
        sink.push("anything");
        assert!(sink.cut());
        assert_eq!(sink.clauses(), 0);
        assert_eq!(sink.into_text(), "");
    }
}
