//! End-to-end tests of where the `work` load learns a query's flash bytes (issue 30): a real
//! `balancer` process in front of `e2e::Backend`s that answer with an ORCA load report
//! (TEXT, JSON, malformed, binary) or with nothing at all, under each `work_source`. Every
//! answer must be counted by where its bytes came from, a malformed report ignored and
//! counted (the answer still relayed), the reported bytes summed per replica, and the
//! shadow caches must miss what a cache of the configured size would, shown in `/metrics`
//! and `/admin/replicas`.

use std::path::Path;

use data::sizes::SizeTable;
use e2e::{Backend, Balancer, Reply};

const BALANCER: &str = env!("CARGO_BIN_EXE_balancer");

/// A backend answering every search `200 ok` with `headers` (raw `name: value` lines).
fn answering(name: &str, headers: &'static str) -> Backend {
    Backend::with_handler(name, move |_| {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n{headers}\r\n"
        );
        Reply::raw(&[format!("{head}ok").as_bytes()], false)
    })
}

/// Writes a table sending `alpha` to r0 and `beta` to r1, and sizes alpha 1,000 bytes and
/// beta 3,000, into `dir`; returns the `[policy]` lines naming them.
fn table_and_sizes(dir: &Path) -> String {
    let table = e2e::write_votes(dir, 2, &[("alpha", 0), ("beta", 1)]);
    let sizes = dir.join("sizes.parquet");
    SizeTable::from_pairs([("alpha".to_owned(), 1_000), ("beta".to_owned(), 3_000)])
        .write_parquet(&sizes)
        .unwrap();
    format!(
        "name = \"table\"\ntable = \"{}\"\nsizes = \"{}\"\n",
        table.display(),
        sizes.display()
    )
}

/// A balancer over `backends` with `load = "work"`, the `extra` top-level lines, and the
/// `[policy]` lines `policy`, then `tail` (sections).
fn start(backends: &[Backend], extra: &str, policy: &str, tail: &str) -> Balancer {
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"t\"\n\
         load = \"work\"\neps = 10.0\n{extra}\n\
         [health]\ninterval_ms = 100\ntimeout_ms = 500\n\n[policy]\n{policy}\n{tail}\n"
    );
    s += &Backend::replica_sections(backends);
    Balancer::start(BALANCER, &s)
}

/// The value of the series `name{labels}` (0 when absent).
fn series(b: &Balancer, name: &str, labels: &str) -> f64 {
    b.series(name, labels).unwrap_or(0.0)
}

fn sources(b: &Balancer) -> [f64; 4] {
    ["header", "orca", "shadow", "none"]
        .map(|s| series(b, "ballot_work_source_total", &format!("source=\"{s}\"")))
}

fn search_ok(b: &Balancer, q: &str, n: usize) {
    for _ in 0..n {
        let r = b.search(q);
        assert_eq!(r.status, 200, "{q}: {}", r.text());
        assert_eq!(r.text(), "ok");
    }
}

