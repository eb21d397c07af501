//! End-to-end tests of the balancer's routes (issue 30): a real `balancer` process in front
//! of `e2e::Backend`s standing in for Solr, Elasticsearch/OpenSearch, Tantivy's server and
//! ballot's replica. Each preset must read the query where its engine's API puts it, route
//! by its terms (a table sends `alpha` to r0 and `beta` to r1), and hand the replica the
//! request unchanged (method, path, query string, body); each unreadable request must be
//! refused with its 4xx under `fallback = "refuse"`, or routed without a query under a
//! fallback policy, and counted by kind. Backends echo every request (`NAME TARGET`) and
//! record it whole.

use std::path::Path;

use e2e::{request, Backend, Balancer, Conn, Reply, Request, Response, LIMIT};

const BALANCER: &str = env!("CARGO_BIN_EXE_balancer");
const TOKEN: &str = "s3cret";

/// A request refused: (what, method, target, content type, body, status, counted kind).
type Refused<'b> = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'b str,
    u16,
    &'static str,
);
/// A request routed by the fallback: (what, method, target, content type, body, kind).
type Fallen = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    &'static str,
);

/// Two backends that answer every request (not only `/search`) with `NAME TARGET`.
fn two() -> [Backend; 2] {
    ["r0", "r1"].map(|n| Backend::with_handler(n, |_| Reply::Echo))
}

/// A balancer over `backends` routing by the table in `dir`, with `extra` top-level lines
/// and `routes` at the end. The load bound never moves a query here (in-flight load, one
/// request at a time, generous eps), so where a query lands is its terms' vote.
fn start(backends: &[Backend], dir: &Path, extra: &str, routes: &str) -> Balancer {
    // These tests were written for a balancer that refuses what it cannot read.
    let refuse = if extra.contains("fallback") {
        ""
    } else {
        "fallback = \"refuse\"\n"
    };
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         load = \"in-flight\"\neps = 10.0\nrouting_headers = true\nretries = 1\n\
         request_timeout_ms = 2000\n{refuse}{extra}\n\
         [health]\ninterval_ms = 100\ntimeout_ms = 500\n\n\
         [policy]\nname = \"table\"\ntable = \"{}\"\n",
        e2e::write_votes(dir, 2, &[("alpha", 0), ("beta", 1)]).display()
    );
    s += &Backend::replica_sections(backends);
    s += routes;
    Balancer::start(BALANCER, &s)
}

/// One request on its own connection.
fn send(
    b: &Balancer,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    request(b.addr(), method, target, headers, body)
}

/// The one request `backend` received since `before` (its count of requests then).
fn received(backend: &Backend, before: usize) -> Request {
    let all = backend.requests();
    assert_eq!(all.len(), before + 1, "{}: {all:?}", backend.name());
    all[before].clone()
}

/// The count of `ballot_client_errors_total{kind}`.
fn errors(b: &Balancer, kind: &str) -> f64 {
    b.series("ballot_client_errors_total", &format!("kind=\"{kind}\""))
        .unwrap_or(0.0)
}

/// One case: a request, the replica it must reach, and the query it carries.
struct Case {
    what: &'static str,
    method: &'static str,
    target: &'static str,
    content_type: Option<&'static str>,
    body: &'static str,
    replica: usize,
}

/// A [`Case`].
fn case(
    what: &'static str,
    method: &'static str,
    target: &'static str,
    content_type: Option<&'static str>,
    body: &'static str,
    replica: usize,
) -> Case {
    Case {
        what,
        method,
        target,
        content_type,
        body,
        replica,
    }
}

