//! End-to-end tests of what an operator sees (issue 32): a real `balancer` process in front
//! of `e2e::Backend`s that report each answer's flash bytes. The status page is reached the
//! way a browser reaches it (login form, cookie), and every figure it shows for the
//! replicas and the table is checked against `/admin/replicas`, `/admin/table` and
//! `/metrics`, through a drain and a replica's death. `/admin/explain` must name the replica
//! the balancer then routes the query to, with the same rule: on an idle balancer, and with
//! a request held at one home so that the other takes the query by rule `home`.

use std::path::Path;

use data::sizes::SizeTable;
use e2e::{request, wait_until, Backend, Balancer, Reply, Response, LIMIT};

const BALANCER: &str = env!("CARGO_BIN_EXE_balancer");
const TOKEN: &str = "op s3cret";

/// A backend answering every search `200 ok` and reporting `miss` flash bytes.
fn reporting(name: &str, miss: u64) -> Backend {
    Backend::with_handler(name, move |r| {
        if !r.is_search() {
            return Reply::Text(200, "ok".to_owned());
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\
             x-ballot-miss-bytes: {miss}\r\n\r\n"
        );
        Reply::raw(&[format!("{head}ok").as_bytes()], false)
    })
}

/// A table over three replicas and the sizes of its terms, in `dir`; the `[policy]` lines.
fn policy(dir: &Path) -> String {
    let table = e2e::write_votes(
        dir,
        3,
        &[
            ("alpha", 0),
            ("beta", 1),
            ("gamma", 2),
            ("hot", 0),
            ("hot", 1),
        ],
    );
    let sizes = dir.join("sizes.parquet");
    let pairs = ["alpha", "beta", "gamma", "hot"].map(|t| (t.to_owned(), 2_000));
    SizeTable::from_pairs(pairs).write_parquet(&sizes).unwrap();
    format!(
        "name = \"table\"\ntable = \"{}\"\nsizes = \"{}\"\n",
        table.display(),
        sizes.display()
    )
}

/// A balancer over `backends` bounding `load`, with the `extra` top-level config lines.
fn start(backends: &[&Backend], load: &str, extra: &str) -> (Balancer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         load = \"{load}\"\nwork_source = \"header\"\nrouting_headers = true\n{extra}\n\
         [health]\ninterval_ms = 100\ntimeout_ms = 300\nfall = 2\nrise = 2\n\n\
         [policy]\n{}\n[shadow]\ncache_bytes = 5000\neviction = \"lru\"\n",
        policy(dir.path())
    );
    s += &Backend::replica_sections(backends.iter().copied());
    (Balancer::start(BALANCER, &s), dir)
}

/// The text of the element with `id` in `html` (panics when there is none).
fn figure(html: &str, id: &str) -> String {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id} on the page"));
    let text = &html[start..];
    let open = text.find('>').unwrap() + 1;
    let close = text[open..].find('<').unwrap();
    text[open..open + close].to_owned()
}

