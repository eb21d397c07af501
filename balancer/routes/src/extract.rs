//! Reading the query text of a routed request, and every way that can fail
//! ([`Unreadable`], each with its metric kind and its status when refused).
//!
//! A URL parameter is decoded by [`data::query`], the replica's own decoder, with the same
//! strictness (a bad `%` escape or bytes that are not UTF-8 are errors, never replaced) and
//! the same messages: for ballot's `q` a refusal reads exactly as it always has. A form
//! field is decoded the same way from an `application/x-www-form-urlencoded` body (the URL
//! standard's format, the query string's own). A JSON field is found by its RFC 6901
//! pointer ([`super::pointer`]); an object there with a string `query` member counts as
//! that string, since Elasticsearch's `match`, `match_phrase` and `query_string` take
//! either form. The text is then tokenized by the routing path like any query: field names
//! and operators of an engine's query syntax (`title:`, `AND`) are terms too.

use std::borrow::Cow;
use std::fmt;

use data::query::{params, QueryError};
use http::StatusCode;
use serde_json::Value;

use super::{Route, Source};
use crate::sink::TextSink;

/// What a route reads of a request.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The URL's query string (after `?`).
    pub query: Option<&'a str>,
    /// The `Content-Type` value.
    pub content_type: Option<&'a [u8]>,
    /// The whole body (empty when there is none).
    pub body: &'a [u8],
}

/// A query field, as errors name it: ``query parameter `q` ``, ``form field `q` ``,
/// ``JSON field `/query/match/title` ``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// `query parameter`, `form field` or `JSON field`.
    pub place: &'static str,
    /// Its name (a JSON field's pointer).
    pub name: String,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.place, self.name)
    }
}

