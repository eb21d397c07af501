//! Integration tests of the `replica` binary over loopback HTTP: an index is built in a
//! temporary directory with the library, the real binary is started on `127.0.0.1:0`
//! (`e2e::Server`: its port read from stdout, its stderr kept in a log), and e2e's HTTP/1.1
//! client talks to it. Every wait is bounded.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::probe::proc_status_kb;
use e2e::{output_within, wait_until, Conn, Response, LIMIT};
use eviction::{new_cache, EvictionKind};
use serde_json::Value;

const REPLICA: &str = env!("CARGO_BIN_EXE_replica");
const TIMEOUT: Duration = LIMIT;
const DOCS: u32 = 20_000;

/// A small index: 60 terms `t00..t59` of varied df, plus `common` in every other doc.
fn build(dir: &Path) -> PathBuf {
    let idx = dir.join("idx");
    let mut terms: Vec<(String, u64)> = (0..60)
        .map(|i| (format!("t{i:02}"), 50 + (i * 977) % 6000))
        .collect();
    terms.push(("common".into(), u64::from(DOCS / 2)));
    replica::build_index(&idx, DOCS, terms).expect("build index");
    idx
}

/// A running replica and the directory of its stderr log.
struct Server {
    srv: e2e::Server,
    _log_dir: tempfile::TempDir,
}

impl Server {
    fn start(index: &Path, extra: &[&str]) -> Server {
        let log_dir = tempfile::tempdir().unwrap();
        let srv = e2e::Server::start(
            Command::new(REPLICA)
                .arg("--index")
                .arg(index)
                .args(["--listen", "127.0.0.1:0", "--id", "r-test"])
                .args(extra),
            log_dir.path().join("replica.stderr"),
            "replica",
        );
        let before = srv.lines_before();
        assert!(
            before.iter().any(|l| l.starts_with("io mode: ")),
            "no io mode line in {before:?}"
        );
        Server {
            srv,
            _log_dir: log_dir,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.srv.addr()
    }

    fn get(&self, path: &str) -> (u16, String) {
        http_get(self.addr(), path)
    }

    fn json(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.get(path);
        let v = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path}: body is not JSON ({e}): {body}"));
        (status, v)
    }

    fn stats(&self) -> Value {
        let (status, v) = self.json("/stats");
        assert_eq!(status, 200);
        v
    }
}

