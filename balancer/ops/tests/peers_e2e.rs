//! End-to-end tests of the peers' policies in the HTTP balancer (issue 48): a real
//! `balancer` process in front of `e2e::Backend`s. `ars` and `prequal` must learn each replica's speed
//! from its answers (the response time it measures, the service time and queue of the ORCA
//! report) and send the load to the fast replica; `cache-aware` must send a query back to
//! the replica whose shadow cache holds its postings, and refuse to start without shadow
//! caches; `stable-hash` must pin a query to one replica.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use data::sizes::SizeTable;
use e2e::{Backend, Balancer, Reply};

const BALANCER: &str = env!("CARGO_BIN_EXE_balancer");

/// A backend answering every search after `delay` with an ORCA report of `service_ms`.
fn backend(name: &str, delay: Duration, service_ms: f64) -> Backend {
    let b = Backend::with_handler(name, move |_| {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\
             endpoint-load-metrics: TEXT request_cost.service_ms={service_ms}, \
             named_metrics.backlog=0\r\n\r\n"
        );
        Reply::raw(&[format!("{head}ok").as_bytes()], false)
    });
    b.set_delay(delay);
    b
}

/// A balancer with `[policy]` lines `policy` and then `tail`, over `backends`, naming the
/// replica of each answer.
fn start(backends: &[Backend], policy: &str, tail: &str) -> Balancer {
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"t\"\n\
         routing_headers = true\n[health]\ninterval_ms = 100\ntimeout_ms = 500\n\n\
         [policy]\n{policy}\n{tail}\n"
    );
    s += &Backend::replica_sections(backends);
    Balancer::start(BALANCER, &s)
}

/// Sends `q` `n` times, one after another; counts the answers by replica.
fn spread(b: &Balancer, q: &str, n: usize) -> HashMap<String, usize> {
    let mut by = HashMap::new();
    for _ in 0..n {
        let r = b.search(q);
        assert_eq!(r.status, 200, "{q}: {}", r.text());
        *by.entry(r.headers["x-ballot-replica"].clone()).or_default() += 1;
    }
    by
}

#[test]
fn ars_and_prequal_learn_the_slow_replica_from_its_answers_and_avoid_it() {
    for policy in ["ars", "prequal"] {
        // One replica answers in 40 ms and reports 40 ms of service, the other at once.
        let backends = [
            backend("slow", Duration::from_millis(40), 40.0),
            backend("fast", Duration::ZERO, 0.5),
        ];
        let b = start(&backends, &format!("name = \"{policy}\""), "");
        let by = spread(&b, "anything", 40);
        // ars tries each replica once (no statistics sort first), then the fast one ranks
        // lower; prequal takes the lower latency among its cold probes (both, here).
        let slow = by.get("slow").copied().unwrap_or(0);
        assert!(
            slow <= 8,
            "{policy} kept sending to the slow replica: {by:?}"
        );
        assert_eq!(by.values().sum::<usize>(), 40, "{by:?}");
    }
}

/// Starts a balancer with `config`, which it must refuse: its error output (the test
/// fails if it is still serving after 10 s).
fn refused(config: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("balancer.toml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(BALANCER)
        .arg("--config")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the balancer accepted the config:\n{config}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{config}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sizes `alpha` and `beta` 2,000 bytes each, in `dir`; the `[policy]` sizes line.
fn sizes(dir: &Path) -> String {
    let path = dir.join("sizes.parquet");
    SizeTable::from_pairs([("alpha".to_owned(), 2_000), ("beta".to_owned(), 2_000)])
        .write_parquet(&path)
        .unwrap();
    format!("sizes = \"{}\"", path.display())
}

#[test]
fn cache_aware_returns_a_query_to_the_replica_that_cached_it() {
    let tmp = tempfile::tempdir().unwrap();
    let backends = [
        backend("r0", Duration::ZERO, 1.0),
        backend("r1", Duration::ZERO, 1.0),
        backend("r2", Duration::ZERO, 1.0),
    ];
    let policy = format!("name = \"cache-aware\"\n{}", sizes(tmp.path()));
    // Room for one list per replica: each replica caches the last term sent to it.
    let b = start(&backends, &policy, "[shadow]\ncache_bytes = 2000\n");
    // The first `alpha` goes to the least loaded replica; every later one follows its
    // cached list (loads stay balanced: one request at a time).
    let alpha = spread(&b, "alpha", 10);
    assert_eq!(alpha.len(), 1, "alpha followed its cache: {alpha:?}");
    let beta = spread(&b, "beta", 10);
    assert_eq!(beta.len(), 1, "beta followed its cache: {beta:?}");
    let again = spread(&b, "alpha", 5);
    assert_eq!(
        again,
        alpha.keys().map(|k| (k.clone(), 5)).collect(),
        "{again:?}"
    );
}

#[test]
fn cache_aware_needs_shadow_caches_and_peer_parameters_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let backends = [backend("r0", Duration::ZERO, 1.0)];
    let policy = format!("name = \"cache-aware\"\n{}", sizes(tmp.path()));
    let err = refused(&format!(
        "listen = \"127.0.0.1:0\"\n[policy]\n{policy}\n[[replicas]]\nname = \"r0\"\n\
         address = \"{}\"\n",
        backends[0].address()
    ));
    assert!(err.contains("needs a [shadow] section"), "{err}");
    let err = refused(&format!(
        "listen = \"127.0.0.1:0\"\n[policy]\nname = \"prequal\"\n[policy.peers]\n\
         q_rif = 1.5\n[[replicas]]\nname = \"r0\"\naddress = \"{}\"\n",
        backends[0].address()
    ));
    assert!(err.contains("q_rif"), "{err}");
}

#[test]
fn stable_hash_pins_each_query_to_one_replica() {
    let backends = [
        backend("r0", Duration::ZERO, 1.0),
        backend("r1", Duration::ZERO, 1.0),
        backend("r2", Duration::ZERO, 1.0),
    ];
    let b = start(&backends, "name = \"stable-hash\"", "");
    let mut homes = std::collections::HashSet::new();
    for q in ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"] {
        let by = spread(&b, q, 4);
        assert_eq!(by.len(), 1, "{q}: {by:?}");
        homes.extend(by.into_keys());
    }
    assert!(
        homes.len() > 1,
        "six queries all hashed to one replica: {homes:?}"
    );
}