/// Sends every case and checks where it landed and what the replica received.
fn check_cases(b: &Balancer, backends: &[Backend; 2], cases: &[Case]) {
    for c in cases {
        let before = backends.each_ref().map(|k| k.requests().len());
        let headers: Vec<(&str, &str)> = c
            .content_type
            .iter()
            .map(|t| ("Content-Type", *t))
            .collect();
        let r = send(b, c.method, c.target, &headers, c.body.as_bytes());
        assert_eq!(r.status, 200, "{}: {}", c.what, r.text());
        let name = backends[c.replica].name();
        assert_eq!(r.header("x-ballot-replica"), Some(name), "{}", c.what);
        assert_eq!(r.header("x-ballot-reason"), Some("vote"), "{}", c.what);
        if c.method != "HEAD" {
            assert_eq!(r.text(), format!("{name} {}", c.target), "{}", c.what);
        } else {
            assert!(r.body.is_empty(), "{}: a HEAD answer has no body", c.what);
        }
        let other = &backends[1 - c.replica];
        assert_eq!(
            other.requests().len(),
            before[1 - c.replica],
            "{}: went to both",
            c.what
        );
        let got = received(&backends[c.replica], before[c.replica]);
        // HEAD goes upstream as GET; every other method as it came.
        let method = if c.method == "HEAD" { "GET" } else { c.method };
        assert_eq!(
            (got.method.as_str(), got.target.as_str()),
            (method, c.target),
            "{}",
            c.what
        );
        assert_eq!(got.body, c.body.as_bytes(), "{}", c.what);
        let lengths: Vec<&str> = got
            .headers
            .iter()
            .filter(|(k, _)| k == "content-length")
            .map(|(_, v)| v.as_str())
            .collect();
        let want: Vec<String> = if c.body.is_empty() && c.method != "POST" {
            vec![]
        } else {
            vec![c.body.len().to_string()]
        };
        assert_eq!(lengths, want, "{}: one Content-Length, the body's", c.what);
        assert_eq!(got.header("content-type"), c.content_type, "{}", c.what);
        assert!(got.header("x-request-id").is_some() && got.header("expect").is_none());
    }
}

const FORM: Option<&str> = Some("application/x-www-form-urlencoded");
const JSON: Option<&str> = Some("application/json");