/// One GET over a fresh connection: the status and the (de-chunked) body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = e2e::get(addr, path);
    (r.status, r.text())
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn same_query_twice_hits_and_unknown_terms_are_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let srv = Server::start(&idx, &["--cache-bytes", "10000000"]);
    assert_eq!(srv.get("/healthz").0, 200);

    let (status, first) = srv.json("/search?q=T03+common&k=5");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["terms"], serde_json::json!(["t03", "common"]));
    assert_eq!(first["replica"], "r-test");
    assert_eq!(u(&first["cache"], "misses"), 2);
    assert_eq!(u(&first["cache"], "hits"), 0);
    // The answer is the true intersection of the generated lists.
    let a: Vec<u32> = replica::doc_ids("t03", 50 + 3 * 977, DOCS).collect();
    let b: Vec<u32> = replica::doc_ids("common", DOCS / 2, DOCS).collect();
    let both: Vec<u32> = a
        .iter()
        .copied()
        .filter(|d| b.binary_search(d).is_ok())
        .collect();
    assert_eq!(u(&first, "total_hits"), both.len() as u64);
    let ids: Vec<u64> = first["doc_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    assert_eq!(
        ids,
        both[..5].iter().map(|&d| u64::from(d)).collect::<Vec<_>>()
    );

    let flash_before = u(&srv.stats(), "flash_bytes");
    let (status, second) = srv.json("/search?q=T03+common&k=5");
    assert_eq!(status, 200);
    assert_eq!(u(&second["cache"], "hits"), 2);
    assert_eq!(u(&second["cache"], "misses"), 0);
    assert_eq!(u(&second["cache"], "miss_bytes"), 0);
    assert_eq!(
        u(&second["cache"], "hit_bytes"),
        u(&first["cache"], "miss_bytes")
    );
    assert_eq!(second["total_hits"], first["total_hits"]);
    let stats = srv.stats();
    assert_eq!(
        u(&stats, "flash_bytes"),
        flash_before,
        "second query read flash"
    );
    assert_eq!(u(&stats, "queries"), 2);
    assert_eq!(u(&stats, "lookups"), 4);
    // Started without --eviction: the serving default, which `ballot train` trains for.
    assert_eq!(stats["eviction"], "sieve", "{stats}");
    for key in [
        "hits",
        "misses",
        "hit_bytes",
        "miss_bytes",
        "cache_bytes",
        "inflight",
        "errors",
    ] {
        assert!(stats.get(key).is_some(), "/stats lacks {key}: {stats}");
    }

    let (status, unknown) = srv.json("/search?q=zzzunknown+t03");
    assert_eq!(status, 200, "{unknown}");
    assert_eq!(u(&unknown, "total_hits"), 0);
    assert_eq!(unknown["doc_ids"], serde_json::json!([]));

    let (status, metrics) = srv.get("/metrics");
    assert_eq!(status, 200);
    for name in [
        "replica_queries_total",
        "replica_term_lookups_total",
        "replica_cache_hits_total",
        "replica_cache_misses_total",
        "replica_cache_hit_bytes_total",
        "replica_cache_miss_bytes_total",
        "replica_flash_bytes_read_total",
        "replica_flash_read_seconds_bucket",
        "replica_query_seconds_bucket",
        "replica_cache_bytes",
        "replica_inflight_queries",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }
}

#[test]
fn small_cache_evicts_like_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let dir = replica::index::open_directory(&idx).unwrap();
    let size = |t: &str| u64::from(dir.entry(dir.id(t).unwrap()).unwrap().len);
    let total: u64 = (0..60).map(|i| size(&format!("t{i:02}"))).sum();
    let capacity = total / 5;
    // A skewed sequence of one- and two-term queries.
    let mut rng = data::rng::Rng::new(11);
    let queries: Vec<Vec<String>> = (0..300)
        .map(|_| {
            let pick = |rng: &mut data::rng::Rng| {
                let r = rng.below(100);
                format!("t{:02}", if r < 60 { r % 6 } else { r % 60 })
            };
            let a = pick(&mut rng);
            let b = pick(&mut rng);
            if rng.below(3) == 0 && a != b {
                vec![a, b]
            } else {
                vec![a]
            }
        })
        .collect();
    for kind in EvictionKind::ALL {
        let srv = Server::start(
            &idx,
            &[
                "--cache-bytes",
                &capacity.to_string(),
                "--eviction",
                kind.name(),
            ],
        );
        let mut sim = new_cache(kind, capacity);
        let (mut hits, mut hit_bytes, mut miss_bytes) = (0u64, 0u64, 0u64);
        for q in &queries {
            for t in q {
                let id = dir.id(t).unwrap();
                if sim.access(id, size(t)) {
                    hits += 1;
                    hit_bytes += size(t);
                } else {
                    miss_bytes += size(t);
                }
            }
            let (status, v) = srv.json(&format!("/search?q={}", q.join("+")));
            assert_eq!(status, 200, "{v}");
        }
        let stats = srv.stats();
        let lookups: u64 = queries.iter().map(|q| q.len() as u64).sum();
        assert_eq!(u(&stats, "hits"), hits, "{kind}: {stats}");
        assert_eq!(u(&stats, "misses"), lookups - hits, "{kind}");
        assert_eq!(u(&stats, "hit_bytes"), hit_bytes, "{kind}");
        assert_eq!(u(&stats, "miss_bytes"), miss_bytes, "{kind}");
        assert_eq!(u(&stats, "flash_bytes"), miss_bytes, "{kind}");
        assert_eq!(u(&stats, "cache_bytes"), sim.used_bytes(), "{kind}");
        assert!(u(&stats, "cache_bytes") <= capacity);
        assert!(hits > 0 && hits < lookups, "{kind}: degenerate trace");
    }
}

