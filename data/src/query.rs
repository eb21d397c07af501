//! The query-string decoder both servers use, so the balancer and the replica can never
//! disagree on what a query was, with one length limit ([`MAX_QUERY_BYTES`]); the one
//! header of their answer they agree on ([`MISS_BYTES_HEADER`]); and the cache hint the
//! balancer sends with a query ([`CacheHint`]).
//!
//! A query string is `application/x-www-form-urlencoded` (the URL standard): pairs split on
//! `&`, a key split from its value at the first `=`, `+` is a space and `%XX` a byte.
//! Decoding is strict where the standard's parser is lenient: a `%` not followed by two hex
//! digits, or decoded bytes that are not UTF-8, are errors (each a 400 with its own message),
//! never passed through or replaced. Keys are compared as written (`q` and `k` need no
//! escaping). Of several `q` parameters, the first wins.
//!
//! The bytes are decoded by the `percent-encoding` crate; only the check that every `%`
//! starts a valid escape is written here, because that crate (like `form_urlencoded`)
//! leaves a malformed escape in the output instead of reporting it.

use std::borrow::Cow;

/// Longest accepted `q`, in bytes after decoding: the one limit of both servers (the
/// balancer's `max_query_bytes` may lower it, not raise it).
pub const MAX_QUERY_BYTES: usize = 4096;
/// A search's cache accesses at a replica, as its answer reports them (`cache`), or summed
/// over the shards of a sharded answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheCounts {
    /// Lookups served from RAM (coalesced ones included).
    #[serde(default)]
    pub hits: u64,
    /// Lookups read from flash.
    #[serde(default)]
    pub misses: u64,
    /// Stored bytes of the hits.
    #[serde(default)]
    pub hit_bytes: u64,
    /// Stored bytes of the misses.
    #[serde(default)]
    pub miss_bytes: u64,
}

impl CacheCounts {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &CacheCounts) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.hit_bytes += o.hit_bytes;
        self.miss_bytes += o.miss_bytes;
    }
}

/// The answers a search returns when its `k` parameter is absent (the replica's default,
/// and the sharded balancer's when it merges).
pub const DEFAULT_K: usize = 10;

/// The response header in which a replica reports the flash bytes a search read there, and
/// from which the balancer's `work` load counts them.
pub const MISS_BYTES_HEADER: &str = "x-ballot-miss-bytes";

/// The request header in which the balancer names the query's terms that the replica it
/// chose should not cache (its table's admission rule, `balancer::policy::admission`):
/// the terms as the shared tokenizer writes them, separated by single spaces.
pub const NO_CACHE_HEADER: &str = "x-ballot-no-cache";

/// The request header bounding [`NO_CACHE_HEADER`]: the hint holds for caches of at most
/// this many bytes (the size the table was trained for); a larger cache ignores it.
pub const NO_CACHE_WITHIN_HEADER: &str = "x-ballot-no-cache-within";

/// A replica's reading of the balancer's cache hint: which of a query's terms it reads
/// from flash without caching.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheHint {
    terms: Vec<String>,
    /// A hint came for a cache larger than its bound, so it was not followed.
    ignored: bool,
}

