//! Extracting `q` from a request's query string, strictly: the URL standard's
//! `application/x-www-form-urlencoded` rules (`+` is a space, `%XX` a byte), but a malformed
//! escape or invalid UTF-8 is an error rather than being passed through, so the balancer
//! and the replica can never disagree on what the query was.

/// Why a query string was rejected; each maps to a 400 with a JSON error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// No `q` parameter.
    #[error("missing query parameter `q`")]
    Missing,
    /// `q` is empty.
    #[error("query parameter `q` is empty")]
    Empty,
    /// `q` is longer than the limit.
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

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes one form-encoded component into `out`, giving up past `limit` bytes.
fn decode_into(raw: &str, out: &mut Vec<u8>, limit: usize) -> Result<(), QueryError> {
    out.clear();
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = match b[i] {
            b'+' => {
                i += 1;
                b' '
            }
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex);
                let lo = b.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        i += 3;
                        h << 4 | l
                    }
                    _ => return Err(QueryError::Percent),
                }
            }
            c => {
                i += 1;
                c
            }
        };
        if out.len() == limit {
            return Err(QueryError::TooLong(limit));
        }
        out.push(c);
    }
    Ok(())
}

/// The decoded `q` of `query_string` (the part after `?`), at most `limit` bytes. The first
/// `q` wins; every other parameter is left for the replica. Errors in other parameters'
/// encoding are the replica's business, but a malformed `q` is rejected here.
pub fn extract_q(query_string: Option<&str>, limit: usize) -> Result<String, QueryError> {
    let qs = query_string.ok_or(QueryError::Missing)?;
    for pair in qs.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "q" {
            continue;
        }
        let mut bytes = Vec::with_capacity(value.len().min(limit));
        decode_into(value, &mut bytes, limit)?;
        let q = String::from_utf8(bytes).map_err(|_| QueryError::Utf8)?;
        if q.trim().is_empty() {
            return Err(QueryError::Empty);
        }
        return Ok(q);
    }
    Err(QueryError::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_rejects() {
        assert_eq!(extract_q(Some("q=a+b%20c"), 100).as_deref(), Ok("a b c"));
        assert_eq!(
            extract_q(Some("k=1&q=caf%C3%A9&q=x"), 100).as_deref(),
            Ok("café")
        );
        assert_eq!(extract_q(None, 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some("x=1"), 100), Err(QueryError::Missing));
        assert_eq!(extract_q(Some("q="), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q"), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q=+++"), 100), Err(QueryError::Empty));
        assert_eq!(extract_q(Some("q=%zz"), 100), Err(QueryError::Percent));
        assert_eq!(extract_q(Some("q=ab%4"), 100), Err(QueryError::Percent));
        assert_eq!(extract_q(Some("q=%FF%FE"), 100), Err(QueryError::Utf8));
        assert_eq!(extract_q(Some("q=abcd"), 4).as_deref(), Ok("abcd"));
        assert_eq!(extract_q(Some("q=abcde"), 4), Err(QueryError::TooLong(4)));
        assert_eq!(
            extract_q(Some("q=%41%41%41%41%41"), 4),
            Err(QueryError::TooLong(4))
        );
    }
}