#[test]
fn each_preset_reads_its_query_and_the_replica_gets_the_request_unchanged() {
    let backends = two();
    let dir = tempfile::tempdir().unwrap();
    let routes = "\n[[routes]]\npreset = \"ballot\"\n[[routes]]\npreset = \"solr\"\n\
                  [[routes]]\npreset = \"elasticsearch-uri\"\n\
                  [[routes]]\npreset = \"elasticsearch-query-string\"\n\
                  [[routes]]\npreset = \"tantivy\"\n";
    let b = start(&backends, dir.path(), "", routes);
    check_cases(
        &b,
        &backends,
        &[
            case("ballot alpha", "GET", "/search?q=alpha", None, "", 0),
            case("ballot beta", "GET", "/search?q=beta&k=3", None, "", 1),
            case("ballot HEAD", "HEAD", "/search?q=beta", None, "", 1),
            case(
                "solr GET",
                "GET",
                "/solr/books/select?q=beta&wt=json",
                None,
                "",
                1,
            ),
            case(
                "solr GET escaped",
                "GET",
                "/solr/books/select?wt=json&q=%41lpha+x",
                None,
                "",
                0,
            ),
            case(
                "solr POST form",
                "POST",
                "/solr/books/select?wt=json",
                FORM,
                "rows=5&q=alpha%20stuff",
                0,
            ),
            case(
                "solr POST, q in the URL",
                "POST",
                "/solr/books/select?q=beta",
                FORM,
                "rows=5",
                1,
            ),
            case(
                "elasticsearch URI",
                "GET",
                "/books/_search?q=beta&size=3",
                None,
                "",
                1,
            ),
            case(
                "elasticsearch all indices",
                "GET",
                "/_search?q=alpha",
                None,
                "",
                0,
            ),
            case(
                "elasticsearch query_string",
                "POST",
                "/books,films/_search?pretty",
                JSON,
                r#"{"query":{"query_string":{"query":"beta","default_field":"title"}},"size":3}"#,
                1,
            ),
            case(
                "elasticsearch query_string, other replica",
                "POST",
                "/books/_search",
                JSON,
                r#"{"query":{"query_string":{"query":"alpha"}}}"#,
                0,
            ),
            case("tantivy", "GET", "/api/?q=beta&nhits=10", None, "", 1),
            case(
                "tantivy without the slash",
                "GET",
                "/api?q=alpha",
                None,
                "",
                0,
            ),
        ],
    );
    // A chunked JSON body is read whole and goes on with its length.
    let before = backends[1].requests().len();
    let body = r#"{"query":{"query_string":{"query":"beta"}}}"#;
    let (a, z) = body.split_at(10);
    let chunked = format!("{:x}\r\n{a}\r\n{:x}\r\n{z}\r\n0\r\n\r\n", a.len(), z.len());
    let mut conn = Conn::open(b.addr(), LIMIT);
    let r = conn.request(
        "POST",
        "/books/_search",
        &[
            ("Content-Type", "application/json"),
            ("Transfer-Encoding", "chunked"),
        ],
        chunked.as_bytes(),
    );
    assert_eq!(
        (r.status, r.header("x-ballot-replica")),
        (200, Some("r1")),
        "{}",
        r.text()
    );
    let got = received(&backends[1], before);
    assert_eq!(got.body, body.as_bytes());
    assert_eq!(
        got.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(got.header("transfer-encoding"), None);
    // The same connection carries the next request.
    let r = conn.request("GET", "/search?q=alpha", &[], b"");
    assert_eq!(r.header("x-ballot-replica"), Some("r0"));
    assert_eq!(
        b.metric("ballot_client_errors_total"),
        None,
        "nothing refused"
    );

    // elasticsearch-match, alone (a query_string route would take its requests first).
    let b = start(
        &backends,
        dir.path(),
        "",
        "\n[[routes]]\npreset = \"elasticsearch-match\"\nfield = \"title\"\n",
    );
    check_cases(
        &b,
        &backends,
        &[
            case(
                "elasticsearch match",
                "POST",
                "/books/_search",
                JSON,
                r#"{"query":{"match":{"title":"beta"}}}"#,
                1,
            ),
            case(
                "elasticsearch match, query object",
                "POST",
                "/books/_search",
                JSON,
                r#"{"query":{"match":{"title":{"query":"alpha","operator":"and"}}}}"#,
                0,
            ),
        ],
    );
}

#[test]
fn explicit_routes_read_params_forms_and_json_pointers() {
    let backends = two();
    let dir = tempfile::tempdir().unwrap();
    let routes = r#"
[[routes]]
method = "GET"
path = "/find"
query = { param = "text" }
[[routes]]
method = ["GET", "POST"]
path_prefix = "/v2"
path_suffix = "/query"
query = { form = "terms" }
[[routes]]
method = "POST"
path_suffix = "/q"
query = { json = "/filters/0/a~1b" }
"#;
    let b = start(&backends, dir.path(), "", routes);
    check_cases(
        &b,
        &backends,
        &[
            case("param", "GET", "/find?q=alpha&text=beta", None, "", 1),
            case("form", "POST", "/v2/x/query", FORM, "terms=alpha", 0),
            case(
                "form in the URL",
                "GET",
                "/v2/query?terms=beta",
                None,
                "",
                1,
            ),
            case(
                "pointer",
                "POST",
                "/any/q",
                JSON,
                r#"{"filters":[{"a/b":"beta"}]}"#,
                1,
            ),
        ],
    );
}

#[test]
fn unreadable_requests_are_refused_with_4xx_and_counted() {
    let backends = two();
    let dir = tempfile::tempdir().unwrap();
    let routes = "\n[[routes]]\npreset = \"elasticsearch-query-string\"\n\
                  [[routes]]\npreset = \"solr\"\n";
    let b = start(
        &backends,
        dir.path(),
        "max_body_bytes = 1024\nfallback = \"refuse\"",
        routes,
    );
    let big = format!(
        r#"{{"query":{{"query_string":{{"query":"{}"}}}}}}"#,
        "a ".repeat(600)
    );
    let cases: [Refused<'_>; 9] = [
        (
            "malformed JSON",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"query_string""#,
            400,
            "bad_json",
        ),
        (
            "missing field",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"match_all":{}}}"#,
            400,
            "missing_q",
        ),
        (
            "not a string",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"query_string":{"query":5}}}"#,
            400,
            "not_a_string",
        ),
        (
            "blank",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"query_string":{"query":" "}}}"#,
            400,
            "empty_q",
        ),
        (
            "oversized body",
            "POST",
            "/b/_search",
            JSON,
            big.as_str(),
            413,
            "body_too_large",
        ),
        (
            "solr, a body neither a form nor JSON",
            "POST",
            "/solr/c/select",
            Some("text/plain"),
            "q=alpha",
            400,
            "bad_content_type",
        ),
        (
            "form without q",
            "POST",
            "/solr/c/select",
            FORM,
            "rows=1",
            400,
            "missing_q",
        ),
        (
            "no route",
            "GET",
            "/books/_doc/1",
            None,
            "",
            404,
            "no_route",
        ),
        (
            "no route for the method",
            "GET",
            "/b/_search?q=alpha",
            None,
            "",
            405,
            "no_route",
        ),
    ];
    for (what, method, target, ct, body, status, kind) in cases {
        let before = errors(&b, kind);
        let headers: Vec<(&str, &str)> = ct.iter().map(|t| ("Content-Type", *t)).collect();
        let r = send(&b, method, target, &headers, body.as_bytes());
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let error = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(!error.is_empty(), "{what}: {}", r.text());
        assert!(r.header("x-request-id").is_some(), "{what}");
        assert_eq!(errors(&b, kind), before + 1.0, "{what}: kind {kind}");
        eprintln!("{what}: {status} {error}");
    }
    let r = send(&b, "GET", "/b/_search", &[], b"");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = send(&b, "DELETE", "/solr/c/select", &[], b"");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET,HEAD,POST")));
    // A declared length over the limit is refused before the body is sent.
    let mut conn = Conn::open(b.addr(), LIMIT);
    conn.send(
        "POST",
        "/b/_search",
        &[
            ("Content-Length", "5000"),
            ("Content-Type", "application/json"),
        ],
        b"",
    );
    let r = conn.read_response().expect("an answer before the body");
    assert_eq!(r.status, 413, "{}", r.text());
    // Routes cannot shadow the balancer's own liveness answer.
    let r = send(&b, "GET", "/healthz", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));
    for k in &backends {
        assert!(
            k.requests().is_empty(),
            "{} got {:?}",
            k.name(),
            k.requests()
        );
    }
}