#[test]
fn bad_input_gets_400_with_a_json_error() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let srv = Server::start(&idx, &["--cache-bytes", "1000000"]);
    let bad = |path: &str, needle: &str| {
        let (status, v) = srv.json(path);
        assert_eq!(status, 400, "{path}: {v}");
        let msg = v["error"].as_str().unwrap_or_else(|| panic!("{path}: {v}"));
        assert!(msg.contains(needle), "{path}: {msg:?} lacks {needle:?}");
    };
    bad("/search", "missing");
    bad("/search?k=3", "missing");
    bad("/search?q=", "empty");
    bad("/search?q=+++", "empty");
    bad(&format!("/search?q={}", "a".repeat(4097)), "bytes");
    let many: Vec<String> = (0..33).map(|i| format!("w{i}")).collect();
    bad("/search?q=t01%zz", "percent");
    bad("/search?q=t01%", "percent");
    bad("/search?q=t01&k=ten", "number");
    bad("/search?q=t01&k=-1", "number");
    bad("/search?q=t01&k=1001", "at most");
    // The boundaries are accepted.
    let (status, _) = srv.json(&format!("/search?q={}", many[..32].join("+")));
    assert_eq!(status, 200);
    let (status, _) = srv.json("/search?q=t01&k=1000");
    assert_eq!(status, 200);
    assert_eq!(u(&srv.stats(), "errors"), 10);
    // Not errors: past 32 distinct terms a query is its first 32 (as the balancer routes
    // it), and a query with no terms matches nothing.
    let (status, v) = srv.json(&format!("/search?q={}", many.join("+")));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["terms"].as_array().map(Vec::len), Some(32), "{v}");
    let (status, v) = srv.json("/search?q=-%2F.");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total_hits"], 0, "{v}");
    assert_eq!(u(&srv.stats(), "errors"), 10);
}

#[test]
fn corrupt_list_fails_its_query_only() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let dir = replica::index::open_directory(&idx).unwrap();
    let e = *dir.entry(dir.id("t07").unwrap()).unwrap();
    let path = idx.join("postings.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[e.offset as usize + e.len as usize / 2] ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();

    let srv = Server::start(&idx, &["--cache-bytes", "1000000"]);
    let (_, metrics) = srv.get("/metrics");
    assert!(
        metrics.contains("replica_corrupt_lists_total 0"),
        "{metrics}"
    );
    for _ in 0..2 {
        let (status, v) = srv.json("/search?q=t07+t08");
        assert_eq!(status, 503, "{v}");
        assert!(v["error"].as_str().unwrap().contains("corrupt"), "{v}");
    }
    let (status, v) = srv.json("/search?q=t08");
    assert_eq!(status, 200, "{v}");
    assert!(u(&v, "total_hits") > 0);
    assert_eq!(u(&srv.stats(), "corrupt_lists"), 2);
    let (_, metrics) = srv.get("/metrics");
    assert!(
        metrics.contains("replica_corrupt_lists_total 2"),
        "{metrics}"
    );
    assert_eq!(srv.get("/healthz").0, 200);
}

#[test]
fn missing_or_truncated_index_is_a_named_startup_error() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |index: &Path| {
        let out = output_within(
            Command::new(env!("CARGO_BIN_EXE_replica"))
                .arg("--index")
                .arg(index)
                .args(["--listen", "127.0.0.1:0", "--cache-bytes", "1000"]),
            TIMEOUT,
            "replica with a bad index",
        );
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&tmp.path().join("nope"));
    assert!(err.contains("manifest.json"), "{err}");

    let idx = build(tmp.path());
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(idx.join("postings.bin"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 1).unwrap();
    let err = run(&idx);
    assert!(
        err.contains("postings.bin") && err.contains("truncated"),
        "{err}"
    );

    let tmp2 = tempfile::tempdir().unwrap();
    let idx2 = build(tmp2.path());
    std::fs::remove_file(idx2.join("terms.bin")).unwrap();
    let err = run(&idx2);
    assert!(err.contains("terms.bin"), "{err}");
}

