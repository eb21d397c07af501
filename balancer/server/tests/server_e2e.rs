//! End-to-end tests of the `balancer` binary: real processes on loopback, with minimal
//! HTTP/1.1 backends written here (std threads) that answer `/search` and `/healthz` and
//! can be killed and restarted. Every load is bounded (a few hundred requests) and every
//! wait has a deadline.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use data::table::{TableRow, VotingTable};
use e2e::{output_within, prometheus_sum, start_listening, wait_until, Running};

const TOKEN: &str = "s3cret";

// ---------------------------------------------------------------- backends

/// A minimal keep-alive HTTP/1.1 backend.
struct Backend {
    name: String,
    port: u16,
    hits: Arc<AtomicU64>,
    /// Connections that carried at least one search (health checks left out).
    search_conns: Arc<AtomicU64>,
    /// Milliseconds every request waits before its answer (0: none; a hung replica).
    stall: Arc<AtomicU64>,
    /// Answers every search with 503, as a replica past its `--max-inflight` does.
    shed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<thread::JoinHandle<()>>,
}

fn serve_conn(
    stream: TcpStream,
    name: String,
    hits: Arc<AtomicU64>,
    search_conns: Arc<AtomicU64>,
    stall: Arc<AtomicU64>,
    shed: Arc<AtomicBool>,
) {
    let mut searched = false;
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
        }
        if target.starts_with("/search") && !std::mem::replace(&mut searched, true) {
            search_conns.fetch_add(1, Ordering::Relaxed);
        }
        let ms = stall.load(Ordering::Relaxed);
        if ms > 0 {
            thread::sleep(Duration::from_millis(ms));
        }
        let (status, body) = if target == "/healthz" {
            ("200 OK", "ok".to_owned())
        } else if target.starts_with("/search") && shed.load(Ordering::Relaxed) {
            (
                "503 Service Unavailable",
                "{\"error\":\"overloaded\"}".to_owned(),
            )
        } else if target.starts_with("/search") {
            hits.fetch_add(1, Ordering::Relaxed);
            ("200 OK", format!("{name} {target}"))
        } else {
            ("404 Not Found", "nope".to_owned())
        };
        let resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

impl Backend {
    fn start(name: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let port = listener.local_addr().expect("addr").port();
        let mut b = Backend {
            name: name.to_owned(),
            port,
            hits: Arc::new(AtomicU64::new(0)),
            search_conns: Arc::new(AtomicU64::new(0)),
            stall: Arc::new(AtomicU64::new(0)),
            shed: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            conns: Arc::new(Mutex::new(Vec::new())),
            accept: None,
        };
        b.run(listener);
        b
    }

    fn run(&mut self, listener: TcpListener) {
        self.stop = Arc::new(AtomicBool::new(false));
        let (stop, conns, hits, search_conns, name, stall, shed) = (
            Arc::clone(&self.stop),
            Arc::clone(&self.conns),
            Arc::clone(&self.hits),
            Arc::clone(&self.search_conns),
            self.name.clone(),
            Arc::clone(&self.stall),
            Arc::clone(&self.shed),
        );
        self.accept = Some(thread::spawn(move || {
            for s in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                if let Ok(c) = s.try_clone() {
                    conns.lock().unwrap().push(c);
                }
                let (name, hits, search_conns, stall, shed) = (
                    name.clone(),
                    Arc::clone(&hits),
                    Arc::clone(&search_conns),
                    Arc::clone(&stall),
                    Arc::clone(&shed),
                );
                thread::spawn(move || serve_conn(s, name, hits, search_conns, stall, shed));
            }
        }));
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops accepting and closes every open connection (like a crashed process).
    fn kill(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(h) = self.accept.take() {
            h.join().unwrap();
        }
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Listens on the same port again.
    fn restart(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", self.port)) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("cannot rebind {}: {e}", self.port),
            }
        };
        self.run(listener);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.kill();
        }
    }
}

