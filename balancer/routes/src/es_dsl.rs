//! The query text of an Elasticsearch or OpenSearch search: what the engine would look up
//! in its term dictionaries, read from the request body as the Elasticsearch query DSL
//! reference defines it (Query DSL, Elasticsearch 8/9; OpenSearch keeps the same clauses).
//!
//! Clauses read (every other one contributes nothing):
//! - full text: `match`, `match_phrase`, `match_phrase_prefix`, `match_bool_prefix`
//!   (`{"FIELD": "text"}` or `{"FIELD": {"query": "text"}}`); `multi_match`,
//!   `combined_fields`, `query_string`, `simple_query_string` (`{"query": "text"}`). Query
//!   string syntax is kept as written: the tokenizer drops its punctuation, and a field
//!   prefix such as `title:` becomes a term, as the engine's own query log would show it.
//!   `intervals` is skipped: its rules nest their own grammar of text sources.
//! - term level, string values only: `term`, `prefix`, `fuzzy`, `regexp` (`{"FIELD": "v"}`
//!   or `{"FIELD": {"value": "v"}}`), `wildcard` (also `{"wildcard": "v"}`), `terms`
//!   (`{"FIELD": ["a", "b"]}`; a terms lookup object names another document, so nothing).
//!   The `boost` and `_name` keys beside a field are parameters, not fields.
//! - compound: `bool` (`must`, `should`, `filter`, `must_not`, each one query or a list;
//!   `must_not` is read because Lucene reads an excluded term's postings too, so the
//!   replica that has them cached answers it faster), `function_score` (`query` and each
//!   function's `filter`, run against every candidate), `script_score`, `nested`,
//!   `has_child`, `has_parent` (`query`), `constant_score` (`filter`), `boosting`
//!   (`positive`, `negative`), `dis_max` (`queries`).
//! - a search body's `query`, `post_filter` and `rescore[].query.rescore_query`; `knn`,
//!   `aggs`, `sort`, `_source`, `size`, `from`, `highlight` carry no query text.
//!
//! Numbers, booleans, `range`, `exists`, `ids`, `match_all`, `match_none`, `geo_*` and
//! clause names this module does not know contribute nothing: a clause added by a future
//! engine version must not make a search unroutable. Query clauses nested more than
//! [`MAX_DEPTH`] deep are refused ([`DslError::TooDeep`]) so a hostile body cannot exhaust
//! the stack.

use std::fmt;

use serde_json::{Map, Value};

use crate::sink::TextSink;

/// Most query clauses nested one inside another that a body may have.
pub const MAX_DEPTH: usize = 64;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DslError {
    /// The text is not JSON (the parser's message).
    NotJson(String),
    /// Query clauses are nested more than [`MAX_DEPTH`] deep.
    TooDeep,
    /// Line `.0` (1-based) of an NDJSON body is not JSON (the parser's message).
    NdjsonLine(usize, String),
}

impl fmt::Display for DslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DslError::NotJson(msg) => write!(f, "the body is not JSON: {msg}"),
            DslError::TooDeep => {
                write!(f, "query clauses are nested more than {MAX_DEPTH} deep")
            }
            DslError::NdjsonLine(line, msg) => {
                write!(f, "line {line} of the NDJSON body is not JSON: {msg}")
            }
        }
    }
}

impl std::error::Error for DslError {}

/// The text of every text clause of a search (or `_count`) body `{"query": {...}, ...}`.
pub fn search_body(body: &Value, sink: &mut TextSink) -> Result<(), DslError> {
    let Some(body) = body.as_object() else {
        return Ok(());
    };
    if let Some(q) = body.get("query") {
        query_at(q, sink, 1)?;
    }
    if let Some(q) = body.get("post_filter") {
        query_at(q, sink, 1)?;
    }
    // `rescore` is one rescorer or a list of them, applied in turn to the top hits.
    for rescorer in one_or_many(body.get("rescore")) {
        let rescore_query = rescorer.get("query").and_then(|q| q.get("rescore_query"));
        if let Some(q) = rescore_query {
            query_at(q, sink, 1)?;
        }
    }
    Ok(())
}

