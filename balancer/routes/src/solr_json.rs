//! The query text of a Solr search, read as the Solr Reference Guide defines it: the JSON
//! Request API (a JSON body, or the same JSON in a `json` request parameter) and its JSON
//! Query DSL, and the plain `q` / `q.alt` request parameters of the standard and (e)dismax
//! query parsers.
//!
//! A JSON query is one of (JSON Query DSL, "Query DSL Structure"):
//! - a string, a query in the default parser's syntax or a local-params string
//!   (`{!dismax qf=title}solr`): kept as written, like the engine's own query log; the
//!   tokenizer drops the punctuation, and field names and local-params keys become terms;
//! - an object with exactly one key, the parser's name, whose value is an object of its
//!   parameters, with the query text under `query` (`{"lucene": {"df": "title",
//!   "query": "solr"}}`, likewise `edismax`, `dismax`, `field`, `term`, `prefix`, `boost`).
//!   `bool` also takes `must`, `should`, `filter`, `must_not`, each a query or a list of
//!   them. Any other parameter whose value is an object (or a list of objects) is a nested
//!   query and is read too; other string parameters (`df`, `qf`, `b`, ...) are settings;
//! - a tagged query `{"#tag": query}`, read as its query (tags only name it);
//! - a reference `{"param": "name"}` to the body's `queries` section, read as the query
//!   (or list of queries) found there.
//!
//! There is no `{"FIELD": "text"}` short form: Solr reads a one-key object as a parser name
//! and refuses a parser whose value is not an object, so such a query contributes nothing
//! here, as would an unknown parser's missing `query`. Parsers whose `query` is not text
//! (`frange`, `func`, `geofilt`, `bbox`, `knn`, ...) contribute nothing either.
//!
//! Filters (`filter`, a query or list of queries) count like the main query: the engine
//! reads their terms' postings too. Query objects nested more than
//! [`crate::es_dsl::MAX_DEPTH`] deep (a `queries` reference cycle among them) are refused.

use serde_json::{Map, Value};

use crate::es_dsl::{DslError, MAX_DEPTH};
use crate::sink::TextSink;

/// Query parsers whose `query` parameter is a function, a range or a vector, not text.
const NOT_TEXT: &[&str] = &[
    "frange",
    "func",
    "geofilt",
    "bbox",
    "knn",
    "knn_text_to_vector",
    "vectorSimilarity",
];

/// The query text of a Solr JSON Request API body: `{"query": ..., "filter": ..., "params": {"q": ..., "q.alt": ..., "defType": ...}}`.
///
/// The main query is `query` if present and not blank, else `params.q`, else
/// `params["q.alt"]` (the text edismax searches when `q` is missing or blank); `defType`
/// picks the parser but not the text. `filter` is read in every case.
pub fn request_body(body: &Value, sink: &mut TextSink) -> Result<(), DslError> {
    main_query(body, sink)?;
    filters(body, sink)
}

/// The text Solr searches for a request whose parameters are `get(name)`: `q`, else `q.alt`; a `json` parameter holding a JSON request body is read as one.
///
/// As in Solr, request parameters override the JSON body's single values: a non-blank
/// `q` is the main query even when the `json` body has a `query`; otherwise the body's
/// main query (see [`request_body`]) is used, and `q.alt` only when neither names one.
/// The body's `filter` is read in every case. A `json` parameter that is not JSON is
/// [`DslError::NotJson`].
pub fn params_text(
    get: &dyn Fn(&str) -> Option<String>,
    sink: &mut TextSink,
) -> Result<(), DslError> {
    let json = match get("json").filter(|text| !text.trim().is_empty()) {
        Some(text) => Some(
            serde_json::from_str::<Value>(&text).map_err(|e| DslError::NotJson(e.to_string()))?,
        ),
        None => None,
    };
    let named_main = match (get("q").filter(|q| !q.trim().is_empty()), &json) {
        (Some(q), _) => {
            sink.push(&q);
            true
        }
        (None, Some(body)) => main_query(body, sink)?,
        (None, None) => false,
    };
    if !named_main {
        if let Some(alt) = get("q.alt") {
            sink.push(&alt);
        }
    }
    match &json {
        Some(body) => filters(body, sink),
        None => Ok(()),
    }
}