// ---------------------------------------------------------------- balancer process

struct Balancer {
    child: Running,
    addr: SocketAddr,
    admin: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.child.kill();
        if thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("balancer.stderr"));
            eprintln!("balancer stderr:\n{}", log.unwrap_or_default());
        }
    }
}

fn config(backends: &[&Backend], policy: &str, extra: &str) -> String {
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         request_timeout_ms = 500\ndeadline_ms = 3000\nretries = 2\nmax_query_bytes = 64\n\
         routing_headers = true\n{extra}\n\
         [health]\ninterval_ms = 100\ntimeout_ms = 200\nfall = 2\nrise = 2\n\n[policy]\n{policy}\n"
    );
    for b in backends {
        s += &format!(
            "\n[[replicas]]\nname = \"{}\"\naddress = \"{}\"\n",
            b.name,
            b.address()
        );
    }
    s
}

fn spawn_balancer(dir: tempfile::TempDir, config_text: &str) -> Balancer {
    spawn_balancer_with(dir, config_text, &[])
}

/// [`spawn_balancer`] with extra command-line arguments.
fn spawn_balancer_with(dir: tempfile::TempDir, config_text: &str, args: &[&str]) -> Balancer {
    let path = dir.path().join("balancer.toml");
    std::fs::write(&path, config_text).unwrap();
    // Both readiness lines within a deadline (`listening on`, then `admin on`); the rest
    // of stdout stays drained by `start_listening`'s reader.
    let (child, addr, lines) = start_listening(
        Command::new(env!("CARGO_BIN_EXE_balancer"))
            .arg("--config")
            .arg(&path)
            .args(args),
        &dir.path().join("balancer.stderr"),
        LIMIT,
        "balancer",
    );
    let admin = lines
        .recv_timeout(LIMIT)
        .ok()
        .and_then(|l| l.strip_prefix("admin on ")?.parse().ok())
        .expect("the balancer prints `admin on ADDR` after `listening on`");
    thread::spawn(move || for _ in lines {});
    Balancer {
        child,
        addr: addr.parse().expect("listening address"),
        admin,
        dir,
    }
}

// ---------------------------------------------------------------- HTTP client