#[test]
fn overload_is_shed_and_sigterm_drains() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let srv = Server::start(
        &idx,
        &[
            "--cache-bytes",
            "1000000",
            "--max-inflight",
            "1",
            "--flash-latency-us",
            "600000",
        ],
    );
    let addr = srv.addr();
    let slow = std::thread::spawn(move || http_get(addr, "/search?q=t10"));
    // The signal: the slow search is admitted.
    wait_until(TIMEOUT, "the slow search admitted", || {
        u(&srv.stats(), "inflight") > 0
    });
    let (status, v) = srv.json("/search?q=t11");
    assert_eq!(status, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("overloaded"), "{v}");

    // SIGTERM while the slow search is in flight: it still completes.
    srv.srv.signal(libc::SIGTERM);
    assert_eq!(slow.join().unwrap().0, 200);
    let mut srv = srv;
    let status = srv.srv.wait_exit(TIMEOUT);
    assert!(status.success(), "{status:?}");
    let rest = srv.srv.lines_to_end();
    assert!(rest.iter().any(|l| l.contains("drained")), "{rest:?}");
    // New connections are refused once it is gone.
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

#[test]
fn concurrent_misses_on_one_term_read_flash_once() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let dir = replica::index::open_directory(&idx).unwrap();
    let bytes = u64::from(dir.entry(dir.id("t20").unwrap()).unwrap().len);
    // One second of flash latency, and all 8 requests written at once (every connection
    // open first): the 7 followers arrive while the leader's read is in flight however
    // busy the machine is.
    let srv = Server::start(
        &idx,
        &["--cache-bytes", "1000000", "--flash-latency-us", "1000000"],
    );
    let paths = vec!["/search?q=t20".to_owned(); 8];
    for (status, body) in burst(srv.addr(), &paths) {
        assert_eq!(status, 200, "{body}");
    }
    let stats = srv.stats();
    assert_eq!(u(&stats, "misses"), 1, "{stats}");
    assert_eq!(u(&stats, "hits") + u(&stats, "coalesced"), 7, "{stats}");
    assert!(u(&stats, "coalesced") > 0, "{stats}");
    assert_eq!(u(&stats, "flash_bytes"), bytes);
}