/// `GET /admin/status` with the login cookie.
fn page(b: &Balancer, cookie: &str) -> String {
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/status",
        &[("Cookie", cookie)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    r.text()
}

/// Checks every replica's and the table's figures on `html` against the admin API and the
/// metrics, which must not move meanwhile (the balancer is idle).
fn check_figures(b: &Balancer, html: &str) {
    for r in b.replicas() {
        let name = r["name"].as_str().unwrap();
        let state = if r["drained"] == true {
            "drained"
        } else if r["healthy"] == true {
            "up"
        } else {
            "ejected"
        };
        assert_eq!(figure(html, &format!("{name}-state")), state, "{name}");
        for (id, field) in [("in-flight", "in_flight"), ("queued", "queued")] {
            let shown: u64 = figure(html, &format!("{name}-{id}")).parse().unwrap();
            assert_eq!(shown, r[field].as_u64().unwrap(), "{name} {id}");
        }
        let answered: f64 = [
            "vote",
            "home",
            "overflow",
            "stall-guard",
            "no-vote",
            "stolen",
            "failover",
        ]
        .iter()
        .filter_map(|why| {
            b.series(
                "ballot_requests_total",
                &format!("replica=\"{name}\",reason=\"{why}\""),
            )
        })
        .sum();
        let shown: f64 = figure(html, &format!("{name}-requests")).parse().unwrap();
        assert_eq!(shown, answered, "{name}'s answers");
    }
    let t = b.admin("GET", "/admin/table", b"").json();
    assert_eq!(figure(html, "table-version"), t["version"].to_string());
    assert_eq!(
        figure(html, "table-hash").replace("<code>", ""),
        t["content_hash"].as_str().unwrap()
    );
}

fn login(b: &Balancer, token: &str) -> Response {
    let body = format!("token={}", token.replace(' ', "+"));
    request(
        b.admin_addr(),
        "POST",
        "/admin/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
}

#[test]
fn the_status_page_shows_what_the_admin_api_and_the_metrics_say() {
    let b0 = reporting("b0", 3_000);
    let mut b1 = reporting("b1", 1_000);
    let b2 = reporting("b2", 0);
    let (b, _dir) = start(&[&b0, &b1, &b2], "work", "");
    // A browser without the cookie is sent to the form; a wrong token is refused.
    let r = request(b.admin_addr(), "GET", "/admin/status", &[], b"");
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/admin/login"))
    );
    let form = request(b.admin_addr(), "GET", "/admin/login", &[], b"");
    assert!(form.status == 200 && form.text().contains("name=\"token\""));
    assert_eq!(login(&b, "wrong").status, 401);
    let ok = login(&b, TOKEN);
    assert_eq!(ok.status, 303, "{}", ok.text());
    let set = ok.header("set-cookie").expect("a cookie").to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(set.contains("Max-Age="), "{set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let hex_token: String = TOKEN.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        !cookie.contains(&hex_token),
        "the cookie holds a session, not the token"
    );
    // A forged session opens nothing; a wrong bearer token is refused even with the cookie.
    let forged = format!("ballot_admin={}", "00".repeat(16));
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/status",
        &[("Cookie", &forged)],
        b"",
    );
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/admin/login"))
    );
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/table",
        &[("Cookie", &forged)],
        b"",
    );
    assert_eq!(r.status, 401);
    let both = [
        ("Cookie", cookie.as_str()),
        ("Authorization", "Bearer wrong"),
    ];
    assert_eq!(
        request(b.admin_addr(), "GET", "/admin/table", &both, b"").status,
        401
    );
    // The cookie opens the read-only views, never a change.
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/table",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(r.status, 200);
    let r = request(
        b.admin_addr(),
        "POST",
        "/admin/replicas/b0/drain",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(r.status, 401, "{}", r.text());

    for i in 0..90 {
        let q = ["alpha", "beta", "gamma", "hot", "alpha+beta", "novel+words"][i % 6];
        assert_eq!(b.search(q).status, 200);
    }
    let html = page(&b, &cookie);
    assert!(!html.contains("<script") && html.contains("http-equiv=\"refresh\""));
    assert!(html.matches("<svg").count() >= 4, "the charts");
    check_figures(&b, &html);
    // Flash shares from the replicas' reports: b0 reports 3,000 bytes a query, b1 1,000 and
    // b2 none, so the shares follow the answers and add up to the whole.
    assert!(html.contains("flash share (reported)"));
    let share = |n: &str| -> f64 {
        let s = figure(&html, &format!("{n}-flash-share"));
        s.trim_end_matches('%').parse::<f64>().unwrap()
    };
    assert!((share("b0") + share("b1") + share("b2") - 100.0).abs() < 0.2);
    assert_eq!(share("b2"), 0.0);
    assert!(share("b0") > share("b1"));

    // Drained, then dead: the page follows.
    assert_eq!(b.admin("POST", "/admin/replicas/b2/drain", b"").status, 200);
    b1.kill();
    b.wait_health("b1", false);
    let html = page(&b, &cookie);
    assert_eq!(figure(&html, "b2-state"), "drained");
    assert_eq!(figure(&html, "b1-state"), "ejected");
    check_figures(&b, &html);
    // Logging out ends the session and clears the cookie.
    let out = request(
        b.admin_addr(),
        "POST",
        "/admin/logout",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/status",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(
        r.status, 303,
        "the old cookie opens nothing after the logout"
    );
}