/// The text of a query DSL object (the value of "query").
pub fn query(q: &Value, sink: &mut TextSink) -> Result<(), DslError> {
    query_at(q, sink, 1)
}

/// `_msearch`: NDJSON of header line + body line pairs; the union of the searches' texts.
///
/// Union, not one text per search: the whole request goes to one replica, whose caches
/// then serve every search in it, so its text is what the request as a whole will read;
/// routing each search on its own would need a fan-out and a merged answer.
///
/// Every line is read as a search body: a header (`{"index": "books"}`) has no query keys
/// and contributes nothing, so no header/body pairing is needed, which also accepts the
/// empty header line older versions allowed. Blank lines are skipped, a `\r` before the
/// `\n` is ignored, and a line that is not JSON is `NdjsonLine(line_number_1_based, msg)`.
pub fn msearch(body: &[u8], sink: &mut TextSink) -> Result<(), DslError> {
    for (index, line) in body.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let search: Value = serde_json::from_slice(line)
            .map_err(|e| DslError::NdjsonLine(index + 1, e.to_string()))?;
        search_body(&search, sink)?;
    }
    Ok(())
}

/// The text of the query object `q`, itself nested `depth` clauses deep.
fn query_at(q: &Value, sink: &mut TextSink, depth: usize) -> Result<(), DslError> {
    if depth > MAX_DEPTH {
        return Err(DslError::TooDeep);
    }
    // A query object has one key, the clause name; a malformed one with more is read
    // whole (the engine refuses it anyway, so its text does not matter).
    let Some(clauses) = q.as_object() else {
        return Ok(());
    };
    for (name, params) in clauses {
        clause(name, params, sink, depth)?;
    }
    Ok(())
}

/// The text of clause `name` whose parameters are `params`.
fn clause(name: &str, params: &Value, sink: &mut TextSink, depth: usize) -> Result<(), DslError> {
    match name {
        "match" | "match_phrase" | "match_phrase_prefix" | "match_bool_prefix" => {
            per_field(params, &["query"], sink);
        }
        "multi_match" | "combined_fields" | "query_string" | "simple_query_string" => {
            push_str(params.get("query"), sink);
        }
        "term" | "prefix" | "fuzzy" | "regexp" => per_field(params, &["value"], sink),
        "wildcard" => per_field(params, &["value", "wildcard"], sink),
        "terms" => terms(params, sink),
        _ => compound(name, params, sink, depth)?,
    }
    Ok(())
}

/// The text of the compound clause `name` (its sub-queries), or nothing if unknown.
fn compound(name: &str, params: &Value, sink: &mut TextSink, depth: usize) -> Result<(), DslError> {
    let keys: &[&str] = match name {
        "bool" => &["must", "should", "filter", "must_not"],
        "script_score" | "nested" | "has_child" | "has_parent" => &["query"],
        "constant_score" => &["filter"],
        "boosting" => &["positive", "negative"],
        "dis_max" => &["queries"],
        "function_score" => return function_score(params, sink, depth),
        _ => return Ok(()),
    };
    for key in keys {
        for q in one_or_many(params.get(*key)) {
            query_at(q, sink, depth + 1)?;
        }
    }
    Ok(())
}

/// `function_score`: its `query`, and the `filter` of each function, which the engine
/// runs against every candidate document.
fn function_score(params: &Value, sink: &mut TextSink, depth: usize) -> Result<(), DslError> {
    if let Some(q) = params.get("query") {
        query_at(q, sink, depth + 1)?;
    }
    for function in one_or_many(params.get("functions")) {
        if let Some(q) = function.get("filter") {
            query_at(q, sink, depth + 1)?;
        }
    }
    Ok(())
}

/// A field-keyed clause `{"FIELD": "text"}` or `{"FIELD": {"<key>": "text", ...}}`, the
/// text under the first of `keys` present.
fn per_field(params: &Value, keys: &[&str], sink: &mut TextSink) {
    for (_, value) in fields(params) {
        match value {
            Value::String(text) => sink.push(text),
            Value::Object(options) => {
                let text = keys.iter().find_map(|k| options.get(*k));
                push_str(text, sink);
            }
            _ => {}
        }
    }
}