struct Resp {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += &format!("Content-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn get(addr: SocketAddr, target: &str) -> Resp {
    request(addr, "GET", target, &[], b"")
}

fn admin(b: &Balancer, method: &str, target: &str, body: &[u8]) -> Resp {
    let auth = format!("Bearer {TOKEN}");
    request(b.admin, method, target, &[("Authorization", &auth)], body)
}

/// The sum of every series of metric `name` (None when it has no series).
fn metric(b: &Balancer, name: &str) -> Option<f64> {
    prometheus_sum(&get(b.admin, "/metrics").body, name)
}

fn replica_state(b: &Balancer, name: &str) -> serde_json::Value {
    let r = admin(b, "GET", "/admin/replicas", b"");
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// How long a test waits for something that should happen within a second: only a hang
/// guard, generous for a busy machine. What is checked is counted (checks, queries), not
/// timed.
const LIMIT: Duration = Duration::from_secs(30);

/// Health checks the balancer has recorded for replica `name` (its health checker's clock).
fn checks(b: &Balancer, name: &str) -> u64 {
    replica_state(b, name)["checks"]
        .as_u64()
        .unwrap_or_else(|| panic!("no checks count for {name}"))
}

/// Waits (within [`LIMIT`]) until replica `name` is `healthy` (or not) and returns the
/// check count at which its health changed.
fn wait_health(b: &Balancer, name: &str, healthy: bool) -> u64 {
    let what = format!("{name} {}", if healthy { "re-admitted" } else { "ejected" });
    let took = wait_until(LIMIT, &what, || {
        replica_state(b, name)["healthy"] == healthy
    });
    let at = replica_state(b, name)["health_changed_at_check"]
        .as_u64()
        .unwrap_or_else(|| panic!("no health_changed_at_check for {name}"));
    eprintln!("{what} after {took:?}, at check {at}");
    at
}

/// `threads` clients sending `per_thread` queries each; returns the non-200 responses.
fn load(addr: SocketAddr, threads: usize, per_thread: usize) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                thread::spawn(move || {
                    let mut bad = Vec::new();
                    for i in 0..per_thread {
                        let r = get(
                            addr,
                            &format!("/search?q=term{}+word{}", (i * 7 + t) % 50, i % 13),
                        );
                        if r.status != 200 {
                            bad.push(format!("{} {}", r.status, r.body));
                        }
                        thread::sleep(Duration::from_millis(2));
                    }
                    bad
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

fn table(replicas: u16, rows: &[(&str, u16, f32)]) -> VotingTable {
    VotingTable::new(
        replicas,
        rows.iter()
            .map(|&(t, r, w)| TableRow {
                term: t.to_owned(),
                replica: r,
                weight: w,
            })
            .collect(),
        BTreeMap::new(),
    )
    .unwrap()
}

fn write_table(dir: &Path, name: &str, t: &VotingTable) -> PathBuf {
    let p = dir.join(name);
    t.write_parquet(&p).unwrap();
    p
}

/// A Parquet table whose second row has a NaN weight (written without validation).
fn write_nan_table(path: &Path) {
    use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray, UInt16Array};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    let schema = Arc::new(Schema::new(vec![
        Field::new("term", DataType::Utf8, false),
        Field::new("replica", DataType::UInt16, false),
        Field::new("weight", DataType::Float32, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["alpha", "beta"])),
        Arc::new(UInt16Array::from(vec![0u16, 1])),
        Arc::new(Float32Array::from(vec![1.0f32, f32::NAN])),
    ];
    let batch = RecordBatch::try_new(Arc::clone(&schema), cols).unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![
            KeyValue::new("ballot.replicas".into(), "3".to_owned()),
            KeyValue::new("ballot.format_version".into(), "1".to_owned()),
        ]))
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn three() -> Vec<Backend> {
    ["b0", "b1", "b2"]
        .iter()
        .map(|n| Backend::start(n))
        .collect()
}

// ---------------------------------------------------------------- tests

#[test]
fn killing_a_backend_under_load_fails_no_request_and_it_comes_back() {
    let mut bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let cfg = config(&refs, "name = \"term-vote\"", "");
    let b = spawn_balancer(tempfile::tempdir().unwrap(), &cfg);

    let running = load(b.addr, 4, 150);
    // Kill b1 once it has served traffic, while the load is still running (readiness
    // signals, not sleeps: on a busy machine the load takes longer to start).
    wait_until(LIMIT, "b1 serving 20 queries", || {
        assert!(
            !running.is_finished(),
            "the load ended before b1 had traffic"
        );
        bs[1].hits.load(Ordering::Relaxed) >= 20
    });
    assert!(!running.is_finished(), "the kill must land during the load");
    let checks_at_kill = checks(&b, "b1");
    bs[1].kill();
    // At once by passive ejection (a failed request), or after fall = 2 checks.
    let ejected_at = wait_health(&b, "b1", false);
    assert!(
        ejected_at <= checks_at_kill + 3,
        "b1 ejected at check {ejected_at}, more than fall + 1 checks after the kill at {checks_at_kill}"
    );
    let failed = running.join().unwrap();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(metric(&b, "ballot_ejections_total").unwrap_or(0.0) >= 1.0);
    for _ in 0..20 {
        let r = get(b.addr, "/search?q=term3+word4");
        assert_eq!(r.status, 200, "{}", r.body);
        assert_ne!(r.headers["x-ballot-replica"], "b1");
    }
    let hits_while_down = bs[1].hits.load(Ordering::Relaxed);

    bs[1].restart();
    let checks_at_restart = checks(&b, "b1");
    let back_at = wait_health(&b, "b1", true);
    // rise = 2 passes, plus the check that may have been failing at the restart.
    assert!(
        back_at <= checks_at_restart + 3,
        "b1 re-admitted at check {back_at}, more than rise + 1 after the restart at {checks_at_restart}"
    );
    let failed = load(b.addr, 2, 100).join().unwrap();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(
        bs[1].hits.load(Ordering::Relaxed) > hits_while_down,
        "b1 gets queries again"
    );
}

#[test]
fn a_hung_backend_times_out_and_its_queries_fail_over() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let b = spawn_balancer(
        tempfile::tempdir().unwrap(),
        &config(&refs, "name = \"rj-ch\"", ""),
    );
    bs[1].stall.store(2000, Ordering::Relaxed);
    let start = Instant::now();
    let failed = load(b.addr, 3, 40).join().unwrap();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert_eq!(replica_state(&b, "b1")["healthy"], false);
    assert!(metric(&b, "ballot_retries_total").unwrap_or(0.0) >= 1.0);
    // Each timed-out attempt costs request_timeout_ms (500 ms), not the 2 s stall.
    assert!(start.elapsed() < Duration::from_secs(20));
    let r = get(b.addr, "/search?q=after+the+stall");
    assert_ne!(r.headers["x-ballot-replica"], "b1");
    bs[1].stall.store(0, Ordering::Relaxed);
    wait_health(&b, "b1", true);
}

#[test]
fn connections_to_a_replica_never_outnumber_its_requests_in_flight() {
    // Four workers share the client port, and the kernel spreads each round's 16 new
    // client connections over them differently. A worker whose own idle queue runs short
    // takes another worker's idle connection before it opens one, so the replica sees at
    // most 16 connections however the rounds fall (soak: descriptors flat after bursts).
    const CLIENTS: usize = 16;
    const ROUNDS: usize = 6;
    let backend = Backend::start("b0");
    backend.stall.store(100, Ordering::Relaxed);
    let b = spawn_balancer_with(
        tempfile::tempdir().unwrap(),
        &config(&[&backend], "name = \"round-robin\"", ""),
        &["--workers", "4"],
    );
    for round in 0..ROUNDS {
        let start = Arc::new(std::sync::Barrier::new(CLIENTS));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (start, addr) = (Arc::clone(&start), b.addr);
                thread::spawn(move || {
                    start.wait();
                    get(addr, &format!("/search?q=round{round}+client{c}")).status
                })
            })
            .collect();
        for c in clients {
            assert_eq!(c.join().unwrap(), 200);
        }
        // Every connection is back in its queue before the next round starts.
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        backend.hits.load(Ordering::Relaxed),
        (CLIENTS * ROUNDS) as u64
    );
    let opened = backend.search_conns.load(Ordering::Relaxed);
    assert!(
        (1..=CLIENTS as u64).contains(&opened),
        "{opened} connections carried searches, for at most {CLIENTS} in flight"
    );
}