impl CacheHint {
    /// The hint in the header values `no_cache` and `within` for a cache of `cache_bytes`:
    /// empty when there is none or the cache is larger than `within`. Errors (a 400 at the
    /// replica) when a value is not UTF-8 or `within` is not a byte count.
    pub fn read(
        no_cache: Option<&[u8]>,
        within: Option<&[u8]>,
        cache_bytes: u64,
    ) -> Result<CacheHint, String> {
        let Some(no_cache) = no_cache else {
            return Ok(CacheHint::default());
        };
        if let Some(within) = within {
            let bound: u64 = std::str::from_utf8(within)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| format!("header {NO_CACHE_WITHIN_HEADER} is not a byte count"))?;
            if cache_bytes > bound {
                return Ok(CacheHint {
                    terms: Vec::new(),
                    ignored: true,
                });
            }
        }
        let text = std::str::from_utf8(no_cache)
            .map_err(|_| format!("header {NO_CACHE_HEADER} is not valid UTF-8"))?;
        Ok(CacheHint {
            terms: text.split_ascii_whitespace().map(str::to_owned).collect(),
            ignored: false,
        })
    }

    /// True when the balancer sent a hint this cache is too large to follow (its cache is
    /// larger than the size the table was trained for): the replica counts these, so a
    /// rule that silently steps aside shows.
    pub fn ignored(&self) -> bool {
        self.ignored
    }

    /// Whether `term`'s list is read without caching.
    pub fn skips(&self, term: &str) -> bool {
        self.terms.iter().any(|t| t == term)
    }
}

/// Why a query string was rejected; each maps to a 400 with a JSON error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// No `q` parameter.
    #[error("missing query parameter `q`")]
    Missing,
    /// `q` is empty (or only white space).
    #[error("query parameter `q` is empty")]
    Empty,
    /// The decoded value is longer than the limit.
    #[error("query parameter `q` is longer than {0} bytes")]
    TooLong(usize),
    /// A `%` not followed by two hex digits.
    #[error("invalid percent-encoding in the query string")]
    Percent,
    /// The decoded bytes are not UTF-8.
    #[error("query parameter `q` is not valid UTF-8")]
    Utf8,
}

impl QueryError {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            QueryError::Missing => "missing_q",
            QueryError::Empty => "empty_q",
            QueryError::TooLong(_) => "q_too_long",
            QueryError::Percent => "bad_percent_encoding",
            QueryError::Utf8 => "bad_utf8",
        }
    }
}

/// One `key=value` pair of a query string, its value still encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param<'a> {
    /// The key, as written.
    pub key: &'a str,
    /// The value, still encoded (empty when the pair has no `=`).
    pub raw: &'a str,
}

impl<'a> Param<'a> {
    /// The decoded value, at most `limit` bytes.
    pub fn value(&self, limit: usize) -> Result<Cow<'a, str>, QueryError> {
        decode(self.raw, limit)
    }
}

/// The pairs of `query_string` (the part after `?`) in order; empty pieces are skipped.
pub fn params(query_string: &str) -> impl Iterator<Item = Param<'_>> {
    query_string.split('&').filter(|p| !p.is_empty()).map(|p| {
        let (key, raw) = p.split_once('=').unwrap_or((p, ""));
        Param { key, raw }
    })
}

/// Decodes one form-encoded component strictly, at most `limit` bytes once decoded. An
/// input more than three times the limit is refused before decoding (an escape is three
/// bytes for one).
pub fn decode(raw: &str, limit: usize) -> Result<Cow<'_, str>, QueryError> {
    if raw.len() > limit.saturating_mul(3) {
        return Err(QueryError::TooLong(limit));
    }
    let bytes = raw.as_bytes();
    for (i, _) in bytes.iter().enumerate().filter(|&(_, &b)| b == b'%') {
        let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
        if !(hex(i + 1) && hex(i + 2)) {
            return Err(QueryError::Percent);
        }
    }
    let decoded: Cow<'_, [u8]> = if bytes.contains(&b'+') {
        let spaced: Vec<u8> = bytes
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        Cow::Owned(Cow::from(percent_encoding::percent_decode(&spaced)).into_owned())
    } else {
        percent_encoding::percent_decode(bytes).into()
    };
    let text = match decoded {
        Cow::Borrowed(b) => Cow::Borrowed(std::str::from_utf8(b).map_err(|_| QueryError::Utf8)?),
        Cow::Owned(v) => Cow::Owned(String::from_utf8(v).map_err(|_| QueryError::Utf8)?),
    };
    if text.len() > limit {
        return Err(QueryError::TooLong(limit));
    }
    Ok(text)
}