#[test]
fn explain_names_the_replica_and_the_rule_the_balancer_then_uses() {
    let backends: Vec<Backend> = (0..3).map(|i| reporting(&format!("b{i}"), 500)).collect();
    let refs: Vec<&Backend> = backends.iter().collect();
    let (b, _dir) = start(&refs, "in-flight", "");
    let queries = [
        "alpha",
        "beta",
        "gamma",
        "hot",
        "hot",
        "hot+alpha",
        "novel",
        "beta+gamma",
        "hot",
        "x+y+z",
    ];
    let mut rules = std::collections::BTreeSet::new();
    for round in 0..20 {
        for q in queries {
            // Idle between queries, so the explanation and the routing see the same view.
            wait_until(LIMIT, "nothing in flight", || {
                b.replicas().iter().all(|r| r["in_flight"] == 0)
            });
            let e = b.admin("GET", &format!("/admin/explain?q={q}"), b"").json();
            let s = b.search(q);
            assert_eq!(s.status, 200);
            let (replica, reason) = (s.header("x-ballot-replica"), s.header("x-ballot-reason"));
            assert_eq!(replica, e["chosen"].as_str(), "{q} in round {round}: {e}");
            assert_eq!(reason, e["rule"].as_str(), "{q} in round {round}: {e}");
            rules.insert(reason.unwrap().to_owned());
            let terms = e["terms"].as_array().unwrap();
            assert_eq!(terms.len(), q.split('+').count(), "{e}");
            if q == "hot" {
                assert_eq!(terms[0]["votes"].as_array().unwrap().len(), 2, "{e}");
                let homes = e["replicas"].as_array().unwrap();
                assert_eq!(homes.iter().filter(|r| r["home"] == true).count(), 2, "{e}");
            }
            if round > 0 {
                // The shadow caches price the query: round-robin's estimate is their mean.
                let f = &e["flash"];
                let mean = e["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["shadow_miss_bytes"].as_f64().unwrap())
                    .sum::<f64>()
                    / 3.0;
                assert!((f["round_robin_miss_bytes"].as_f64().unwrap() - mean).abs() < 1e-6);
            }
        }
    }
    assert!(rules.contains("vote"), "{rules:?}");
    // Bad requests: a 400 naming what is wrong, never a 500.
    for (target, needle) in [
        ("/admin/explain", "missing query"),
        ("/admin/explain?q=", "missing query"),
        ("/admin/explain?q=a&format=xml", "format"),
        ("/admin/explain?q=a&nope=1", "no other parameter"),
    ] {
        let r = b.admin("GET", target, b"");
        assert_eq!(r.status, 400, "{target}: {}", r.text());
        assert!(
            r.json()["error"].as_str().unwrap().contains(needle),
            "{target}"
        );
    }
    let text = b.admin("GET", "/admin/explain?q=hot&format=text", b"");
    assert!(text.text().contains("chosen: b"), "{}", text.text());
    assert!(b.metric("ballot_sampled_miss_bytes_total").unwrap() > 0.0);
}

#[test]
fn explain_and_routing_agree_on_a_home_taken_by_backlog() {
    let backends: Vec<Backend> = (0..3).map(|i| reporting(&format!("b{i}"), 500)).collect();
    let refs: Vec<&Backend> = backends.iter().collect();
    // A bound that does not bind (eps 10): only the homes' backlog moves the query.
    let (b, _dir) = start(&refs, "in-flight", "eps = 10.0");
    // One query for alpha (votes b0 only) held at b0: b0's backlog is 1.
    backends[0].hold();
    let addr = b.addr();
    let held = std::thread::spawn(move || e2e::get(addr, "/search?q=alpha"));
    backends[0].wait_held(1);
    wait_until(LIMIT, "b0's backlog 1", || {
        b.replica("b0")["in_flight"] == 1
    });
    // hot votes b0 and b1 alike: both are homes, and b1 has no backlog.
    let e = b.admin("GET", "/admin/explain?q=hot", b"").json();
    assert_eq!(
        (e["chosen"].as_str(), e["rule"].as_str()),
        (Some("b1"), Some("home")),
        "{e}"
    );
    assert_eq!(e["top"], "b0", "{e}");
    assert_eq!(e["replicas"][0]["backlog"], 1, "{e}");
    let s = b.search("hot");
    assert_eq!(
        (s.header("x-ballot-replica"), s.header("x-ballot-reason")),
        (Some("b1"), Some("home"))
    );
    assert_eq!(
        b.series("ballot_requests_total", "replica=\"b1\",reason=\"home\""),
        Some(1.0)
    );
    backends[0].release(1);
    assert_eq!(held.join().unwrap().status, 200);
}