#[test]
fn a_shedding_backend_is_retried_elsewhere_and_stays_in() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let b = spawn_balancer(
        tempfile::tempdir().unwrap(),
        &config(&refs, "name = \"round-robin\"", ""),
    );
    bs[1].shed.store(true, Ordering::Relaxed);
    for i in 0..30 {
        let r = get(b.addr, &format!("/search?q=shed+{i}"));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_ne!(r.headers["x-ballot-replica"], "b1");
    }
    // Round-robin sent about a third of the 30 queries to b1 first: each was shed, then
    // retried on another replica, and b1 was never ejected (it is alive, only full).
    let shed = metric(&b, "ballot_upstream_shed_total").unwrap_or(0.0);
    assert!(shed >= 5.0, "only {shed} sheds counted");
    assert!(metric(&b, "ballot_retries_total").unwrap_or(0.0) >= shed);
    assert_eq!(replica_state(&b, "b1")["healthy"], true);
    assert_eq!(bs[1].hits.load(Ordering::Relaxed), 0);
    // When every replica sheds, the client gets the last 503.
    for x in &bs {
        x.shed.store(true, Ordering::Relaxed);
    }
    let r = get(b.addr, "/search?q=all+full");
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("overloaded"), "{}", r.body);
}

#[test]
fn health_checks_eject_an_idle_dead_backend_within_fall_checks() {
    let mut bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let b = spawn_balancer(
        tempfile::tempdir().unwrap(),
        &config(&refs, "name = \"least-loaded\"", ""),
    );
    // The checks are running (two passed) before the kill.
    wait_until(LIMIT, "two checks of b2", || checks(&b, "b2") >= 2);
    let checks_at_kill = checks(&b, "b2");
    bs[2].kill();
    // No traffic: only the checks (fall 2) can see it. Counted in checks, not seconds:
    // the check in progress at the kill may still pass, then two fail.
    let ejected_at = wait_health(&b, "b2", false);
    assert!(
        (checks_at_kill + 2..=checks_at_kill + 3).contains(&ejected_at),
        "b2 ejected at check {ejected_at}; the kill was at {checks_at_kill} and fall is 2"
    );
    for _ in 0..20 {
        let r = get(b.addr, "/search?q=x");
        assert_eq!(r.status, 200);
        assert_ne!(r.headers["x-ballot-replica"], "b2");
    }
    bs[2].restart();
    wait_health(&b, "b2", true);
}

