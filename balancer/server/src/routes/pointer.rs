//! JSON Pointers (RFC 6901): where a route finds the query text in a JSON request body,
//! parsed once when the config is loaded and looked up with no allocation per request.
//!
//! A pointer is `""` (the whole document) or a sequence of `/token`; in a token `~1` stands
//! for `/` and `~0` for `~` (decoded in that order, so `~01` is `~1`), and any other `~` is
//! an error. On an object a token is a member name; on an array it is an index in decimal
//! without leading zeros (`-`, the element past the end, never exists). A route's pointer
//! must name something inside the body, so the whole-document pointer is refused at load.

use std::fmt;

use serde_json::Value;

/// Why a pointer's text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The empty pointer names the whole body, not a field in it.
    #[error("a JSON pointer must name a field inside the body, e.g. \"/query/query_string/query\", not the whole body (\"\")")]
    Whole,
    /// The text does not start with `/`.
    #[error("a JSON pointer starts with `/` (RFC 6901), got {0:?}")]
    NoSlash(String),
    /// A `~` not followed by `0` or `1`.
    #[error(
        "a JSON pointer escapes `~` as `~0` and `/` as `~1` (RFC 6901); {0:?} has another `~`"
    )]
    BadEscape(String),
}

/// A parsed JSON pointer: its reference tokens, unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    text: String,
    tokens: Vec<String>,
}

impl Pointer {
    /// Parses `text` (RFC 6901, section 3), refusing the whole-document pointer.
    pub fn parse(text: &str) -> Result<Pointer, PointerError> {
        if text.is_empty() {
            return Err(PointerError::Whole);
        }
        let rest = text
            .strip_prefix('/')
            .ok_or_else(|| PointerError::NoSlash(text.to_owned()))?;
        let tokens = rest
            .split('/')
            .map(|t| unescape(t).ok_or_else(|| PointerError::BadEscape(text.to_owned())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pointer {
            text: text.to_owned(),
            tokens,
        })
    }

    /// The pointer to member `name` of the object at `self` (the name escaped).
    pub fn child(&self, name: &str) -> Pointer {
        let mut text = self.text.clone();
        text.push('/');
        text.push_str(&escape(name));
        let mut tokens = self.tokens.clone();
        tokens.push(name.to_owned());
        Pointer { text, tokens }
    }

    /// The value `self` points at in `doc`, if there is one.
    pub fn get<'v>(&self, doc: &'v Value) -> Option<&'v Value> {
        self.tokens.iter().try_fold(doc, |v, token| match v {
            Value::Object(map) => map.get(token.as_str()),
            Value::Array(items) => items.get(index(token)?),
            _ => None,
        })
    }

    /// The pointer as written (escaped).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A token with `~1` and `~0` decoded, or `None` for another `~`.
fn unescape(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// `name` as a pointer token: `~` as `~0`, `/` as `~1`.
pub fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// An array index token: decimal digits, no leading zero (RFC 6901, section 4).
fn index(token: &str) -> Option<usize> {
    let digits = token.bytes().all(|b| b.is_ascii_digit());
    if token.is_empty() || !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at<'v>(p: &str, doc: &'v Value) -> Option<&'v Value> {
        Pointer::parse(p).expect(p).get(doc)
    }

    #[test]
    fn the_examples_of_rfc_6901_resolve() {
        // RFC 6901, section 5.
        let doc = json!({
            "foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4,
            "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8
        });
        assert_eq!(at("/foo", &doc), Some(&json!(["bar", "baz"])));
        assert_eq!(at("/foo/0", &doc), Some(&json!("bar")));
        let cases = [
            ("/", 0),
            ("/a~1b", 1),
            ("/c%d", 2),
            ("/e^f", 3),
            ("/g|h", 4),
            ("/i\\j", 5),
            ("/k\"l", 6),
            ("/ ", 7),
            ("/m~0n", 8),
        ];
        for (p, want) in cases {
            assert_eq!(at(p, &doc), Some(&json!(want)), "{p}");
        }
    }

    #[test]
    fn escapes_decode_tilde_one_before_tilde_zero() {
        let doc = json!({"~1": "tilde-one", "/": "slash", "~": "tilde"});
        assert_eq!(at("/~01", &doc), Some(&json!("tilde-one")));
        assert_eq!(at("/~1", &doc), Some(&json!("slash")));
        assert_eq!(at("/~0", &doc), Some(&json!("tilde")));
        let p = Pointer::parse("/query/match").unwrap().child("a/b~c");
        assert_eq!(p.as_str(), "/query/match/a~1b~0c");
        let doc = json!({"query": {"match": {"a/b~c": "x"}}});
        assert_eq!(p.get(&doc), Some(&json!("x")));
    }

    #[test]
    fn arrays_take_plain_decimal_indexes_only() {
        let doc = json!({"a": ["x", "y", {"b": "z"}]});
        assert_eq!(at("/a/1", &doc), Some(&json!("y")));
        assert_eq!(at("/a/2/b", &doc), Some(&json!("z")));
        for missing in [
            "/a/3", "/a/-", "/a/01", "/a/+1", "/a/", "/a/1e0", "/a/b", "/a/0/x",
        ] {
            assert_eq!(at(missing, &doc), None, "{missing}");
        }
    }

    #[test]
    fn non_containers_and_absent_members_point_at_nothing() {
        let doc = json!({"n": 5, "s": "t", "o": {}});
        assert_eq!(at("/n/x", &doc), None);
        assert_eq!(at("/s/0", &doc), None);
        assert_eq!(at("/o/x", &doc), None);
        assert_eq!(at("/nope", &doc), None);
        // Non-string values are found; the caller decides they are not a query.
        assert_eq!(at("/n", &doc), Some(&json!(5)));
    }

    #[test]
    fn bad_pointer_syntax_is_refused() {
        assert_eq!(Pointer::parse(""), Err(PointerError::Whole));
        assert!(matches!(
            Pointer::parse("query/x"),
            Err(PointerError::NoSlash(_))
        ));
        for bad in ["/a~", "/a~2", "/~x/b", "/ok/~"] {
            assert!(
                matches!(Pointer::parse(bad), Err(PointerError::BadEscape(_))),
                "{bad}"
            );
        }
        let err = Pointer::parse("/a~2").unwrap_err().to_string();
        assert!(err.contains("~0") && err.contains("/a~2"), "{err}");
    }
}