/// `terms`: `{"FIELD": ["a", "b", 3], "boost": 1.0}`, each string a clause of its own.
fn terms(params: &Value, sink: &mut TextSink) {
    for (_, value) in fields(params) {
        // An object here is a terms lookup (`index`, `id`, `path`): the terms live in
        // another document, so the request itself carries none.
        for term in value.as_array().into_iter().flatten() {
            push_str(Some(term), sink);
        }
    }
}

/// The `(field, value)` pairs of a field-keyed clause, without its parameters.
fn fields(params: &Value) -> impl Iterator<Item = (&String, &Value)> {
    params
        .as_object()
        .into_iter()
        .flat_map(Map::iter)
        .filter(|(key, _)| !matches!(key.as_str(), "boost" | "_name"))
}

/// `value`'s text if it is a string (numbers, booleans and the rest carry none).
fn push_str(value: Option<&Value>, sink: &mut TextSink) {
    if let Some(text) = value.and_then(Value::as_str) {
        sink.push(text);
    }
}

/// A parameter that holds one item or a list of them, as its items (none if absent).
fn one_or_many(value: Option<&Value>) -> std::slice::Iter<'_, Value> {
    match value {
        Some(Value::Array(items)) => items.iter(),
        Some(item) => std::slice::from_ref(item).iter(),
        None => [].iter(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The text of a search body given as JSON text.
    fn text_of(body: &str) -> String {
        let body: Value = serde_json::from_str(body).expect("test body is JSON");
        let mut sink = TextSink::new(4096);
        search_body(&body, &mut sink).expect("body is readable");
        sink.into_text()
    }

    #[test]
    fn python_client_match() {
        // elasticsearch-py 8: es.search(index="articles", query={"match": {"title": ...}})
        // sends the body compact (separators=(",", ":")).
        let body = r#"{"query":{"match":{"title":"rust borrow checker"}}}"#;
        assert_eq!(text_of(body), "rust borrow checker");
    }

    #[test]
    fn npm_client_match_and_long_form() {
        // @elastic/elasticsearch: client.search({ index: 'game-of-thrones',
        //   query: { match: { quote: 'winter' } } }) -> JSON.stringify of the body.
        assert_eq!(
            text_of(r#"{"query":{"match":{"quote":"winter"}}}"#),
            "winter"
        );
        let body = r#"{"query":{"match_phrase_prefix":{"message":{"query":"quick brown f","max_expansions":10}}}}"#;
        assert_eq!(text_of(body), "quick brown f");
        let body = r#"{"query":{"match_bool_prefix":{"message":"quick brown f"}}}"#;
        assert_eq!(text_of(body), "quick brown f");
    }

    #[test]
    fn bool_with_filters_must_not_and_ignored_search_keys() {
        let body = r#"{"query":{"bool":{"must":[{"multi_match":{"query":"lucene segment merge","fields":["title^2","body"]}}],"filter":[{"term":{"lang":"en"}},{"range":{"published":{"gte":"now-1y"}}}],"must_not":{"match_phrase":{"body":{"query":"deprecated api","slop":1}}},"should":[{"exists":{"field":"cover"}}],"minimum_should_match":0}},"size":10,"from":20,"sort":[{"_score":"desc"}],"_source":["title"],"highlight":{"fields":{"body":{}}},"aggs":{"langs":{"terms":{"field":"lang"}}}}"#;
        assert_eq!(text_of(body), "lucene segment merge en deprecated api");
    }

    #[test]
    fn query_string_is_kept_as_written() {
        // The reference's own example: operators and parentheses stay, the tokenizer
        // drops the punctuation.
        let body = r#"{"query":{"query_string":{"query":"(new york city) OR (big apple)","default_field":"content"}}}"#;
        assert_eq!(text_of(body), "(new york city) OR (big apple)");
        let body = r#"{"query":{"simple_query_string":{"query":"\"fried eggs\" +(eggplant | potato) -frittata","fields":["title^5","body"],"default_operator":"and"}}}"#;
        assert_eq!(
            text_of(body),
            "\"fried eggs\" +(eggplant | potato) -frittata"
        );
        let body = r#"{"query":{"combined_fields":{"query":"database systems","fields":["title","abstract","body"],"operator":"and"}}}"#;
        assert_eq!(text_of(body), "database systems");
    }

    #[test]
    fn term_level_clauses_read_strings_only() {
        let body = r#"{"query":{"bool":{"should":[
            {"term":{"user.id":"kimchy"}},
            {"term":{"status":{"value":"urgent","boost":2.0}}},
            {"term":{"age":34}},
            {"terms":{"user.id":["kimchy","elkbee",42,true],"boost":1.0,"_name":"users"}},
            {"terms":{"color":{"index":"my-index","id":"2","path":"color"}}},
            {"prefix":{"user.id":{"value":"ki"}}},
            {"prefix":{"user":"ki"}},
            {"wildcard":{"user.id":{"value":"ki*y","boost":1.0,"rewrite":"constant_score_blended"}}},
            {"wildcard":{"user.id":{"wildcard":"ki?y"}}},
            {"fuzzy":{"user.id":{"value":"ki","fuzziness":"AUTO"}}},
            {"regexp":{"user.id":{"value":"k.*y","flags":"ALL"}}},
            {"range":{"age":{"gte":10,"lte":20}}},
            {"exists":{"field":"user"}},
            {"ids":{"values":["1","4","100"]}},
            {"match_all":{"boost":1.2}},
            {"match_none":{}},
            {"geo_distance":{"distance":"200km","pin.location":{"lat":40,"lon":-70}}},
            {"match":{"year":2024}}
        ]}}}"#;
        assert_eq!(
            text_of(body),
            "kimchy urgent kimchy elkbee ki ki ki*y ki?y ki k.*y"
        );
    }

    #[test]
    fn compound_clauses() {
        let body = r#"{"query":{"bool":{"must":[
            {"function_score":{"query":{"match":{"title":"espresso"}},"functions":[{"filter":{"match":{"tags":"italian"}},"weight":23},{"random_score":{}}],"score_mode":"max"}},
            {"script_score":{"query":{"match":{"message":"elasticsearch"}},"script":{"source":"doc['my-int'].value / 10 "}}},
            {"constant_score":{"filter":{"term":{"user.id":"kimchy"}},"boost":1.2}},
            {"boosting":{"positive":{"term":{"text":"apple"}},"negative":{"term":{"text":"pie tart fruit crumble tree"}},"negative_boost":0.5}},
            {"dis_max":{"queries":[{"term":{"title":"Quick pets"}},{"term":{"body":"Quick pets"}}],"tie_breaker":0.7}},
            {"nested":{"path":"obj1","query":{"bool":{"must":[{"match":{"obj1.name":"blue"}},{"range":{"obj1.count":{"gt":5}}}]}},"score_mode":"avg"}},
            {"has_child":{"type":"child","query":{"match_all":{}},"max_children":10}},
            {"has_parent":{"parent_type":"parent","query":{"term":{"tag":{"value":"Elasticsearch"}}}}}
        ]}}}"#;
        assert_eq!(
            text_of(body),
            "espresso italian elasticsearch kimchy apple pie tart fruit crumble tree \
             Quick pets Quick pets blue Elasticsearch"
        );
    }

    #[test]
    fn post_filter_and_rescore_count_knn_does_not() {
        let body = r#"{"query":{"match":{"message":{"operator":"or","query":"the quick brown"}}},"post_filter":{"term":{"color":"red"}},"rescore":{"window_size":50,"query":{"rescore_query":{"match_phrase":{"message":{"query":"the quick brown","slop":2}}},"query_weight":0.7,"rescore_query_weight":1.2}},"knn":{"field":"image-vector","query_vector":[-5,9,-12],"k":10,"num_candidates":100}}"#;
        assert_eq!(text_of(body), "the quick brown red the quick brown");

        // Several rescorers are a list, applied in turn.
        let body = r#"{"query":{"match":{"message":"fox"}},"rescore":[{"window_size":100,"query":{"rescore_query":{"match_phrase":{"message":"quick fox"}}}},{"window_size":10,"query":{"score_mode":"multiply","rescore_query":{"function_score":{"script_score":{"script":{"source":"Math.log10(doc.count.value + 2)"}}}}}}]}"#;
        assert_eq!(text_of(body), "fox quick fox");
    }

    #[test]
    fn count_body_and_query_alone() {
        // _count takes the same {"query": ...} body.
        assert_eq!(
            text_of(r#"{"query":{"term":{"status":"published"}}}"#),
            "published"
        );
        let mut sink = TextSink::new(64);
        query(&json!({"match": {"title": "hello"}}), &mut sink).expect("readable");
        assert_eq!(sink.into_text(), "hello");
    }

    #[test]
    fn unknown_and_skipped_clauses_contribute_nothing() {
        let body = r#"{"query":{"bool":{"should":[
            {"a_clause_from_the_future":{"field":"x","query":"ignored"}},
            {"intervals":{"my_text":{"all_of":{"ordered":true,"intervals":[{"match":{"query":"my favorite food"}}]}}}},
            {"match":{"title":"kept"}}
        ]}}}"#;
        assert_eq!(text_of(body), "kept");
        assert_eq!(text_of(r#"{"query":{"match_all":{}}}"#), "");
        assert_eq!(
            text_of(r#"{"size":0,"aggs":{"n":{"value_count":{"field":"_id"}}}}"#),
            ""
        );
        assert_eq!(text_of(r#"["not","a","search"]"#), "");
    }

    /// `levels` bool clauses, each inside the `must` of the one before, around a match.
    fn nested_bools(levels: usize) -> Value {
        let mut q = json!({"match": {"title": "deep"}});
        for _ in 1..levels {
            q = json!({"bool": {"must": [q]}});
        }
        q
    }

    #[test]
    fn nesting_is_capped() {
        let mut sink = TextSink::new(64);
        query(&nested_bools(MAX_DEPTH), &mut sink).expect("64 levels are allowed");
        assert_eq!(sink.into_text(), "deep");

        let mut sink = TextSink::new(64);
        let deeper = json!({"query": nested_bools(MAX_DEPTH + 1)});
        assert_eq!(search_body(&deeper, &mut sink), Err(DslError::TooDeep));
    }

    #[test]
    fn msearch_python_client_body() {
        // elasticsearch-py 8: es.msearch(searches=[{"index": "books"},
        //   {"query": {"match": {"title": "dune"}}}, {}, {"query": {...}}]):
        // each item serialized compact, one per line, the last line ending in "\n".
        let body = concat!(
            "{\"index\":\"books\"}\n",
            "{\"query\":{\"match\":{\"title\":\"dune\"}},\"size\":5}\n",
            "{}\n",
            "{\"query\":{\"multi_match\":{\"query\":\"frank herbert\",\"fields\":[\"author\",\"title\"]}}}\n",
        );
        let mut sink = TextSink::new(256);
        msearch(body.as_bytes(), &mut sink).expect("readable");
        assert_eq!(sink.into_text(), "dune frank herbert");
    }

    #[test]
    fn msearch_crlf_blank_lines_and_empty_headers() {
        // An empty header line (accepted by older versions) shifts no pairing.
        let body = "\r\n{\"query\":{\"match\":{\"t\":\"one\"}}}\r\n\r\n{\"search_type\":\"dfs_query_then_fetch\"}\r\n{\"query\":{\"term\":{\"t\":\"two\"}}}";
        let mut sink = TextSink::new(256);
        msearch(body.as_bytes(), &mut sink).expect("readable");
        assert_eq!(sink.into_text(), "one two");
    }

    #[test]
    fn msearch_bad_line_is_named() {
        let body = b"{\"index\":\"a\"}\n\n{\"query\":{\"match\":{\"t\":\"x\"}\n";
        let mut sink = TextSink::new(256);
        match msearch(body, &mut sink) {
            Err(DslError::NdjsonLine(line, _)) => assert_eq!(line, 3),
            other => panic!("expected NdjsonLine(3, _), got {other:?}"),
        }
    }

    #[test]
    fn long_texts_are_cut_by_the_sink() {
        let body = r#"{"query":{"terms":{"tag":["alpha","beta","gamma","delta"]}}}"#;
        let body: Value = serde_json::from_str(body).expect("JSON");
        let mut sink = TextSink::new(12);
        search_body(&body, &mut sink).expect("readable");
        assert!(sink.cut());
        assert_eq!(sink.into_text(), "alpha beta g");
    }
}
