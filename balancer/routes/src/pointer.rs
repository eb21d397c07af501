//! JSON Pointers (RFC 6901): where an explicit route finds the query text in a JSON body.
//! The text is checked once when the config loads (it must name a field inside the body,
//! start with `/` and escape `~` as `~0`, `/` as `~1`); the lookup is `serde_json`'s own
//! [`Value::pointer`], which unescapes the same way.

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

/// A checked JSON pointer, as written (escaped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer(String);

impl Pointer {
    /// Checks `text` (RFC 6901, section 3), refusing the whole-document pointer.
    pub fn parse(text: &str) -> Result<Pointer, PointerError> {
        if text.is_empty() {
            return Err(PointerError::Whole);
        }
        if !text.starts_with('/') {
            return Err(PointerError::NoSlash(text.to_owned()));
        }
        let mut escapes = text.split('~').skip(1);
        if escapes.any(|after| !after.starts_with(['0', '1'])) {
            return Err(PointerError::BadEscape(text.to_owned()));
        }
        Ok(Pointer(text.to_owned()))
    }

    /// The pointer to member `name` of the object at `self` (the name escaped).
    pub fn child(&self, name: &str) -> Pointer {
        Pointer(format!(
            "{}/{}",
            self.0,
            name.replace('~', "~0").replace('/', "~1")
        ))
    }

    /// The value `self` points at in `doc`, if there is one.
    pub fn get<'v>(&self, doc: &'v Value) -> Option<&'v Value> {
        doc.pointer(&self.0)
    }

    /// The pointer as written (escaped).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
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