#[test]
fn unreadable_requests_under_a_fallback_policy_are_routed_round_robin() {
    let backends = two();
    let dir = tempfile::tempdir().unwrap();
    let routes = "\n[[routes]]\npreset = \"elasticsearch-query-string\"\n";
    let b = start(
        &backends,
        dir.path(),
        "max_body_bytes = 1024\nfallback = \"round-robin\"",
        routes,
    );
    let cases: [Fallen; 5] = [
        (
            "malformed JSON",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":"#,
            "bad_json",
        ),
        (
            "missing field",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"match_all":{}}}"#,
            "missing_q",
        ),
        (
            "not a string",
            "POST",
            "/b/_search",
            JSON,
            r#"{"query":{"query_string":{"query":[1]}}}"#,
            "not_a_string",
        ),
        (
            "no route",
            "GET",
            "/books/_doc/1?routing=x",
            None,
            "",
            "no_route",
        ),
        (
            "no route, POST",
            "POST",
            "/books/_count",
            JSON,
            r#"{"query":{"match_all":{}}}"#,
            "no_route",
        ),
    ];
    let mut landed = [0usize; 2];
    for (what, method, target, ct, body, kind) in cases {
        let before = errors(&b, kind);
        let seen = backends.each_ref().map(|k| k.requests().len());
        let headers: Vec<(&str, &str)> = ct.iter().map(|t| ("Content-Type", *t)).collect();
        let r = send(&b, method, target, &headers, body.as_bytes());
        assert_eq!(r.status, 200, "{what}: {}", r.text());
        assert_eq!(r.header("x-ballot-reason"), Some("fallback"), "{what}");
        let i = usize::from(r.header("x-ballot-replica") == Some("r1"));
        landed[i] += 1;
        let got = received(&backends[i], seen[i]);
        assert_eq!(
            (got.method.as_str(), got.target.as_str()),
            (method, target),
            "{what}"
        );
        assert_eq!(got.body, body.as_bytes(), "{what}");
        assert_eq!(errors(&b, kind), before + 1.0, "{what}: kind {kind}");
    }
    assert_eq!(landed, [3, 2], "round-robin over both replicas, r0 first");
    // What cannot be forwarded is still refused: a body past the limit, another method.
    let big = format!(r#"{{"query":"{}"}}"#, "x".repeat(2000));
    let r = send(
        &b,
        "POST",
        "/b/_search",
        &[("Content-Type", "application/json")],
        big.as_bytes(),
    );
    assert_eq!(r.status, 413, "{}", r.text());
    let r = send(&b, "PUT", "/books/_doc/1", &[], b"{}");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET,HEAD,POST")));
    assert_eq!(errors(&b, "body_too_large"), 1.0);
    // A readable query still goes where its terms vote.
    let r = send(
        &b,
        "POST",
        "/b/_search",
        &[],
        br#"{"query":{"query_string":{"query":"beta"}}}"#,
    );
    assert_eq!(
        (r.header("x-ballot-replica"), r.header("x-ballot-reason")),
        (Some("r1"), Some("vote"))
    );
}