/// The decoded `q` of `query_string`, at most `limit` bytes and not blank. The first `q`
/// wins; other parameters are not looked at.
pub fn extract_q(query_string: Option<&str>, limit: usize) -> Result<String, QueryError> {
    let param = params(query_string.ok_or(QueryError::Missing)?)
        .find(|p| p.key == "q")
        .ok_or(QueryError::Missing)?;
    let q = param.value(limit)?;
    if q.trim().is_empty() {
        return Err(QueryError::Empty);
    }
    Ok(q.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_rejects() {
        assert_eq!(extract_q(Some("q=a+b%20c"), 100).as_deref(), Ok("a b c"));
        assert_eq!(extract_q(Some("q=a%2Bb"), 100).as_deref(), Ok("a+b"));
        assert_eq!(
            extract_q(Some("k=1&q=caf%C3%A9&q=x"), 100).as_deref(),
            Ok("café")
        );
        assert_eq!(extract_q(Some("&&q=x&"), 100).as_deref(), Ok("x"));
        assert_eq!(extract_q(None, 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some(""), 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some("x=1"), 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some("qq=1"), 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some("q="), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q"), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q=+++"), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q=%zz"), 100), Err(QueryError::Percent));
        assert_eq!(extract_q(Some("q=ab%4"), 100), Err(QueryError::Percent));
        assert_eq!(extract_q(Some("q=ab%"), 100), Err(QueryError::Percent));
        assert_eq!(extract_q(Some("q=%FF%FE"), 100), Err(QueryError::Utf8));
        assert_eq!(extract_q(Some("q=%e9"), 100), Err(QueryError::Utf8));
        assert_eq!(extract_q(Some("q=abcd"), 4).as_deref(), Ok("abcd"));
        assert_eq!(extract_q(Some("q=abcde"), 4), Err(QueryError::TooLong(4)));
        assert_eq!(
            extract_q(Some("q=%41%41%41%41%41"), 4),
            Err(QueryError::TooLong(4))
        );
        // A later bad `q` is not looked at.
        assert_eq!(extract_q(Some("q=a&q=%zz"), 100).as_deref(), Ok("a"));
    }

    #[test]
    fn values_borrow_when_nothing_is_escaped() {
        assert!(matches!(decode("plain", 10), Ok(Cow::Borrowed("plain"))));
        let kv: Vec<(&str, &str)> = params("a=1&b&c=x=y").map(|p| (p.key, p.raw)).collect();
        assert_eq!(kv, [("a", "1"), ("b", ""), ("c", "x=y")]);
        assert_eq!(decode("x%3Dy", 10).as_deref(), Ok("x=y"));
    }

    #[test]
    fn the_cache_hint_holds_up_to_its_cache_size() {
        let hint = CacheHint::read(Some(b"the of"), Some(b"1000"), 1000).unwrap();
        assert!(hint.skips("the") && hint.skips("of") && !hint.skips("cat"));
        assert!(!hint.ignored());
        let larger = CacheHint::read(Some(b"the of"), Some(b"1000"), 1001).unwrap();
        assert!(!larger.skips("the"), "a larger cache ignores the hint");
        assert!(larger.ignored(), "and says so");
        let unbounded = CacheHint::read(Some("straße".as_bytes()), None, u64::MAX).unwrap();
        assert!(unbounded.skips("straße"));
        assert_eq!(
            CacheHint::read(None, Some(b"1"), 0).unwrap(),
            CacheHint::default()
        );
        let bad = CacheHint::read(Some(b"a"), Some(b"lots"), 1).unwrap_err();
        assert!(bad.contains(NO_CACHE_WITHIN_HEADER), "{bad}");
        let bad = CacheHint::read(Some(&[0xff, 0xfe]), None, 1).unwrap_err();
        assert!(bad.contains("UTF-8"), "{bad}");
    }
}