/// Sends `paths` at once (all connections open before any request is written) and returns
/// each response.
fn burst(addr: SocketAddr, paths: &[String]) -> Vec<(u16, String)> {
    let barrier = std::sync::Barrier::new(paths.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = paths
            .iter()
            .map(|path| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut c = Conn::open(addr, TIMEOUT);
                    barrier.wait();
                    let r = c.request("GET", path, &[], b"");
                    (r.status, r.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn bad_budget_flags_are_named_startup_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    for (flag, value) in [("--inflight-bytes", "0"), ("--inflight-wait-ms", "600000")] {
        let out = output_within(
            Command::new(env!("CARGO_BIN_EXE_replica"))
                .arg("--index")
                .arg(&idx)
                .args([
                    "--listen",
                    "127.0.0.1:0",
                    "--cache-bytes",
                    "1000",
                    flag,
                    value,
                ]),
            TIMEOUT,
            &format!("replica {flag} {value}"),
        );
        assert!(!out.status.success(), "{flag} {value} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{err}");
    }
}

#[test]
fn inflight_budget_sheds_beyond_it_and_bounds_memory() {
    // 40 lists of about 400 kB (df 400k of 4M docs: one-byte gaps, not dense).
    const BIG_DOCS: u32 = 4_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let idx = tmp.path().join("big");
    let terms = (0..40).map(|i| (format!("b{i:02}"), 400_000u64));
    replica::build_index(&idx, BIG_DOCS, terms).expect("build index");
    let dir = replica::index::open_directory(&idx).unwrap();
    let len = |i: usize| u64::from(dir.entry(dir.id(&format!("b{i:02}")).unwrap()).unwrap().len);
    let budget: u64 = 6 << 20;
    let cache: u64 = 1_000_000;
    let srv = Server::start(
        &idx,
        &[
            "--cache-bytes",
            &cache.to_string(),
            "--inflight-bytes",
            &budget.to_string(),
            "--inflight-wait-ms",
            "0",
            "--flash-latency-us",
            "100000",
        ],
    );
    let pid = srv.srv.pid();
    assert_eq!(srv.get("/healthz").0, 200);
    let rss_start = proc_status_kb(pid, "VmRSS") * 1024;

    // 16 lists need more than the whole budget: refused at once, whatever is in flight.
    let all: Vec<String> = (0..16).map(|i| format!("b{i:02}")).collect();
    let (status, v) = srv.json(&format!("/search?q={}", all.join("+")));
    assert_eq!(status, 503, "{v}");
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("more than the whole in-flight budget"),
        "{msg}"
    );

    // 32 queries of 6 distinct lists each (about 2.8 MB with the read buffer), all at once:
    // the budget holds two of them; unbudgeted they would hold about 77 MB.
    let queries: Vec<Vec<usize>> = (0..32)
        .map(|c| (0..6).map(|j| (c * 6 + j) % 40).collect())
        .collect();
    let need = |q: &[usize]| {
        q.iter().map(|&i| len(i)).sum::<u64>() + q.iter().map(|&i| len(i)).max().unwrap()
    };
    assert!(queries
        .iter()
        .all(|q| 2 * need(q) <= budget && 3 * need(q) > budget));
    let paths: Vec<String> = queries
        .iter()
        .map(|q| {
            let terms: Vec<String> = q.iter().map(|i| format!("b{i:02}")).collect();
            format!("/search?q={}&k=3", terms.join("+"))
        })
        .collect();
    let answers = burst(srv.addr(), &paths);
    let ok = answers.iter().filter(|a| a.0 == 200).count() as u64;
    let shed: Vec<&String> = answers
        .iter()
        .filter(|a| a.0 == 503)
        .map(|a| &a.1)
        .collect();
    assert_eq!(ok + shed.len() as u64, 32, "{answers:?}");
    assert!(ok >= 1, "nothing admitted");
    assert!(!shed.is_empty(), "nothing shed beyond the budget");
    for body in &shed {
        let v: Value = serde_json::from_str(body).expect("JSON error");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains("--inflight-bytes"), "{msg}");
    }

    let stats = srv.stats();
    assert_eq!(u(&stats, "inflight_bytes_limit"), budget, "{stats}");
    assert_eq!(u(&stats, "inflight_bytes"), 0, "{stats}");
    let peak = u(&stats, "inflight_bytes_peak");
    assert!(peak > 0 && peak <= budget, "{stats}");
    assert_eq!(
        u(&stats, "shed_over_budget"),
        shed.len() as u64 + 1,
        "{stats}"
    );
    assert_eq!(u(&stats, "queries"), ok, "{stats}");
    assert!(u(&stats, "cache_bytes") <= cache);
    // Resident memory grew by at most the cache, the budget and a fixed slack.
    let hwm = proc_status_kb(pid, "VmHWM") * 1024;
    let slack: u64 = 16 << 20;
    assert!(
        hwm <= rss_start + cache + budget + slack,
        "peak RSS {hwm} B from {rss_start} B at start"
    );
    let (_, metrics) = srv.get("/metrics");
    assert!(metrics.contains("replica_inflight_bytes_peak"), "{metrics}");
    assert!(
        metrics.contains(r#"replica_errors_total{kind="over_budget"}"#),
        "{metrics}"
    );
}

#[test]
fn blocking_threads_stay_within_the_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    // 100 slow searches at once, all admitted (default --max-inflight 256 and budget).
    let srv = Server::start(
        &idx,
        &["--cache-bytes", "1000000", "--flash-latency-us", "200000"],
    );
    let paths: Vec<String> = (0..100)
        .map(|i| format!("/search?q=t{:02}", i % 60))
        .collect();
    let answers = burst(srv.addr(), &paths);
    assert!(answers.iter().all(|a| a.0 == 200), "{answers:?}");
    // Idle blocking threads linger (tokio keeps them 10 s), so this counts all it started.
    let threads = proc_status_kb(srv.srv.pid(), "Threads");
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let cap = replica::http::MAX_SEARCH_THREADS + workers + 4;
    assert!(threads <= cap, "{threads} threads (cap {cap})");
    assert_eq!(u(&srv.stats(), "queries"), 100);
}

/// The `x-ballot-miss-bytes` header of a search, with its JSON body; the ORCA load report
/// (`endpoint-load-metrics`) must say the same bytes and a backlog.
fn search_with_miss_header(addr: SocketAddr, path: &str) -> (u64, Value) {
    let r: Response = e2e::get(addr, path);
    let header = r
        .header("x-ballot-miss-bytes")
        .unwrap_or_else(|| panic!("no x-ballot-miss-bytes header in {:?}", r.headers))
        .parse::<u64>()
        .expect("a byte count");
    let report = r
        .header(data::load_report::HEADER)
        .unwrap_or_else(|| panic!("no load report in {:?}", r.headers));
    let entry = |name| data::load_report::find(report.as_bytes(), name).unwrap();
    assert_eq!(
        entry(data::load_report::MISS_BYTES),
        Some(header as f64),
        "{report}"
    );
    // One search at a time: none other was in flight when the answer was written (this
    // one had left).
    assert_eq!(entry(data::load_report::BACKLOG), Some(0.0), "{report}");
    (header, r.json())
}

#[test]
fn searches_report_their_flash_bytes_in_a_header() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let srv = Server::start(&idx, &["--cache-bytes", "10000000"]);
    let (miss, first) = search_with_miss_header(srv.addr(), "/search?q=t05+common");
    assert!(miss > 0);
    assert_eq!(miss, u(&first["cache"], "miss_bytes"));
    let (miss, second) = search_with_miss_header(srv.addr(), "/search?q=t05+common");
    assert_eq!((miss, u(&second["cache"], "miss_bytes")), (0, 0));
}