/// Why a request got no query to route by.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// No route takes the request's method and path.
    #[error("no such path")]
    NoRoute,
    /// The field is not there.
    #[error("missing {0}")]
    Missing(Field),
    /// The field is empty or blank.
    #[error("{0} is empty")]
    Empty(Field),
    /// The field is longer than `max_query_bytes`.
    #[error("{0} is longer than {1} bytes")]
    TooLong(Field, usize),
    /// A `%` not followed by two hex digits (in the `query string` or the `form body`).
    #[error("invalid percent-encoding in the {0}")]
    Percent(&'static str),
    /// The decoded field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    Utf8(Field),
    /// The JSON value there is not a string (nor an object with a string `query`).
    #[error("{0} is not a string")]
    NotAString(Field),
    /// The body does not parse as JSON.
    #[error("the request body is not JSON: {0}")]
    BadJson(String),
    /// The body is not a form (its bytes are not text).
    #[error("the request body is not a form: {0}")]
    BadForm(&'static str),
    /// A form route's body without the form content type.
    #[error("the request body must be application/x-www-form-urlencoded on this route")]
    ContentType,
    /// The body is larger than `max_body_bytes`.
    #[error("the request body is larger than {0} bytes")]
    BodyTooLarge(u64),
    /// The client's body broke off or broke HTTP.
    #[error("cannot read the request body: {0}")]
    Body(String),
    /// The body had not arrived by the request's deadline.
    #[error("the request body did not arrive within the request's deadline")]
    BodyTimeout,
    /// The body's `Content-Encoding` is not one the balancer decodes.
    #[error("the request body's content coding {0:?} is not gzip or deflate")]
    Coding(String),
    /// The body's content coding does not decode.
    #[error("the request body does not decode: {0}")]
    Corrupt(String),
    /// The query DSL or request body was read, and no clause of it carries text.
    #[error("no clause of the {0} carries query text")]
    NoText(&'static str),
}

impl Unreadable {
    /// The `kind` label of `ballot_client_errors_total`. The kinds of a bad field keep the
    /// names ballot's `q` always had (`missing_q`, ...), whatever the route's field.
    pub fn kind(&self) -> &'static str {
        match self {
            Unreadable::NoRoute => "no_route",
            Unreadable::Missing(_) => QueryError::Missing.kind(),
            Unreadable::Empty(_) => QueryError::Empty.kind(),
            Unreadable::TooLong(..) => QueryError::TooLong(0).kind(),
            Unreadable::Percent(_) => QueryError::Percent.kind(),
            Unreadable::Utf8(_) => QueryError::Utf8.kind(),
            Unreadable::NotAString(_) => "not_a_string",
            Unreadable::BadJson(_) => "bad_json",
            Unreadable::BadForm(_) => "bad_form",
            Unreadable::ContentType => "bad_content_type",
            Unreadable::BodyTooLarge(_) => "body_too_large",
            Unreadable::Body(_) => "bad_body",
            Unreadable::BodyTimeout => "body_timeout",
            Unreadable::Coding(_) => "unsupported_coding",
            Unreadable::Corrupt(_) => "bad_coding",
            Unreadable::NoText(_) => "no_text",
        }
    }

    /// The status of its refusal (a request that matches no route gets 405 instead when
    /// a route takes its path with another method).
    pub fn status(&self) -> StatusCode {
        match self {
            Unreadable::NoRoute => StatusCode::NOT_FOUND,
            Unreadable::BodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Unreadable::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Unreadable::Coding(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// Whether it is about the body's bytes (then a fallback policy cannot forward the
    /// request either: the balancer does not hold the body, or it is too large).
    pub fn is_body(&self) -> bool {
        matches!(
            self,
            Unreadable::BodyTooLarge(_) | Unreadable::Body(_) | Unreadable::BodyTimeout
        )
    }

    /// The error of reading an engine's request body (`what`: the query DSL, ...).
    fn dsl(e: crate::es_dsl::DslError) -> Unreadable {
        Unreadable::BadJson(e.to_string())
    }
}

/// `e` of a decoded value of `field`, found in the `query string` or the `form body`.
fn decoding(e: QueryError, field: Field, place: &'static str) -> Unreadable {
    match e {
        QueryError::Missing => Unreadable::Missing(field),
        QueryError::Empty => Unreadable::Empty(field),
        QueryError::TooLong(n) => Unreadable::TooLong(field, n),
        QueryError::Percent => Unreadable::Percent(place),
        QueryError::Utf8 => Unreadable::Utf8(field),
    }
}

/// The decoded value of the first pair named `name` in `encoded` (`None`: no such pair);
/// blank is an error.
fn form_value<'a>(
    encoded: &'a str,
    name: &str,
    field: impl Fn() -> Field,
    place: &'static str,
    limit: usize,
) -> Option<Result<Cow<'a, str>, Unreadable>> {
    let p = params(encoded).find(|p| p.key == name)?;
    Some(match p.value(limit) {
        Ok(text) if text.trim().is_empty() => Err(Unreadable::Empty(field())),
        Ok(text) => Ok(text),
        Err(e) => Err(decoding(e, field(), place)),
    })
}

/// Whether `content_type` is `application/x-www-form-urlencoded` (parameters allowed).
fn is_form(content_type: Option<&[u8]>) -> bool {
    let Some(ct) = content_type else { return false };
    let media = ct.split(|&b| b == b';').next().unwrap_or_default();
    media
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/x-www-form-urlencoded")
}

/// The query parameter `name` of `req`.
fn param<'a>(req: &Request<'a>, name: &str, limit: usize) -> Result<Cow<'a, str>, Unreadable> {
    let field = || Field {
        place: "query parameter",
        name: name.to_owned(),
    };
    req.query
        .and_then(|qs| form_value(qs, name, field, "query string", limit))
        .unwrap_or_else(|| Err(Unreadable::Missing(field())))
}

/// The form field `name` of `req`: in its body if it has one (which must be a form), else
/// (or when the body lacks it) in its query string.
fn form<'a>(req: &Request<'a>, name: &str, limit: usize) -> Result<Cow<'a, str>, Unreadable> {
    if req.body.is_empty() {
        return param(req, name, limit);
    }
    if !is_form(req.content_type) {
        return Err(Unreadable::ContentType);
    }
    let body = std::str::from_utf8(req.body)
        .map_err(|_| Unreadable::BadForm("its bytes are not UTF-8"))?;
    let field = || Field {
        place: "form field",
        name: name.to_owned(),
    };
    if let Some(found) = form_value(body, name, field, "form body", limit) {
        return found;
    }
    match req
        .query
        .and_then(|qs| form_value(qs, name, field, "query string", limit))
    {
        Some(found) => found,
        None => Err(Unreadable::Missing(field())),
    }
}