#[test]
fn a_reloaded_table_ramps_in_under_load_without_errors() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let t1 = write_table(dir.path(), "t1.parquet", &table(3, &[("alpha", 0, 1.0)]));
    let t2 = write_table(dir.path(), "t2.parquet", &table(3, &[("alpha", 2, 1.0)]));
    let cfg = config(
        &refs,
        &format!("name = \"table\"\ntable = \"{}\"", t1.display()),
        // A bound that never binds (eps = 10: a replica may carry 11 times the mean), so
        // alpha goes where the table in force sends it whatever the load queries (which
        // have no votes) left behind. With eps 0.05 one CI run saw alpha on b2 at the end,
        // with no ejection logged: the bound moved it, not health.
        &format!(
            "eps = 10.0\nramp_queries = 400\ntables_dir = \"{}\"",
            dir.path().display()
        ),
    );
    let b = spawn_balancer(dir, &cfg);
    let alpha = get(b.addr, "/search?q=alpha");
    assert_eq!(alpha.headers["x-ballot-replica"], "b0");
    assert_eq!(alpha.headers["x-ballot-reason"], "vote");
    assert!(
        alpha.body.starts_with("b0 /search?q=alpha"),
        "{}",
        alpha.body
    );
    assert_eq!(metric(&b, "ballot_table_version"), Some(1.0));

    // The ramp counts routed queries: 600 queries under load carry it through its 400.
    let body = format!("{{\"path\": \"{}\"}}", t2.display());
    let r = admin(&b, "POST", "/admin/table", body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let progress = |b: &Balancer| {
        let t: serde_json::Value =
            serde_json::from_str(&admin(b, "GET", "/admin/table", b"").body).unwrap();
        (
            t["version"].as_u64().unwrap(),
            t["ramp_progress"].as_f64().unwrap(),
        )
    };
    assert_eq!(progress(&b), (2, 0.0));
    let running = load(b.addr, 3, 200);
    let failed = running.join().unwrap();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert_eq!(progress(&b), (2, 1.0));
    assert_eq!(
        get(b.addr, "/search?q=alpha").headers["x-ballot-replica"],
        "b2"
    );

    // SIGHUP re-reads the configured path (t1); the new ramp moves with the queries sent,
    // exactly: 100 of its 400 queries is progress 0.25, and alpha is back on b0 once done.
    let pid = b.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    wait_until(LIMIT, "SIGHUP reload", || progress(&b).0 == 3);
    assert_eq!(progress(&b), (3, 0.0));
    for _ in 0..100 {
        assert_eq!(get(b.addr, "/search?q=beta").status, 200);
    }
    assert_eq!(progress(&b), (3, 0.25));
    for _ in 0..300 {
        assert_eq!(get(b.addr, "/search?q=beta").status, 200);
    }
    assert_eq!(progress(&b), (3, 1.0));
    let alpha = get(b.addr, "/search?q=alpha");
    assert_eq!(
        (
            alpha.headers["x-ballot-replica"].as_str(),
            alpha.headers["x-ballot-reason"].as_str()
        ),
        ("b0", "vote")
    );
}

