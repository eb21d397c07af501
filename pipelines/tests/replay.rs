//! `ballot replay` against a fake replica (`e2e::Backend`, keep-alive HTTP/1.1):
//! `/search` answers a small JSON (or a status the test chooses) and `/stats` serves
//! counters the test controls. Each test is bounded to seconds.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ballot, read_json, stderr, stdout};
use e2e::{wait_until, Backend, Reply};
use serde_json::Value;

/// What the fake replica does.
#[derive(Clone, Copy)]
struct Behavior {
    /// Every `fail_every`-th search (1-based) answers 503; 0 never.
    fail_every: u64,
    /// Bytes added to hit_bytes / miss_bytes by every search.
    hit_bytes: u64,
    miss_bytes: u64,
    /// Counters before the first search.
    base: u64,
    /// Service time of each search: the subject where it is set (a replica slower than
    /// the offered rate), not an order between requests.
    delay: Duration,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            fail_every: 0,
            hit_bytes: 30,
            miss_bytes: 10,
            base: 0,
            delay: Duration::ZERO,
        }
    }
}

/// A fake replica behaving as `b`.
fn serve(b: Behavior) -> Backend {
    let backend = Backend::with_handler("fake", move |r| {
        if r.is_search() {
            if b.fail_every > 0 && r.searches.is_multiple_of(b.fail_every) {
                Reply::Json(503, r#"{"error":"overloaded"}"#.to_owned())
            } else {
                Reply::Json(200, r#"{"doc_ids":[1,2,3],"total_hits":3}"#.to_owned())
            }
        } else if r.path() == "/stats" {
            let n = r.searches;
            let body = serde_json::json!({
                "queries": b.base + n,
                "lookups": b.base + 2 * n,
                "hits": b.base + n,
                "misses": b.base + n,
                "hit_bytes": b.base + b.hit_bytes * n,
                "miss_bytes": b.base + b.miss_bytes * n,
                "flash_bytes": b.base + b.miss_bytes * n,
                "cache_bytes": 777,
                "inflight": 0,
                "errors": 0,
                "replica": "fake",
            });
            Reply::Json(200, body.to_string())
        } else {
            Reply::Json(404, r#"{"error":"not found"}"#.to_owned())
        }
    });
    backend.set_delay(b.delay);
    backend
}

/// Small synthetic log, so generating it costs little (its test part has 4,000 queries).
const SMALL: [&str; 2] = ["--synth-queries", "20000"];

/// Runs `ballot replay --target TARGET FLAGS` on the small log with a JSON report; `flags`
/// are whitespace-separated (no value here holds a space).
fn replay(target: &str, flags: &str) -> (std::process::Output, Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let json_s = json.display().to_string();
    let mut all = vec!["replay"];
    all.extend_from_slice(&SMALL);
    all.extend_from_slice(&["--target", target]);
    all.extend(flags.split_whitespace());
    all.extend_from_slice(&["--json", &json_s]);
    let out = ballot(&all);
    let doc = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    (out, doc)
}

/// [`replay`] that must succeed: its JSON report.
fn ok_run(target: &str, flags: &str) -> Value {
    let (out, doc) = replay(target, flags);
    assert!(
        out.status.success(),
        "{flags} failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    assert!(!stderr(&out).contains("panicked"));
    doc.expect("the JSON report was written")
}

#[test]
fn closed_loop_counts_match_the_server() {
    let srv = serve(Behavior::default());
    let doc = ok_run(&srv.url(), "--concurrency 4 --queries 500");
    assert_eq!(srv.received(), 500);
    assert_eq!(doc["sent"], 500);
    assert_eq!(doc["ok"], 500);
    assert_eq!(doc["error_total"], 0);
    assert_eq!(doc["errors"], serde_json::json!({}));
    assert_eq!(doc["latency_ms"]["count"], 500);
    assert_eq!(doc["config"]["mode"], "closed");
    let lat = &doc["latency_ms"];
    let (p50, p99, max) = (
        lat["p50"].as_f64().unwrap(),
        lat["p99"].as_f64().unwrap(),
        lat["max"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{lat}");
    assert!(doc["throughput_qps"].as_f64().unwrap() > 0.0);
    // Every query is percent-encoded: no raw space or reserved byte in the request target.
    for p in srv.paths().iter() {
        let q = p
            .strip_prefix("/search?q=")
            .and_then(|r| r.strip_suffix("&k=10"))
            .unwrap_or_else(|| panic!("unexpected path {p}"));
        assert!(!q.is_empty());
        assert!(
            q.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"%-._~".contains(&c)),
            "{p}"
        );
    }
}

#[test]
fn open_loop_keeps_the_rate() {
    let srv = serve(Behavior::default());
    let started = Instant::now();
    let doc = ok_run(&srv.url(), "--rate 2000 --duration 1s");
    let seen = srv.received() as f64;
    assert!((1700.0..=2300.0).contains(&seen), "server saw {seen}");
    assert_eq!(doc["sent"].as_f64().unwrap(), seen);
    assert_eq!(doc["ok"].as_f64().unwrap(), seen);
    assert_eq!(doc["config"]["mode"], "open");
    assert!(doc["service_latency_ms"]["count"].as_u64().unwrap() > 0);
    let elapsed = doc["elapsed_s"].as_f64().unwrap();
    assert!((0.9..3.0).contains(&elapsed), "elapsed {elapsed}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn open_loop_over_fixed_connections_keeps_the_rate_on_that_many_connections() {
    // Each answer takes 20 ms, so 4 connections carry at most 200/s: at 100/s nobody
    // waits; at 400/s requests wait for a connection, and that wait counts in their
    // latency from the intended send time.
    let srv = serve(Behavior {
        delay: Duration::from_millis(20),
        ..Behavior::default()
    });
    let doc = ok_run(&srv.url(), "--rate 100 --duration 1s --connections 4");
    assert_eq!(doc["ok"], 100);
    assert_eq!(doc["config"]["connections"], 4);
    // The reachability check opens one connection of its own.
    let opened = srv.connections();
    assert!((4..=5).contains(&opened), "{opened} connections");
    let doc = ok_run(&srv.url(), "--rate 400 --duration 1s --connections 4");
    assert_eq!(doc["ok"], 400);
    let opened = srv.connections() - opened;
    assert!((4..=5).contains(&opened), "{opened} connections");
    let p50 = doc["latency_ms"]["p50"].as_f64().unwrap();
    let service_p50 = doc["service_latency_ms"]["p50"].as_f64().unwrap();
    assert!(
        p50 > service_p50 + 5.0,
        "waiting for a connection counts: p50 {p50} ms from the intended send, {service_p50} ms from the actual one"
    );
    let (out, _) = replay(&srv.url(), "--connections 4");
    assert!(
        !out.status.success() && stderr(&out).contains("--rate"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn http_errors_are_counted_by_status() {
    let srv = serve(Behavior {
        fail_every: 5,
        ..Behavior::default()
    });
    let doc = ok_run(&srv.url(), "--concurrency 2 --queries 200");
    assert_eq!(doc["errors"]["http_503"], 40);
    assert_eq!(doc["error_total"], 40);
    assert_eq!(doc["ok"], 160);
    assert_eq!(doc["latency_ms"]["count"], 160);
}

#[test]
fn intervals_and_failure_seconds_add_up_to_the_totals() {
    let srv = serve(Behavior {
        fail_every: 4,
        ..Behavior::default()
    });
    // Open loop, 2.5 s in intervals of 1 s: three intervals, the last one half full.
    let doc = ok_run(&srv.url(), "--rate 400 --duration 2500ms --interval 1s");
    let rows = doc["intervals"].as_array().expect("intervals");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let sum = |key: &str| rows.iter().map(|r| r[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("sent"), doc["sent"].as_u64().unwrap());
    assert_eq!(sum("ok"), doc["ok"].as_u64().unwrap());
    assert_eq!(sum("error_total"), doc["error_total"].as_u64().unwrap());
    assert_eq!(rows[0]["start_s"], 0.0);
    assert_eq!(rows[2]["start_s"], 2.0);
    assert_eq!(rows[0]["sent"], 400, "a whole second at 400/s");
    assert_eq!(rows[2]["sent"], 200, "half a second");
    for r in rows {
        assert_eq!(
            r["latency_ms"]["count"], r["ok"],
            "each interval's latencies are its answers: {r}"
        );
    }
    // Failures by send second: seconds 0, 1 and 2, summing to the total.
    let by_second = doc["failures_by_second"].as_object().expect("by second");
    let keys: Vec<&str> = by_second.keys().map(String::as_str).collect();
    assert_eq!(keys, ["0", "1", "2"]);
    let total: u64 = by_second.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, doc["error_total"].as_u64().unwrap());
    assert!(total > 0);
    assert!(doc["started_unix_ms"].as_u64().unwrap() > 1_700_000_000_000);

    // Closed loop: the intervals add up too; without --interval there are none.
    let doc = ok_run(&srv.url(), "--concurrency 2 --queries 200 --interval 1m");
    let rows = doc["intervals"].as_array().expect("intervals");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["sent"].as_u64(), rows[0]["ok"].as_u64()),
        (Some(200), Some(150))
    );
    assert_eq!(rows[0]["errors"]["http_503"], 50);
    let doc = ok_run(&srv.url(), "--queries 10");
    assert!(doc["intervals"].is_null());
}

#[test]
fn stats_deltas_give_the_miss_bytes_ratio() {
    let a = serve(Behavior {
        base: 1_000_000,
        ..Behavior::default()
    });
    let b = serve(Behavior {
        base: 5_000,
        hit_bytes: 0,
        miss_bytes: 0,
        ..Behavior::default()
    });
    let from = format!("{},{}", a.url(), b.url());
    let (out, doc) = replay(
        &a.url(),
        &format!("--concurrency 3 --queries 300 --stats-from {from}"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.unwrap();
    let s = &doc["stats"];
    // Deltas only: 30 hit bytes and 10 miss bytes per query on replica a, nothing on b.
    assert_eq!(s["hit_bytes"], 9000);
    assert_eq!(s["miss_bytes"], 3000);
    assert_eq!(s["flash_bytes"], 3000);
    assert_eq!(s["miss_bytes_ratio"], 0.25);
    assert_eq!(s["queries"], 300);
    assert_eq!(s["replicas"][0]["query_share"], 1.0);
    assert_eq!(s["replicas"][1]["query_share"], 0.0);
    assert_eq!(s["replicas"][0]["delta"]["cache_bytes"], 777);
    assert!(
        stdout(&out).contains("miss bytes ratio 0.2500"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn unreachable_target_fails_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let (out, doc) = replay(&url, "--queries 10");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("unreachable") && err.contains(&url), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(doc.is_none());
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn search_path_sends_the_query_to_that_endpoint() {
    // The fake records (and answers) every path under /search; the default would be
    // `/search?q=`.
    let srv = serve(Behavior::default());
    let doc = ok_run(
        &srv.url(),
        "--concurrency 2 --queries 20 --search-path /search/v2",
    );
    let paths = srv.paths();
    assert_eq!(paths.len(), 20);
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/search/v2?q=") && p.ends_with("&k=10")),
        "{paths:?}"
    );
    assert_eq!(doc["error_total"], 0);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let srv = serve(Behavior::default());
    let url = srv.url();
    for (target, flags, needle) in [
        ("localhost:80", "", "--target"),
        ("https://x:1", "", "only http://"),
        (&url, "--rate 0", "--rate"),
        (&url, "--rate fast", "--rate"),
        (&url, "--rate -5", "--rate"),
        (&url, "--concurrency 0", "--concurrency"),
        (&url, "--duration soon", "--duration"),
        (&url, "--stats-from nope", "--stats-from"),
        (&url, "--interval 0s", "--interval"),
        (&url, "--search-path api", "--search-path"),
        (&url, "--search-path /api?q=x", "--search-path"),
        (&url, "--search-path /a\u{7f}b", "--search-path"),
    ] {
        let (out, _) = replay(target, flags);
        let err = stderr(&out);
        let args = format!("--target {target} {flags}");
        assert_eq!(out.status.code(), Some(1), "{args}: {err}");
        assert!(err.contains(needle), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
    }
    assert_eq!(srv.received(), 0);
}

#[test]
fn ctrl_c_stops_and_still_reports() {
    let srv = serve(Behavior {
        delay: Duration::from_millis(20),
        ..Behavior::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let child = Command::new(env!("CARGO_BIN_EXE_ballot"))
        .args(["replay", SMALL[0], SMALL[1], "--target", &srv.url()])
        .args(["--concurrency", "4", "--json"])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let mut child = e2e::Running::new(child, "ballot replay");
    // The signal: requests flow (failing if the replay already ended); then interrupt.
    wait_until(Duration::from_secs(60), "20 searches", || {
        assert!(
            child.try_wait().is_none(),
            "the replay ended before 20 searches"
        );
        srv.received() >= 20
    });
    child.signal(libc::SIGINT);
    let status = child.wait_within(Duration::from_secs(60));
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(status.success(), "{}", read(&err_path));
    assert!(
        read(&out_path).contains("interrupted"),
        "{}",
        read(&out_path)
    );
    let doc = read_json(&json);
    assert_eq!(doc["interrupted"], true);
    let ok = doc["ok"].as_u64().unwrap();
    assert!((16..4000).contains(&ok), "ok {ok}");
    assert_eq!(doc["error_total"], 0);
}