/// The string at `pointer` in `req`'s JSON body.
fn json<'a>(
    req: &Request<'a>,
    pointer: &super::Pointer,
    limit: usize,
) -> Result<Cow<'a, str>, Unreadable> {
    let field = || Field {
        place: "JSON field",
        name: pointer.as_str().to_owned(),
    };
    if req.body.is_empty() {
        return Err(Unreadable::BadJson("the body is empty".into()));
    }
    let doc: Value =
        serde_json::from_slice(req.body).map_err(|e| Unreadable::BadJson(e.to_string()))?;
    let at = pointer
        .get(&doc)
        .ok_or_else(|| Unreadable::Missing(field()))?;
    let value = match at {
        Value::Object(members) => members.get("query").unwrap_or(at),
        other => other,
    };
    let text = value
        .as_str()
        .ok_or_else(|| Unreadable::NotAString(field()))?;
    if text.len() > limit {
        return Err(Unreadable::TooLong(field(), limit));
    }
    if text.trim().is_empty() {
        return Err(Unreadable::Empty(field()));
    }
    Ok(Cow::Owned(text.to_owned()))
}

/// What an engine reader found in a sink: its text, or why there is none.
fn text_of<'a>(sink: TextSink, what: &'static str) -> Result<Cow<'a, str>, Unreadable> {
    if sink.clauses() == 0 {
        return Err(Unreadable::NoText(what));
    }
    Ok(Cow::Owned(sink.into_text()))
}

/// An Elasticsearch or OpenSearch search (`_search`, `_count`; `_msearch` when `ndjson`):
/// URI search's `q` parameter when there is one (the clients send it by `GET` or by a
/// `POST` with no body), else the text clauses of the query DSL in the body.
fn elasticsearch<'a>(
    req: &Request<'a>,
    ndjson: bool,
    limit: usize,
) -> Result<Cow<'a, str>, Unreadable> {
    let uri = || Field {
        place: "query parameter",
        name: "q".to_owned(),
    };
    if let Some(found) = req
        .query
        .and_then(|qs| form_value(qs, "q", uri, "query string", limit))
    {
        return found;
    }
    if req.body.is_empty() {
        return Err(Unreadable::Missing(Field {
            place: "URI search parameter or query DSL body",
            name: "q".to_owned(),
        }));
    }
    let mut sink = TextSink::new(limit);
    if ndjson {
        crate::es_dsl::msearch(req.body, &mut sink).map_err(Unreadable::dsl)?;
        return text_of(sink, "searches");
    }
    let doc: Value =
        serde_json::from_slice(req.body).map_err(|e| Unreadable::BadJson(e.to_string()))?;
    crate::es_dsl::search_body(&doc, &mut sink).map_err(Unreadable::dsl)?;
    text_of(sink, "query DSL")
}

/// A Solr search: the JSON Request API's body (`{"query": ..., "params": {...}}`) when the
/// body is JSON, else the parameters of a form body and of the URL (`q`, else `q.alt`, or
/// a `json` parameter holding a request body), the body's first.
fn solr<'a>(req: &Request<'a>, limit: usize) -> Result<Cow<'a, str>, Unreadable> {
    let mut sink = TextSink::new(limit);
    let json_body = !req.body.is_empty()
        && (req.body.trim_ascii_start().first() == Some(&b'{') || is_json(req.content_type));
    if json_body {
        let doc: Value =
            serde_json::from_slice(req.body).map_err(|e| Unreadable::BadJson(e.to_string()))?;
        crate::solr_json::request_body(&doc, &mut sink).map_err(Unreadable::dsl)?;
        return text_of(sink, "JSON request");
    }
    let body = if req.body.is_empty() {
        ""
    } else if is_form(req.content_type) {
        std::str::from_utf8(req.body).map_err(|_| Unreadable::BadForm("its bytes are not UTF-8"))?
    } else {
        return Err(Unreadable::ContentType);
    };
    let get = |name: &str| {
        [body, req.query.unwrap_or("")]
            .into_iter()
            .find_map(|encoded| params(encoded).find(|p| p.key == name)?.value(limit).ok())
            .map(Cow::into_owned)
    };
    crate::solr_json::params_text(&get, &mut sink).map_err(Unreadable::dsl)?;
    if sink.clauses() == 0 {
        return Err(Unreadable::Missing(Field {
            place: "parameter or form field",
            name: "q".to_owned(),
        }));
    }
    Ok(Cow::Owned(sink.into_text()))
}