#[test]
fn answers_name_no_replica_unless_routing_headers_are_on() {
    let backends = three();
    let refs: Vec<&Backend> = backends.iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&refs, "name = \"round-robin\"", "").replace("routing_headers = true\n", "");
    let b = spawn_balancer(dir, &cfg);
    let r = get(b.addr, "/search?q=alpha");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("/search?q=alpha"), "{}", r.body);
    assert!(r.headers.contains_key("x-request-id"), "{:?}", r.headers);
    for name in ["x-ballot-replica", "x-ballot-reason"] {
        assert!(!r.headers.contains_key(name), "{name}: {:?}", r.headers);
    }
}

#[test]
fn invalid_tables_are_rejected_and_the_old_one_keeps_serving() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let t1 = write_table(dir.path(), "t1.parquet", &table(3, &[("alpha", 1, 1.0)]));
    let wrong_r = write_table(dir.path(), "t4.parquet", &table(4, &[("alpha", 3, 1.0)]));
    let nan = dir.path().join("nan.parquet");
    write_nan_table(&nan);
    let cfg = config(
        &refs,
        &format!("name = \"table\"\ntable = \"{}\"", t1.display()),
        &format!(
            // One query repeated: under the table's default work bound it would overflow
            // after the first; these checks are about which table answers, not the bound.
            "ramp_queries = 0\nload = \"in-flight\"\ntables_dir = \"{}\"",
            dir.path().display()
        ),
    );
    let b = spawn_balancer(dir, &cfg);
    let path_body = |p: &Path| format!("{{\"path\": \"{}\"}}", p.display()).into_bytes();
    // By path, every invalid table gets the same answer (no file-existence oracle); an
    // upload says what is wrong.
    let same = "not a valid voting table in tables_dir";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("wrong replica count", path_body(&wrong_r), same),
        (
            "wrong replica count uploaded",
            std::fs::read(&wrong_r).unwrap(),
            "replica",
        ),
        ("NaN weight", path_body(&nan), same),
        ("NaN weight uploaded", std::fs::read(&nan).unwrap(), "row 1"),
        (
            "not Parquet",
            b"this is not a parquet file".to_vec(),
            "Parquet",
        ),
        (
            "missing file",
            path_body(Path::new("/nonexistent/t.parquet")),
            same,
        ),
        ("bad JSON", b"{\"paht\": 1}".to_vec(), "path"),
    ];
    let n = cases.len() as f64;
    for (what, body, want) in cases {
        let r = admin(&b, "POST", "/admin/table", &body);
        assert!(
            r.status == 422 || r.status == 400,
            "{what}: {} {}",
            r.status,
            r.body
        );
        let v: serde_json::Value = serde_json::from_str(&r.body).expect("JSON error");
        let err = v["error"].as_str().unwrap_or_default();
        assert!(err.contains(want), "{what}: {err}");
        assert_eq!(
            get(b.addr, "/search?q=alpha").headers["x-ballot-replica"],
            "b1",
            "{what}"
        );
    }
    assert_eq!(metric(&b, "ballot_table_reload_failures_total"), Some(n));
    assert_eq!(metric(&b, "ballot_table_version"), Some(1.0));
}