#[test]
fn the_cache_hint_is_followed_within_its_bound_and_counted_when_not() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(tmp.path());
    let srv = Server::start(&idx, &["--cache-bytes", "10000000"]);
    let search = |within: &str| {
        let r = e2e::request(
            srv.addr(),
            "GET",
            "/search?q=t05+common",
            &[
                ("x-ballot-no-cache", "t05"),
                ("x-ballot-no-cache-within", within),
            ],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
    };
    // The table was trained for 1000-byte caches: this 10 MB cache caches as it likes and
    // counts the hint it did not follow.
    search("1000");
    let s = srv.stats();
    assert_eq!((u(&s, "hints_ignored"), u(&s, "uncached_reads")), (1, 0));
    let (_, cached) = search_with_miss_header(srv.addr(), "/search?q=t05");
    assert_eq!(u(&cached["cache"], "miss_bytes"), 0, "t05 was cached");
    // Within the bound (a fresh replica), `common` is cached and `t05` is read without
    // caching, each time.
    drop(srv);
    let srv = Server::start(&idx, &["--cache-bytes", "10000000"]);
    let search = |n: u64| {
        let r = e2e::request(
            srv.addr(),
            "GET",
            "/search?q=t05+common",
            &[
                ("x-ballot-no-cache", "t05"),
                ("x-ballot-no-cache-within", "10000000"),
            ],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let s = srv.stats();
        assert_eq!((u(&s, "uncached_reads"), u(&s, "hints_ignored")), (n, 0));
    };
    search(1);
    search(2);
    let (miss, _) = search_with_miss_header(srv.addr(), "/search?q=common");
    assert_eq!(miss, 0, "common was cached");
}