/// Whether `content_type` is a JSON media type (`application/json`, and the vendor types
/// such as Elasticsearch's `application/vnd.elasticsearch+json`).
fn is_json(content_type: Option<&[u8]>) -> bool {
    let Some(ct) = content_type else { return false };
    let media = ct
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    media.eq_ignore_ascii_case(b"application/json")
        || media.to_ascii_lowercase().ends_with(b"+json")
}

/// `body` with the content codings of `encoding` (its `Content-Encoding`) undone, at most
/// `limit` decoded bytes: past it the request is refused as too large, whatever reads it,
/// and decoding stops there (a small body that would expand past the limit costs no more
/// than the limit).
pub fn decoded<'a>(
    body: &'a [u8],
    encoding: Option<&[u8]>,
    limit: usize,
) -> Result<Cow<'a, [u8]>, Unreadable> {
    use crate::encoding::{decode, parse, DecodeError};
    let Some(value) = encoding.filter(|_| !body.is_empty()) else {
        return Ok(Cow::Borrowed(body));
    };
    let codings = parse(value).map_err(|e| match e {
        DecodeError::Unsupported(c) => Unreadable::Coding(c),
        other => Unreadable::Corrupt(other.to_string()),
    })?;
    if codings.is_empty() {
        return Ok(Cow::Borrowed(body));
    }
    decode(body, &codings, limit)
        .map(Cow::Owned)
        .map_err(|e| match e {
            DecodeError::TooLarge(_) => Unreadable::BodyTooLarge(limit as u64),
            DecodeError::Unsupported(c) => Unreadable::Coding(c),
            DecodeError::Corrupt(why) => Unreadable::Corrupt(why),
        })
}