#[test]
fn table_votes_fall_to_the_next_ranked_replica_when_drained_or_removed() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let t = write_table(
        dir.path(),
        "t.parquet",
        &table(3, &[("alpha", 1, 2.0), ("alpha", 2, 1.0)]),
    );
    let cfg = config(
        &refs,
        &format!("name = \"table\"\ntable = \"{}\"", t.display()),
        // Votes, not the bound or the slow start of a re-enabled replica, are under test.
        "load = \"in-flight\"\nslow_start_queries = 0",
    );
    let b = spawn_balancer(dir, &cfg);
    let route = || {
        let r = get(b.addr, "/search?q=alpha");
        assert_eq!(r.status, 200, "{}", r.body);
        (
            r.headers["x-ballot-replica"].clone(),
            r.headers["x-ballot-reason"].clone(),
        )
    };
    assert_eq!(route(), ("b1".into(), "vote".into()));
    assert_eq!(
        admin(&b, "POST", "/admin/replicas/b1/drain", b"").status,
        200
    );
    assert_eq!(route(), ("b2".into(), "vote".into()));
    assert_eq!(
        admin(&b, "POST", "/admin/replicas/b1/enable", b"").status,
        200
    );
    assert_eq!(route().0, "b1");

    // Removing b1 empties slot 1; a 4th replica cannot join a 3-replica table.
    assert_eq!(admin(&b, "DELETE", "/admin/replicas/b1", b"").status, 200);
    assert_eq!(route().0, "b2");
    let extra = Backend::start("b3");
    let add = format!("{{\"name\": \"b3\", \"address\": \"{}\"}}", extra.address());
    let r = admin(&b, "POST", "/admin/replicas", add.as_bytes());
    assert_eq!(r.status, 201, "b3 takes the empty slot 1: {}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["index"], 1);
    assert_eq!(route().0, "b3", "slot 1's votes now reach b3");
    let again = format!("{{\"name\": \"b4\", \"address\": \"{}\"}}", extra.address());
    let r = admin(&b, "POST", "/admin/replicas", again.as_bytes());
    assert_eq!(r.status, 409, "{}", r.body);
}

#[test]
fn bad_input_is_a_400_json_error_never_a_500() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let b = spawn_balancer(
        tempfile::tempdir().unwrap(),
        &config(&refs, "name = \"ch-bl\"", ""),
    );
    let long = format!("/search?q={}", "a".repeat(65));
    let cases = [
        ("missing q", "/search", "missing"),
        ("missing q with others", "/search?x=1", "missing"),
        ("empty q", "/search?q=", "empty"),
        ("blank q", "/search?q=+%20", "empty"),
        ("q over the limit", long.as_str(), "longer than 64"),
        ("bad percent", "/search?q=ab%zz", "percent"),
        ("truncated percent", "/search?q=ab%4", "percent"),
        ("bad UTF-8", "/search?q=%FF%FE", "UTF-8"),
    ];
    for (what, target, want) in cases {
        let r = get(b.addr, target);
        assert_eq!(r.status, 400, "{what}: {}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).expect("JSON body");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(want),
            "{what}: {}",
            r.body
        );
    }
    let r = request(b.addr, "POST", "/search?q=x", &[], b"");
    assert_eq!(r.status, 405);
    assert!(
        serde_json::from_str::<serde_json::Value>(&r.body).is_ok(),
        "{}",
        r.body
    );
    let r = get(b.addr, "/nope");
    assert_eq!(r.status, 404);
    assert!(
        serde_json::from_str::<serde_json::Value>(&r.body).is_ok(),
        "{}",
        r.body
    );
    let r = get(b.addr, &format!("/search?q={}", "a".repeat(64)));
    assert_eq!(r.status, 200, "exactly at the limit: {}", r.body);
    let r = get(b.addr, "/search?q=%21%21");
    assert_eq!(
        r.status, 200,
        "a query with no terms still routes: {}",
        r.body
    );
    assert_eq!(r.headers["x-ballot-reason"], "vote");
    assert_eq!(get(b.addr, "/healthz").status, 200);
}