/// Pushes the body's main query text; whether the body names a main query at all.
fn main_query(body: &Value, sink: &mut TextSink) -> Result<bool, DslError> {
    if let Some(q) = body.get("query").filter(|q| !is_blank(q)) {
        queries(q, named(body), sink, 1)?;
        return Ok(true);
    }
    let params = body.get("params");
    for key in ["q", "q.alt"] {
        let text = params.and_then(|p| p.get(key)).and_then(Value::as_str);
        if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
            sink.push(text);
            return Ok(true);
        }
    }
    Ok(false)
}

/// Pushes the text of the body's `filter` queries.
fn filters(body: &Value, sink: &mut TextSink) -> Result<(), DslError> {
    match body.get("filter") {
        Some(filter) => queries(filter, named(body), sink, 1),
        None => Ok(()),
    }
}

/// The body's named queries (its `queries` section), which `{"param": name}` refers to.
fn named(body: &Value) -> Option<&Map<String, Value>> {
    body.get("queries").and_then(Value::as_object)
}

/// Whether a `query` value names no query: null or blank text.
fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}

/// A query or a list of queries, each at nesting `depth`.
fn queries(
    value: &Value,
    named: Option<&Map<String, Value>>,
    sink: &mut TextSink,
    depth: usize,
) -> Result<(), DslError> {
    for q in one_or_many(value) {
        single(q, named, sink, depth)?;
    }
    Ok(())
}

/// One query, a string or a query object that is the `depth`th object of its nesting; a
/// list inside a list is not a query and contributes nothing.
fn single(
    q: &Value,
    named: Option<&Map<String, Value>>,
    sink: &mut TextSink,
    depth: usize,
) -> Result<(), DslError> {
    match q {
        Value::String(text) => sink.push(text),
        Value::Object(_) if depth > MAX_DEPTH => return Err(DslError::TooDeep),
        Value::Object(object) => query_object(object, named, sink, depth)?,
        _ => {}
    }
    Ok(())
}

/// A query object: `{"parser": {...}}`, `{"#tag": query}` or `{"param": "name"}`. Solr
/// wants exactly one key; a malformed object with more is read whole.
fn query_object(
    object: &Map<String, Value>,
    named: Option<&Map<String, Value>>,
    sink: &mut TextSink,
    depth: usize,
) -> Result<(), DslError> {
    for (key, value) in object {
        if key.starts_with('#') {
            single(value, named, sink, depth + 1)?;
        } else if key == "param" {
            let target = value
                .as_str()
                .and_then(|name| named.and_then(|n| n.get(name)));
            if let Some(target) = target {
                queries(target, named, sink, depth + 1)?;
            }
        } else {
            parser(key, value, named, sink, depth)?;
        }
    }
    Ok(())
}

/// The text of parser `name` called with parameters `params`.
fn parser(
    name: &str,
    params: &Value,
    named: Option<&Map<String, Value>>,
    sink: &mut TextSink,
    depth: usize,
) -> Result<(), DslError> {
    let Some(params) = params.as_object() else {
        return Ok(());
    };
    if NOT_TEXT.contains(&name) {
        return Ok(());
    }
    for (key, value) in params {
        let is_query = key == "query"
            || (name == "bool"
                && matches!(key.as_str(), "must" | "should" | "filter" | "must_not"));
        if is_query {
            queries(value, named, sink, depth + 1)?;
            continue;
        }
        // Objects under any other parameter are nested queries (Solr turns each into a
        // sub-parser); strings there are settings.
        for nested in one_or_many(value).filter(|v| v.is_object()) {
            single(nested, named, sink, depth + 1)?;
        }
    }
    Ok(())
}