#[test]
fn a_post_without_a_route_is_never_sent_twice_but_a_routed_one_fails_over() {
    // r0 takes every request and closes the connection without answering.
    let backends = [
        Backend::with_handler("r0", |_| Reply::Close),
        Backend::with_handler("r1", |_| Reply::Echo),
    ];
    let dir = tempfile::tempdir().unwrap();
    let routes = "\n[[routes]]\npreset = \"elasticsearch-query-string\"\n";
    let b = start(&backends, dir.path(), "fallback = \"round-robin\"", routes);
    // The first request the fallback routes goes to r0: not sent again.
    let r = send(
        &b,
        "POST",
        "/books/_update_by_query",
        &[],
        br#"{"script":"x"}"#,
    );
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("not sent twice"), "{}", r.text());
    assert_eq!(
        (backends[0].requests().len(), backends[1].requests().len()),
        (1, 0)
    );
    // The next turn is r1's; the one after, r0's again: a GET without a route may go
    // again, and fails over.
    let r = send(&b, "GET", "/books/_doc/1", &[], b"");
    assert_eq!(
        (r.header("x-ballot-replica"), r.header("x-ballot-reason")),
        (Some("r1"), Some("fallback"))
    );
    let r = send(&b, "GET", "/books/_doc/2", &[], b"");
    assert_eq!(
        (r.status, r.header("x-ballot-reason")),
        (200, Some("failover")),
        "{}",
        r.text()
    );
    assert_eq!(backends[0].requests().len(), 2);
    // A POST to a search route is a read: it fails over to r1.
    let before = backends[0].requests().len();
    let body = br#"{"query":{"query_string":{"query":"alpha"}}}"#;
    let r = send(
        &b,
        "POST",
        "/books/_search",
        &[("Content-Type", "application/json")],
        body,
    );
    assert_eq!(
        (r.status, r.header("x-ballot-replica")),
        (200, Some("r1")),
        "{}",
        r.text()
    );
    assert_eq!(r.header("x-ballot-reason"), Some("failover"));
    assert_eq!(
        backends[0].requests().len(),
        before + 1,
        "tried on its voted replica first"
    );
    assert_eq!(
        backends[1].requests().last().map(|q| q.body.clone()),
        Some(body.to_vec())
    );
}

#[test]
fn the_default_route_answers_as_before() {
    let backends = two();
    let dir = tempfile::tempdir().unwrap();
    let b = start(&backends, dir.path(), "", "");
    let r = send(&b, "GET", "/search?q=beta", &[], b"");
    assert_eq!((r.status, r.header("x-ballot-replica")), (200, Some("r1")));
    let r = send(&b, "HEAD", "/search?q=alpha", &[], b"");
    assert_eq!((r.status, r.body.len()), (200, 0));
    let r = send(&b, "POST", "/search?q=alpha", &[], b"");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET,HEAD")));
    assert_eq!(r.json()["error"], "method not allowed on this path");
    let r = send(&b, "GET", "/searchx?q=alpha", &[], b"");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "no such path");
    let r = send(&b, "GET", "/search", &[], b"");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "missing query parameter `q`");
    assert_eq!(errors(&b, "missing_q"), 1.0);
    assert_eq!(errors(&b, "no_route"), 2.0);
    let r = send(&b, "POST", "/healthz", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(send(&b, "GET", "/healthz", &[], b"").text(), "ok\n");
    // A GET with a body: the body goes on to the replica.
    let r = send(
        &b,
        "GET",
        "/search?q=alpha",
        &[("Content-Type", "text/plain")],
        b"hello",
    );
    assert_eq!((r.status, r.header("x-ballot-replica")), (200, Some("r0")));
    let last = backends[0].requests().pop().unwrap();
    assert_eq!(
        (last.method.as_str(), last.body.as_slice()),
        ("GET", &b"hello"[..])
    );
}