#[test]
fn admin_needs_the_token_and_manages_membership() {
    let bs = three();
    let refs: Vec<&Backend> = bs.iter().collect();
    let b = spawn_balancer(
        tempfile::tempdir().unwrap(),
        &config(&refs[..2], "name = \"round-robin\"", ""),
    );
    for (method, target) in [
        ("GET", "/admin/replicas"),
        ("POST", "/admin/table"),
        ("POST", "/admin/replicas/b0/drain"),
        ("DELETE", "/admin/replicas/b0"),
    ] {
        let r = request(b.admin, method, target, &[], b"");
        assert_eq!(r.status, 401, "{method} {target} without token");
        let r = request(
            b.admin,
            method,
            target,
            &[("Authorization", "Bearer wrong")],
            b"",
        );
        assert_eq!(r.status, 401, "{method} {target} with a wrong token");
    }
    assert_eq!(get(b.admin, "/metrics").status, 200);
    assert_eq!(get(b.admin, "/nope").status, 404);

    // Drain b0: every query goes to b1; enable: both again.
    assert_eq!(
        admin(&b, "POST", "/admin/replicas/b0/drain", b"").status,
        200
    );
    for _ in 0..10 {
        assert_eq!(get(b.addr, "/search?q=x").headers["x-ballot-replica"], "b1");
    }
    assert_eq!(
        admin(&b, "POST", "/admin/replicas/b0/enable", b"").status,
        200
    );
    let names: std::collections::BTreeSet<String> = (0..10)
        .map(|_| get(b.addr, "/search?q=x").headers["x-ballot-replica"].clone())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Add b2, remove b0.
    let add = format!("{{\"name\": \"b2\", \"address\": \"{}\"}}", bs[2].address());
    let r = admin(&b, "POST", "/admin/replicas", add.as_bytes());
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        admin(&b, "POST", "/admin/replicas", add.as_bytes()).status,
        409
    );
    let r = admin(&b, "DELETE", "/admin/replicas/b0", b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(admin(&b, "DELETE", "/admin/replicas/b0", b"").status, 404);
    let names: std::collections::BTreeSet<String> = (0..12)
        .map(|_| get(b.addr, "/search?q=x").headers["x-ballot-replica"].clone())
        .collect();
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["b1", "b2"]);
    let bad = admin(
        &b,
        "POST",
        "/admin/replicas",
        b"{\"name\": \"x y\", \"address\": \"h:1\"}",
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn a_bad_config_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:0\"\nbogus = 1\n").unwrap();
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_balancer"))
            .arg("--config")
            .arg(&path),
        LIMIT,
        "balancer with a bad config",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("bogus"), "{err}");
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits() {
    let bs = three();
    for b in &bs {
        b.stall.store(600, Ordering::Relaxed);
    }
    let refs: Vec<&Backend> = bs.iter().collect();
    let cfg = config(&refs, "name = \"p2c\"", "")
        .replace("request_timeout_ms = 500\n", "request_timeout_ms = 3000\n");
    let mut b = spawn_balancer(tempfile::tempdir().unwrap(), &cfg);
    let addr = b.addr;
    let slow = thread::spawn(move || get(addr, "/search?q=in+flight"));
    // Readiness, not a sleep: the balancer reports the request in flight (its backend
    // holds it 600 ms).
    wait_until(LIMIT, "the request in flight", || {
        let r = admin(&b, "GET", "/admin/replicas", b"");
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        v["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["in_flight"].as_u64().unwrap_or(0) > 0)
    });
    let pid = b.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let r = slow.join().unwrap();
    assert_eq!(
        r.status, 200,
        "the request in flight at SIGTERM completes: {}",
        r.body
    );
    let start = Instant::now();
    loop {
        if let Some(st) = b.child.try_wait() {
            assert!(st.success(), "{st:?}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "did not exit");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        TcpStream::connect(addr).is_err(),
        "still listening after exit"
    );
    let _ = &b.dir;
}