/// A value that holds one item or a list of them, as its items.
fn one_or_many(value: &Value) -> std::slice::Iter<'_, Value> {
    match value {
        Value::Array(items) => items.iter(),
        item => std::slice::from_ref(item).iter(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(body: &str) -> String {
        let body: Value = serde_json::from_str(body).expect("test body is JSON");
        let mut sink = TextSink::new(4096);
        request_body(&body, &mut sink).expect("body is readable");
        sink.into_text()
    }

    /// `params_text` over the parameters `pairs`, as a query string or form would give them.
    fn params_of(pairs: &[(&str, &str)]) -> Result<String, DslError> {
        let get = |name: &str| {
            let found = pairs.iter().find(|(key, _)| *key == name);
            found.map(|(_, value)| (*value).to_owned())
        };
        let mut sink = TextSink::new(4096);
        params_text(&get, &mut sink)?;
        Ok(sink.into_text())
    }

    #[test]
    fn query_and_filter_strings() {
        // The JSON Request API guide's first example (SolrJ JsonQueryRequest sends the same).
        assert_eq!(
            text_of(r#"{"query":"memory","filter":"inStock:true"}"#),
            "memory inStock:true"
        );
        assert_eq!(
            text_of(r#"{"query":"content:(solr lucene)","limit":5,"fields":["id","name"]}"#),
            "content:(solr lucene)"
        );
    }

    #[test]
    fn parser_objects() {
        let body = r#"{"query":{"lucene":{"df":"content","query":"solr lucene"}}}"#;
        assert_eq!(text_of(body), "solr lucene");
        let body = r#"{"query":{"edismax":{"query":"big apple","qf":"title^2 body","mm":"2"}}}"#;
        assert_eq!(text_of(body), "big apple");
        let body = r#"{"query":{"dismax":{"query":"ipod nano","qf":"name"}}}"#;
        assert_eq!(text_of(body), "ipod nano");
        let body = r#"{"query":{"field":{"f":"name","query":"iPod"}},"filter":{"term":{"f":"inStock","query":"true"}}}"#;
        assert_eq!(text_of(body), "iPod true");
    }

    #[test]
    fn nested_boost_query() {
        let body = r#"{"query":{"boost":{"query":{"lucene":{"df":"name","query":"iPod"}},"b":"log(popularity)"}}}"#;
        assert_eq!(text_of(body), "iPod");
    }

    #[test]
    fn bool_parser_clauses() {
        // The guide's nested boolean example: frange's "query" is a function, not text.
        let body = r#"{"query":{"bool":{"must":[{"lucene":{"df":"name","query":"iPod"}}],"must_not":[{"frange":{"l":"0","u":"5","query":"popularity"}}]}}}"#;
        assert_eq!(text_of(body), "iPod");
        // Its condensed form: strings are queries, kept as written.
        let body =
            r#"{"query":{"bool":{"must":["name:iPod"],"must_not":"{!frange l=0 u=5}popularity"}}}"#;
        assert_eq!(text_of(body), "name:iPod {!frange l=0 u=5}popularity");
        let body = r#"{"query":{"bool":{"must_not":"{!frange l=0 u=5}popularity"}},"filter":["name:iPod"]}"#;
        assert_eq!(text_of(body), "{!frange l=0 u=5}popularity name:iPod");
    }

    #[test]
    fn tags_and_param_references() {
        let body = r##"{"query":"*:*","filter":[{"#titleTag":"name:Solr"},{"#inStockTag":"inStock:true"}]}"##;
        assert_eq!(text_of(body), "*:* name:Solr inStock:true");
        // The guide's additional-queries example: both referenced filters are read
        // (excluding a tag changes which documents match, not which terms are read).
        let body = r##"{"queries":{"query_filters":[{"#size_tag":{"field":{"f":"size","query":"XL"}}},{"#color_tag":{"field":{"f":"color","query":"Red"}}}]},"query":{"bool":{"must":{"param":"query_filters"},"excludeTags":"color_tag"}}}"##;
        assert_eq!(text_of(body), "XL Red");
        let body = r#"{"queries":{"electronic":{"field":{"f":"cat","query":"electronics"}},"manufacturers":["manu:apple",{"field":{"f":"manu","query":"belkin"}}]},"query":{"param":"electronic"}}"#;
        assert_eq!(text_of(body), "electronics");
    }

    #[test]
    fn params_block_fallbacks() {
        let body = r#"{"params":{"q":"apache solr","defType":"edismax","qf":"title body"}}"#;
        assert_eq!(text_of(body), "apache solr");
        let body =
            r#"{"params":{"q":"  ","q.alt":"title:rust","defType":"edismax"},"filter":"lang:en"}"#;
        assert_eq!(text_of(body), "title:rust lang:en");
        // A query present wins over params.q.
        let body = r#"{"query":"from query","params":{"q":"from params"}}"#;
        assert_eq!(text_of(body), "from query");
    }

    #[test]
    fn no_short_form_and_non_text_parsers() {
        assert_eq!(text_of(r#"{"query":{"title":"text"}}"#), "");
        assert_eq!(
            text_of(r#"{"query":{"func":{"query":"log(popularity)"}}}"#),
            ""
        );
        let body = r#"{"query":{"knn":{"f":"vector","topK":10,"query":"[1.0, 2.0, 3.0, 4.0]"}}}"#;
        assert_eq!(text_of(body), "");
    }

    #[test]
    fn reference_cycles_and_deep_nesting_are_refused() {
        let body = json!({"queries": {"a": {"param": "a"}}, "query": {"param": "a"}});
        let mut sink = TextSink::new(64);
        assert_eq!(request_body(&body, &mut sink), Err(DslError::TooDeep));

        let mut q = json!("deep");
        for _ in 0..MAX_DEPTH {
            q = json!({"bool": {"must": [q]}});
        }
        let mut sink = TextSink::new(64);
        let at_cap = json!({"query": q.clone()});
        request_body(&at_cap, &mut sink).expect("64 query objects are allowed");
        assert_eq!(sink.into_text(), "deep");
        let mut sink = TextSink::new(64);
        let past_cap = json!({"query": {"bool": {"must": q}}});
        assert_eq!(request_body(&past_cap, &mut sink), Err(DslError::TooDeep));
    }

    #[test]
    fn pysolr_get_and_form_params() {
        // pysolr: solr.search("title:rust", defType="edismax", qf="title", fq="lang:en")
        // sends q, defType, qf, fq and wt=json as query parameters (a form when long).
        let params = [
            ("q", "title:rust"),
            ("defType", "edismax"),
            ("qf", "title"),
            ("fq", "lang:en"),
            ("wt", "json"),
        ];
        assert_eq!(params_of(&params), Ok("title:rust".to_owned()));
        let params = [("q", ""), ("q.alt", "*:*"), ("defType", "edismax")];
        assert_eq!(params_of(&params), Ok("*:*".to_owned()));
        assert_eq!(params_of(&[("wt", "json")]), Ok(String::new()));
    }

    #[test]
    fn json_parameter_is_a_body() {
        // curl .../query -d 'json={"query":"memory"}'
        let params = [("json", r#"{"query":"memory","filter":"inStock:true"}"#)];
        assert_eq!(params_of(&params), Ok("memory inStock:true".to_owned()));
        // A q parameter overrides the body's query; the body's filter still counts.
        let params = [
            ("q", "ipod"),
            ("json", r#"{"query":"memory","filter":"inStock:true"}"#),
        ];
        assert_eq!(params_of(&params), Ok("ipod inStock:true".to_owned()));
        // A body with no main query leaves q.alt to speak.
        let params = [
            ("json", r#"{"filter":"inStock:true"}"#),
            ("q.alt", "name:*"),
        ];
        assert_eq!(params_of(&params), Ok("name:* inStock:true".to_owned()));
        match params_of(&[("json", "{\"query\":")]) {
            Err(DslError::NotJson(_)) => {}
            other => panic!("expected NotJson, got {other:?}"),
        }
    }
}