#[test]
fn orca_reports_in_text_and_json_are_read_and_summed_per_replica() {
    let backends = [
        answering(
            "r0",
            "endpoint-load-metrics: TEXT cpu_utilization=0.5, request_cost.miss_bytes=1000\r\n",
        ),
        answering(
            "r1",
            "endpoint-load-metrics: JSON {\"request_cost\": {\"miss_bytes\": 2500.4}}\r\n",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        &backends,
        "work_source = \"orca\"",
        &table_and_sizes(dir.path()),
        "",
    );
    search_ok(&b, "alpha", 3);
    search_ok(&b, "beta", 2);
    assert_eq!(sources(&b), [0.0, 5.0, 0.0, 0.0]);
    let reported = |r: &str| {
        series(
            &b,
            "ballot_reported_miss_bytes_total",
            &format!("replica=\"{r}\""),
        )
    };
    assert_eq!(reported("r0"), 3_000.0);
    assert_eq!(reported("r1"), 5_000.0, "2500.4 rounds to 2500");
    assert_eq!(b.metric("ballot_load_reports_malformed_total"), Some(0.0));
}

#[test]
fn malformed_and_binary_reports_are_ignored_and_malformed_ones_counted() {
    let backends = [
        answering(
            "r0",
            "endpoint-load-metrics: TEXT request_cost.miss_bytes=lots\r\n",
        ),
        answering("r1", "endpoint-load-metrics: BIN CgkJAAAAAAAA4D8=\r\n"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let b = start(&backends, "", &table_and_sizes(dir.path()), "");
    search_ok(&b, "alpha", 2);
    search_ok(&b, "beta", 3);
    // auto: no header, no readable report, no shadow caches: the fixed cost alone.
    assert_eq!(sources(&b), [0.0, 0.0, 0.0, 5.0]);
    assert_eq!(b.metric("ballot_load_reports_malformed_total"), Some(2.0));
    assert_eq!(b.metric("ballot_reported_miss_bytes_total"), Some(0.0));
}

#[test]
fn under_auto_the_miss_bytes_header_comes_first() {
    let backends = [
        answering(
            "r0",
            "x-ballot-miss-bytes: 7\r\nendpoint-load-metrics: TEXT request_cost.miss_bytes=9\r\n",
        ),
        answering(
            "r1",
            "endpoint-load-metrics: TEXT request_cost.miss_bytes=9\r\n",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let b = start(&backends, "", &table_and_sizes(dir.path()), "");
    search_ok(&b, "alpha", 1);
    search_ok(&b, "beta", 1);
    assert_eq!(sources(&b), [1.0, 1.0, 0.0, 0.0]);
    assert_eq!(b.metric("ballot_reported_miss_bytes_total"), Some(16.0));
}

#[test]
fn shadow_caches_estimate_the_work_of_replicas_that_report_nothing() {
    let backends = [answering("r0", ""), answering("r1", "")];
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        &backends,
        "work_source = \"shadow\"",
        &table_and_sizes(dir.path()),
        "[shadow]\ncache_bytes = 3500\neviction = \"lru\"\n",
    );
    // alpha misses once on r0 (1,000 bytes), beta once on r1 (3,000); then both are cached.
    search_ok(&b, "alpha", 3);
    search_ok(&b, "beta", 2);
    assert_eq!(sources(&b), [0.0, 0.0, 5.0, 0.0]);
    let shadow = |r: &str| {
        series(
            &b,
            "ballot_shadow_miss_bytes_total",
            &format!("replica=\"{r}\""),
        )
    };
    assert_eq!((shadow("r0"), shadow("r1")), (1_000.0, 3_000.0));
    let cached = |r: &str| {
        series(
            &b,
            "ballot_shadow_cached_bytes",
            &format!("replica=\"{r}\""),
        )
    };
    assert_eq!((cached("r0"), cached("r1")), (1_000.0, 3_000.0));
    let memory = b.metric("ballot_shadow_memory_bytes").unwrap();
    assert!(memory > 0.0 && memory < 1e6, "{memory}");
    let admin = b.admin("GET", "/admin/replicas", b"").json();
    assert_eq!(admin["work_source"], "shadow");
    assert_eq!(admin["shadow"]["cache_bytes"], 3500);
    assert_eq!(admin["shadow"]["eviction"], "lru");
    assert_eq!(admin["shadow"]["size_table_terms"], 2);
    assert!(admin["shadow"]["memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(b.replica("r1")["shadow_cached_bytes"], 3000);
    // A term the size table does not know is cached at the default size, once.
    search_ok(&b, "alpha+zebra", 2);
    let default = shadow("r0") - 1_000.0;
    assert!(default > 0.0, "zebra missed at its default size");
    assert_eq!(admin_terms(&b), (2, 1));
}

fn admin_terms(b: &Balancer) -> (u64, u64) {
    let admin = b.admin("GET", "/admin/replicas", b"").json();
    let n = |k: &str| admin["shadow"][k].as_u64().unwrap();
    (n("size_table_terms"), n("other_terms"))
}

#[test]
fn a_shadow_source_without_shadow_caches_is_a_config_error() {
    let backends = [answering("r0", "")];
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("b.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nwork_source = \"shadow\"\n[policy]\nname = \"round-robin\"\n\
             [[replicas]]\nname = \"r0\"\naddress = \"{}\"\n",
            backends[0].address()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(BALANCER)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("work_source = \"shadow\" needs a [shadow] section"),
        "{err}"
    );
}

/// Sends `n` searches one at a time, each once nothing is in flight at the balancer.
fn one_at_a_time(b: &Balancer, n: usize) {
    for _ in 0..n {
        e2e::wait_until(e2e::LIMIT, "nothing in flight", || {
            b.replicas().iter().all(|r| r["in_flight"] == 0)
        });
        assert_eq!(b.search("alpha").status, 200);
    }
}

#[test]
fn backlog_reports_add_the_other_balancers_requests() {
    // b0's report says 40 searches are in flight there (other balancers'), b1's and b2's
    // only the one answered.
    let report = |n: u64| format!("endpoint-load-metrics: TEXT named_metrics.backlog={n}\r\n");
    let run = |report_ms: u64| -> (Vec<u64>, serde_json::Value) {
        let backends = [
            answering("b0", Box::leak(report(40).into_boxed_str())),
            answering("b1", Box::leak(report(1).into_boxed_str())),
            answering("b2", Box::leak(report(1).into_boxed_str())),
        ];
        let mut s = format!(
            "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"t\"\n\
             load = \"in-flight\"\nbacklog_reports_ms = {report_ms}\n\n\
             [policy]\nname = \"least-loaded\"\n"
        );
        s += &Backend::replica_sections(&backends);
        let bal = Balancer::start(BALANCER, &s);
        one_at_a_time(&bal, 30);
        let served = backends.iter().map(Backend::received).collect();
        (served, bal.replica("b0"))
    };
    // Own counts only: idle each time, least-loaded sends every query to b0 (ties to the
    // lowest index).
    let (served, b0) = run(0);
    assert_eq!(served, vec![30, 0, 0]);
    assert_eq!(b0["others_backlog"], 0);
    // With the reports: after b0's first answer, its 39 other requests keep it out.
    let (served, b0) = run(60_000);
    assert_eq!(
        served,
        vec![1, 29, 0],
        "b1 answers and reports only its own"
    );
    assert_eq!(b0["others_backlog"], 39, "{b0}");
}