/// The query text `route` reads in `req`, at most `limit` bytes.
pub fn extract<'a>(
    route: &Route,
    req: &Request<'a>,
    limit: usize,
) -> Result<Cow<'a, str>, Unreadable> {
    match &route.source {
        Source::Param(name) => param(req, name, limit),
        Source::Form(name) => form(req, name, limit),
        Source::Json(pointer) => json(req, pointer, limit),
        Source::Elasticsearch => elasticsearch(req, false, limit),
        Source::ElasticsearchNdjson => elasticsearch(req, true, limit),
        Source::Solr => solr(req, limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pointer, Preset, Routes};
    use data::query::extract_q;

    const FORM: &[u8] = b"application/x-www-form-urlencoded";

    fn req<'a>(query: Option<&'a str>, ct: Option<&'a [u8]>, body: &'a [u8]) -> Request<'a> {
        Request {
            query,
            content_type: ct,
            body,
        }
    }

    fn route(source: Source) -> Route {
        Route {
            methods: super::super::GET | super::super::POST,
            path: super::super::PathMatch::Exact("/x".into()),
            source,
        }
    }

    fn json_route(p: &str) -> Route {
        route(Source::Json(Pointer::parse(p).unwrap()))
    }

    #[test]
    fn the_ballot_q_reads_and_fails_as_extract_q_does() {
        let ballot = Routes::default();
        let r = ballot.get(0);
        for qs in [
            None,
            Some(""),
            Some("q=a+b%20c"),
            Some("k=1&q=caf%C3%A9&q=x"),
            Some("x=1"),
            Some("q="),
            Some("q=+++"),
            Some("q=%zz"),
            Some("q=%FF%FE"),
            Some("q=abcde"),
            Some("q=a&q=%zz"),
        ] {
            let ours = extract(r, &req(qs, None, b""), 4);
            let theirs = extract_q(qs, 4);
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{qs:?}"),
                (Err(a), Err(b)) => {
                    assert_eq!(a.to_string(), b.to_string(), "{qs:?}");
                    assert_eq!(a.kind(), b.kind(), "{qs:?}");
                }
                _ => panic!("{qs:?}: {ours:?} vs {theirs:?}"),
            }
        }
        // Nothing escaped: the text borrows from the URL.
        let got = extract(r, &req(Some("q=plain"), None, b""), 100).unwrap();
        assert!(matches!(got, Cow::Borrowed("plain")));
    }

    #[test]
    fn other_parameters_are_named_in_their_errors() {
        let r = route(Source::Param("query".into()));
        let e = extract(&r, &req(Some("q=x"), None, b""), 10).unwrap_err();
        assert_eq!(e.to_string(), "missing query parameter `query`");
        assert_eq!(e.kind(), "missing_q");
        assert_eq!(
            extract(&r, &req(Some("query=x%20y&nhits=3"), None, b""), 10).unwrap(),
            "x y"
        );
    }

    #[test]
    fn form_fields_come_from_the_body_then_the_query_string() {
        let r = route(Source::Form("q".into()));
        let ok = |qs, ct, body: &[u8]| extract(&r, &req(qs, ct, body), 64).map(|c| c.into_owned());
        assert_eq!(ok(Some("q=solr+get"), None, b"").unwrap(), "solr get");
        assert_eq!(
            ok(Some("wt=json"), Some(FORM), b"rows=3&q=alpha%20beta").unwrap(),
            "alpha beta"
        );
        let charset = b"Application/X-WWW-Form-Urlencoded; charset=UTF-8";
        assert_eq!(ok(None, Some(charset), b"q=x").unwrap(), "x");
        // Solr merges the URL's parameters with the body's.
        assert_eq!(
            ok(Some("q=in+url"), Some(FORM), b"rows=3").unwrap(),
            "in url"
        );
        assert_eq!(
            ok(Some("q=url"), None, b"").unwrap(),
            "url",
            "no body: the URL"
        );
        let err = |qs, ct, body: &[u8]| extract(&r, &req(qs, ct, body), 64).unwrap_err();
        let e = err(None, Some(b"application/json"), b"{\"q\":1}");
        assert_eq!(
            (e.kind(), e.status()),
            ("bad_content_type", StatusCode::BAD_REQUEST)
        );
        assert_eq!(err(None, None, b"q=x").kind(), "bad_content_type");
        let e = err(None, Some(FORM), b"rows=3");
        assert_eq!(e.to_string(), "missing form field `q`");
        assert_eq!(
            err(None, Some(FORM), b"q=%zz").to_string(),
            "invalid percent-encoding in the form body"
        );
        assert_eq!(err(None, Some(FORM), b"q=%FF").kind(), "bad_utf8");
        assert_eq!(err(None, Some(FORM), b"q=\xff").kind(), "bad_form");
        assert_eq!(err(None, Some(FORM), b"q=++").kind(), "empty_q");
        let long = format!("q={}", "a".repeat(65));
        assert_eq!(err(None, Some(FORM), long.as_bytes()).kind(), "q_too_long");
    }

    #[test]
    fn json_fields_are_found_by_pointer_and_must_be_strings() {
        let qs = json_route("/query/query_string/query");
        let read = |r: &Route, body: &str| {
            extract(r, &req(None, None, body.as_bytes()), 32).map(|c| c.into_owned())
        };
        assert_eq!(
            read(
                &qs,
                r#"{"query":{"query_string":{"query":"beta gamma"}},"size":3}"#
            )
            .unwrap(),
            "beta gamma"
        );
        let cases = [
            (r#"{"query":{"query_string":{"query":5}}}"#, "not_a_string"),
            (
                r#"{"query":{"query_string":{"query":null}}}"#,
                "not_a_string",
            ),
            (
                r#"{"query":{"query_string":{"query":["a"]}}}"#,
                "not_a_string",
            ),
            (
                r#"{"query":{"query_string":{"fields":["a"]}}}"#,
                "missing_q",
            ),
            (r#"{"query":{"match_all":{}}}"#, "missing_q"),
            (r#"{"query":{"query_string":{"query":"  "}}}"#, "empty_q"),
            (r#"{"query":{"query_string":{"query":"#, "bad_json"),
            ("not json", "bad_json"),
            ("", "bad_json"),
            ("[1, 2]", "missing_q"),
        ];
        for (body, kind) in cases {
            let e = read(&qs, body).unwrap_err();
            assert_eq!(e.kind(), kind, "{body}: {e}");
            assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        }
        let long = format!(
            r#"{{"query":{{"query_string":{{"query":"{}"}}}}}}"#,
            "a".repeat(33)
        );
        assert_eq!(read(&qs, &long).unwrap_err().kind(), "q_too_long");
        let e = read(&qs, r#"{"query":{}}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing JSON field `/query/query_string/query`"
        );
        // Escapes and arrays in the pointer.
        let odd = json_route("/a~1b/0/m~0n");
        assert_eq!(
            read(&odd, r#"{"a/b":[{"m~n":"odd one"}]}"#).unwrap(),
            "odd one"
        );
        assert_eq!(
            read(&odd, r#"{"a/b":{"0":{"m~n":"keyed"}}}"#).unwrap(),
            "keyed"
        );
        assert_eq!(read(&odd, r#"{"a/b":[]}"#).unwrap_err().kind(), "missing_q");
    }

    #[test]
    fn a_match_field_takes_a_string_or_an_object_with_a_query() {
        let source = Preset::ElasticsearchMatch.routes(Some("title")).unwrap()[0]
            .source
            .clone();
        let r = route(source);
        let read =
            |body: &str| extract(&r, &req(None, None, body.as_bytes()), 64).map(|c| c.into_owned());
        assert_eq!(
            read(r#"{"query":{"match":{"title":"red fox"}}}"#).unwrap(),
            "red fox"
        );
        assert_eq!(
            read(r#"{"query":{"match":{"title":{"query":"quick fox","operator":"and"}}}}"#)
                .unwrap(),
            "quick fox"
        );
        assert_eq!(
            read(r#"{"query":{"match":{"title":{"operator":"and"}}}}"#)
                .unwrap_err()
                .kind(),
            "not_a_string"
        );
        assert_eq!(
            read(r#"{"query":{"match":{"title":{"query":7}}}}"#)
                .unwrap_err()
                .kind(),
            "not_a_string"
        );
        assert_eq!(
            read(r#"{"query":{"match":{"body":"x"}}}"#)
                .unwrap_err()
                .kind(),
            "missing_q"
        );
    }

    #[test]
    fn refusals_have_their_status() {
        assert_eq!(Unreadable::NoRoute.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            Unreadable::BodyTooLarge(9).status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            Unreadable::BodyTimeout.status(),
            StatusCode::REQUEST_TIMEOUT
        );
        assert!(Unreadable::BodyTooLarge(9).is_body() && !Unreadable::NoRoute.is_body());
        assert_eq!(Unreadable::NoRoute.to_string(), "no such path");
    }

    /// The query text the preset `name` reads from a `method` request to `path`: the first
    /// of its matching routes that reads one, as the balancer tries them.
    fn by_preset(
        name: &str,
        method: &str,
        target: &str,
        ct: Option<&str>,
        body: &[u8],
    ) -> Result<String, Unreadable> {
        let routes = Routes::compile(&[crate::RouteConfig {
            preset: Some(name.into()),
            ..Default::default()
        }])
        .unwrap();
        let (path, query) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        let method: http::Method = method.parse().unwrap();
        let read = req(query, ct.map(str::as_bytes), body);
        let mut first = None;
        for i in routes.matching(&method, path).iter() {
            match extract(routes.get(i), &read, 4096) {
                Ok(q) => return Ok(q.into_owned()),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or(Unreadable::NoRoute))
    }

    #[test]
    fn elasticsearch_reads_uri_searches_and_the_query_dsl() {
        const VND: Option<&str> = Some("application/vnd.elasticsearch+json; compatible-with=9");
        let es =
            |m: &str, t: &str, body: &str| by_preset("elasticsearch", m, t, VND, body.as_bytes());
        // URI search by GET, and by a POST with no body (the Python clients' form).
        assert_eq!(
            es("GET", "/books/_search?q=red%20fox", "").unwrap(),
            "red fox"
        );
        assert_eq!(
            es("POST", "/books/_search?q=red+fox", "").unwrap(),
            "red fox"
        );
        let body = r#"{"query":{"bool":{"must":[{"match":{"title":"red"}}],"filter":{"term":{"tag":"fox"}}}},"size":3}"#;
        assert_eq!(es("POST", "/books/_search", body).unwrap(), "red fox");
        assert_eq!(
            es(
                "POST",
                "/_count",
                r#"{"query":{"match_phrase":{"t":"quick dog"}}}"#
            )
            .unwrap(),
            "quick dog"
        );
        let ndjson = "{\"index\":\"books\"}\n{\"query\":{\"match\":{\"t\":\"red\"}}}\n{}\n{\"query\":{\"match\":{\"t\":\"fox\"}}}\n";
        assert_eq!(es("POST", "/_msearch", ndjson).unwrap(), "red fox");
        assert_eq!(
            es("GET", "/books/_search", "").unwrap_err().kind(),
            "missing_q"
        );
        assert_eq!(
            es("POST", "/b/_search", r#"{"query":{"match_all":{}}}"#)
                .unwrap_err()
                .kind(),
            "no_text"
        );
        assert_eq!(
            es("POST", "/b/_search", "{").unwrap_err().kind(),
            "bad_json"
        );
        // A template's text is in its stored script: no route of the preset takes it.
        assert_eq!(
            es("POST", "/b/_search/template", "{}").unwrap_err(),
            Unreadable::NoRoute
        );
        assert_eq!(
            by_preset("opensearch", "GET", "/b/_search?q=x", None, b"").unwrap(),
            "x"
        );
    }

    #[test]
    fn solr_reads_params_forms_and_json_requests_on_every_handler_path() {
        let solr = |m: &str, t: &str, ct: Option<&str>, body: &str| {
            by_preset("solr", m, t, ct, body.as_bytes())
        };
        for path in [
            "/solr/books/select",
            "/solr/books/select/",
            "/solr/books/query",
            "/solr/books/query/",
        ] {
            let target = format!("{path}?q=red+fox&wt=json");
            assert_eq!(solr("GET", &target, None, "").unwrap(), "red fox", "{path}");
        }
        assert_eq!(
            solr(
                "GET",
                "/solr/b/select?defType=edismax&q.alt=title:fox",
                None,
                ""
            )
            .unwrap(),
            "title:fox"
        );
        let form = Some("application/x-www-form-urlencoded; charset=utf-8");
        assert_eq!(
            solr("POST", "/solr/b/select/", form, "q=long+query&wt=json").unwrap(),
            "long query"
        );
        let json = Some("application/json");
        assert_eq!(
            solr(
                "POST",
                "/solr/b/query",
                json,
                r#"{"query":"red fox","params":{"defType":"edismax"}}"#
            )
            .unwrap(),
            "red fox"
        );
        assert_eq!(
            solr(
                "POST",
                "/solr/b/query",
                json,
                r#"{"query":{"edismax":{"query":"red fox","qf":"title"}}}"#
            )
            .unwrap(),
            "red fox"
        );
        assert_eq!(
            solr("POST", "/solr/b/query", json, r#"{"params":{"q":"fox"}}"#).unwrap(),
            "fox"
        );
        assert_eq!(
            solr("POST", "/solr/b/select", Some("text/plain"), "alpha")
                .unwrap_err()
                .kind(),
            "bad_content_type"
        );
        assert_eq!(
            solr("GET", "/solr/b/select?rows=1", None, "")
                .unwrap_err()
                .kind(),
            "missing_q"
        );
    }

    #[test]
    fn compressed_bodies_are_read_decoded_and_a_bomb_stops_at_the_limit() {
        use std::io::Write;
        let gzip = |data: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        let body = gzip(br#"{"query":{"match":{"title":"red fox"}}}"#);
        let plain = decoded(&body, Some(b"gzip"), 1024).unwrap();
        assert_eq!(&plain[..], br#"{"query":{"match":{"title":"red fox"}}}"#);
        assert!(matches!(decoded(b"x", None, 1024), Ok(Cow::Borrowed(b"x"))));
        assert!(matches!(
            decoded(b"x", Some(b"identity"), 1024),
            Ok(Cow::Borrowed(_))
        ));
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100 << 10, "{} bytes", bomb.len());
        let e = decoded(&bomb, Some(b"gzip"), 64 << 10).unwrap_err();
        assert_eq!(
            (e.kind(), e.status()),
            ("body_too_large", StatusCode::PAYLOAD_TOO_LARGE)
        );
        let e = decoded(b"abc", Some(b"br"), 1024).unwrap_err();
        assert_eq!(
            (e.kind(), e.status()),
            ("unsupported_coding", StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            decoded(b"not gzip", Some(b"gzip"), 1024)
                .unwrap_err()
                .kind(),
            "bad_coding"
        );
    }
}
