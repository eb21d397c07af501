//! The `balancer` binary under hostile clients and misbehaving replicas, over loopback:
//! slowloris and idle connections, the connection cap, a low open-file limit, admin
//! uploads without a token, the path-reload oracle, signals during start-up and shutdown,
//! a replica that stalls mid-body, the bound on requests in flight, the per-replica cap
//! and its queue, the headers sent upstream, and the allocator's options. The replicas are
//! minimal HTTP/1.1 backends written here; every wait has a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

#[path = "../../../serving/tests/support/probe.rs"]
mod probe;
use e2e::{prometheus_sum, wait_until};
use probe::{
    assert_allocator_options, connect, open_fds, read_response, request, send, wait_closed, Resp,
};

const TOKEN: &str = "s3cret";

// ---------------------------------------------------------------- backends

/// Requests a backend is answering now, and the most it ever answered at once.
#[derive(Default)]
struct Concurrency {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// What a backend does with one `/search` request.
#[derive(Clone)]
enum Reply {
    /// 200 with this body after this many milliseconds.
    Body(u64, String),
    /// 200 after this many milliseconds, counting the requests answered at once.
    Counted(u64, Arc<Concurrency>),
    /// 200 after the delay in milliseconds it holds when the request comes.
    Delay(Arc<AtomicU64>),
    /// 200 with the request's headers as the body, one `name: value` per line.
    EchoHeaders,
    /// Headers promising 1,000 bytes, 10 of them, then a stall of 10 s.
    StallMidBody,
    /// Raw bytes, written as they are (see [`RawReply`]).
    Raw(Arc<RawReply>),
}

/// A scripted answer, byte for byte.
struct RawReply {
    /// Written one after another, 20 ms apart.
    pieces: Vec<Vec<u8>>,
    /// Close the connection after the answer.
    close: bool,
    /// Requests a connection answers; the next one gets no answer: the connection closes.
    answered_per_conn: usize,
}

impl RawReply {
    fn reply(pieces: &[&[u8]], close: bool) -> Reply {
        Reply::Raw(Arc::new(RawReply {
            pieces: pieces.iter().map(|p| p.to_vec()).collect(),
            close,
            answered_per_conn: usize::MAX,
        }))
    }
}

struct Backend {
    addr: SocketAddr,
    /// Connections whose first request was a search (health checks not counted).
    search_conns: Arc<AtomicUsize>,
}

fn serve_backend(stream: TcpStream, reply: Reply, search_conns: &AtomicUsize) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    for n in 0.. {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut headers = String::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
            headers += &h.trim_end().to_ascii_lowercase();
            headers.push('\n');
        }
        if n == 0 && target.starts_with("/search") {
            search_conns.fetch_add(1, Ordering::SeqCst);
        }
        if let (Reply::Raw(raw), false) = (&reply, target == "/healthz") {
            if n >= raw.answered_per_conn {
                return;
            }
            for (i, piece) in raw.pieces.iter().enumerate() {
                if i > 0 {
                    thread::sleep(Duration::from_millis(20));
                }
                if out.write_all(piece).is_err() {
                    return;
                }
            }
            if raw.close {
                return;
            }
            continue;
        }
        let body = if target == "/healthz" {
            "ok".to_owned()
        } else {
            match &reply {
                Reply::Body(ms, b) => {
                    thread::sleep(Duration::from_millis(*ms));
                    b.clone()
                }
                Reply::Counted(ms, c) => {
                    let now = c.now.fetch_add(1, Ordering::SeqCst) + 1;
                    c.max.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(*ms));
                    c.now.fetch_sub(1, Ordering::SeqCst);
                    "counted".to_owned()
                }
                Reply::Delay(ms) => {
                    thread::sleep(Duration::from_millis(ms.load(Ordering::SeqCst)));
                    "delayed".to_owned()
                }
                Reply::EchoHeaders => headers,
                Reply::Raw(_) => unreachable!("answered above"),
                Reply::StallMidBody => {
                    let _ = out.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n0123456789",
                    );
                    thread::sleep(Duration::from_secs(10));
                    return;
                }
            }
        };
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: x-backend-private\r\nX-Backend-Private: 1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

impl Backend {
    fn start(reply: Reply) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let addr = listener.local_addr().unwrap();
        let search_conns = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&search_conns);
        thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let reply = reply.clone();
                let counted = Arc::clone(&counted);
                thread::spawn(move || serve_backend(s, reply, &counted));
            }
        });
        Backend { addr, search_conns }
    }
}

// ---------------------------------------------------------------- balancer process

struct Balancer {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Balancer {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn search(&self, q: &str) -> Resp {
        request(self.addr, "GET", &format!("/search?q={q}"), &[], b"")
    }

    fn admin(&self, method: &str, target: &str, body: &[u8]) -> Resp {
        let auth = format!("Bearer {TOKEN}");
        request(
            self.admin,
            method,
            target,
            &[("Authorization", &auth)],
            body,
        )
    }

    /// Waits up to `limit` for the process to exit.
    fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                start.elapsed() < limit,
                "balancer still running after {limit:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn config(backends: &[&Backend], extra: &str) -> String {
    let mut s = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         request_timeout_ms = 2000\ndeadline_ms = 3000\nretries = 1\nrouting_headers = true\n\
         {extra}\n\
         [health]\ninterval_ms = 200\ntimeout_ms = 500\nfall = 3\nrise = 1\n\n\
         [policy]\nname = \"round-robin\"\n"
    );
    for (i, b) in backends.iter().enumerate() {
        s += &format!(
            "\n[[replicas]]\nname = \"b{i}\"\naddress = \"{}\"\n",
            b.addr
        );
    }
    s
}

/// Starts the balancer on `config_text` (written into `dir`), after `setup` adjusts the
/// command; waits for both listening lines.
fn spawn_with(
    dir: tempfile::TempDir,
    config_text: &str,
    setup: impl FnOnce(&mut Command),
) -> Balancer {
    let path = dir.path().join("balancer.toml");
    std::fs::write(&path, config_text).unwrap();
    let stderr = dir.path().join("balancer.stderr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_balancer"));
    cmd.arg("--config")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap());
    setup(&mut cmd);
    let mut child = cmd.spawn().expect("spawn balancer");
    let (addr, admin) = listening(&mut child, &stderr);
    Balancer {
        child,
        addr,
        admin,
        stderr,
        _dir: dir,
    }
}

/// Reads the `listening on` and `admin on` lines within 20 s, then keeps stdout drained.
fn listening(child: &mut Child, stderr: &Path) -> (SocketAddr, SocketAddr) {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut addr, mut admin) = (None, None);
    while addr.is_none() || admin.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "balancer did not print its addresses; stderr:\n{}",
                std::fs::read_to_string(stderr).unwrap_or_default()
            )
        });
        if let Some(a) = line.strip_prefix("listening on ") {
            addr = Some(a.parse().unwrap());
        } else if let Some(a) = line.strip_prefix("admin on ") {
            admin = Some(a.parse().unwrap());
        }
    }
    thread::spawn(move || for _ in rx {});
    (addr.unwrap(), admin.unwrap())
}

fn spawn(config_text: &str) -> Balancer {
    spawn_with(tempfile::tempdir().unwrap(), config_text, |_| {})
}

// ---------------------------------------------------------------- connections

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let lb = spawn(&config(
        &[&b0],
        "header_timeout_ms = 1000\nidle_timeout_ms = 5000",
    ));
    let addr = lb.addr;
    let slow = thread::spawn(move || {
        probe::slowloris(
            addr,
            100,
            Duration::from_millis(200),
            Duration::from_secs(8),
        )
    });
    // Served meanwhile.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(lb.search("meanwhile").status, 200);
    let closed = slow.join().unwrap();
    let times: Vec<Duration> = closed
        .iter()
        .map(|c| c.expect("a slowloris connection stayed open for 8 s"))
        .collect();
    let max = times.iter().max().unwrap();
    let min = times.iter().min().unwrap();
    eprintln!("100 slowloris connections closed after {min:?} to {max:?}");
    assert!(*min >= Duration::from_millis(900), "closed early: {min:?}");
    assert!(*max < Duration::from_millis(2500), "closed late: {max:?}");
}

#[test]
fn idle_connections_close_after_the_idle_timeout_not_the_header_timeout() {
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let lb = spawn(&config(
        &[&b0],
        "header_timeout_ms = 500\nidle_timeout_ms = 2000",
    ));
    let mut s = connect(lb.addr, Duration::from_secs(5));
    send(&mut s, "GET", "/search?q=one", &[], b"");
    assert_eq!(read_response(&mut s).expect("first answer").status, 200);
    // Idle for longer than the header timeout, shorter than the idle timeout: still open.
    thread::sleep(Duration::from_millis(1200));
    send(&mut s, "GET", "/search?q=two", &[], b"");
    assert_eq!(read_response(&mut s).expect("second answer").status, 200);
    let took = wait_closed(&mut s, Duration::from_secs(6)).expect("idle connection stays open");
    eprintln!("idle keep-alive connection closed {took:?} after its last answer");
    assert!(took >= Duration::from_millis(1800), "{took:?}");
    assert!(took < Duration::from_millis(3500), "{took:?}");
    // A connection that never sends a byte gets the header timeout.
    let mut quiet = connect(lb.addr, Duration::from_secs(5));
    let took = wait_closed(&mut quiet, Duration::from_secs(5)).expect("silent connection");
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn the_connection_cap_holds_new_clients_in_the_backlog() {
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let lb = spawn_with(
        tempfile::tempdir().unwrap(),
        &config(&[&b0], "max_connections = 8\nidle_timeout_ms = 30000"),
        |c| {
            c.args(["--workers", "2"]);
        },
    );
    let mut held: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut s = connect(lb.addr, Duration::from_secs(5));
            send(&mut s, "GET", &format!("/search?q=held{i}"), &[], b"");
            assert_eq!(read_response(&mut s).expect("held answer").status, 200);
            s
        })
        .collect();
    let mut extra = connect(lb.addr, Duration::from_secs(5));
    send(&mut extra, "GET", "/search?q=extra", &[], b"");
    extra
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let mut byte = [0u8; 1];
    let r = extra.read(&mut byte);
    assert!(
        matches!(&r, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the 9th connection was served past the cap: {r:?}"
    );
    // The admin listener has its own cap.
    assert_eq!(lb.admin("GET", "/admin/replicas", b"").status, 200);
    // One leaves: the waiting client is served.
    drop(held.pop());
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let start = Instant::now();
    let resp = read_response(&mut extra).expect("the waiting client is served");
    assert_eq!(resp.status, 200);
    eprintln!("9th client served {:?} after a slot freed", start.elapsed());
}

#[test]
fn with_a_low_file_limit_new_clients_are_served_once_idle_ones_time_out() {
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let lb = spawn_with(
        tempfile::tempdir().unwrap(),
        &config(&[&b0], "header_timeout_ms = 1500"),
        |c| probe::with_nofile(c, 256, 256),
    );
    assert_eq!(probe::nofile(lb.pid()), (256, 256));
    // More silent connections than the 256 descriptors allow.
    let idle = probe::idle_connections(lb.addr, 300);
    thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let resp = request(lb.addr, "GET", "/search?q=after", &[], b"");
    let took = start.elapsed();
    eprintln!("with 300 idle connections at ulimit -n 256, a new client was served in {took:?}");
    assert_eq!(resp.status, 200);
    assert!(took < Duration::from_secs(8), "{took:?}");
    drop(idle);
    let log = lb.log();
    assert!(
        log.matches("accept failed").count() <= 2,
        "accept errors logged in a loop:\n{log}"
    );
    assert!(log.contains("max_connections=96"), "{log}");
}

#[test]
fn the_soft_file_limit_is_raised_to_the_hard_limit_and_logs_can_be_json() {
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let lb = spawn_with(tempfile::tempdir().unwrap(), &config(&[&b0], ""), |c| {
        probe::with_nofile(c, 256, 4096);
        c.args(["--log-format", "json"]);
    });
    assert_eq!(probe::nofile(lb.pid()), (4096, 4096));
    let log = lb.log();
    let raised: serde_json::Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "raised the open-file limit")
        .unwrap_or_else(|| panic!("no JSON line about the open-file limit:\n{log}"));
    assert_eq!(raised["fields"]["from"], 256, "{raised}");
    assert_eq!(raised["fields"]["to"], 4096, "{raised}");
    assert_eq!(raised["level"], "INFO", "{raised}");
}

// ---------------------------------------------------------------- signals

#[test]
fn sigterm_with_half_sent_requests_exits_at_once_after_the_requests_in_flight() {
    let b0 = Backend::start(Reply::Body(600, "slow".into()));
    let mut lb = spawn(&config(&[&b0], ""));
    let mut half: Vec<TcpStream> = (0..100)
        .map(|i| {
            let mut s = connect(lb.addr, Duration::from_secs(5));
            write!(s, "GET /search?q=half{i} HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    let addr = lb.addr;
    let in_flight = thread::spawn(move || request(addr, "GET", "/search?q=inflight", &[], b""));
    thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    probe::kill(lb.pid(), libc::SIGTERM);
    for s in &mut half {
        wait_closed(s, Duration::from_secs(2)).expect("a half-sent request stayed open");
    }
    let closed = start.elapsed();
    let resp = in_flight.join().unwrap();
    assert_eq!(
        resp.status,
        200,
        "the request in flight finishes: {}",
        resp.text()
    );
    let st = lb.exit_within(Duration::from_secs(3));
    let exited = start.elapsed();
    eprintln!(
        "SIGTERM: 100 half-sent requests closed within {closed:?}; exit {st:?} after {exited:?}"
    );
    assert!(st.success(), "{st:?}");
    assert!(closed < Duration::from_millis(1000), "{closed:?}");
    assert!(exited < Duration::from_secs(2), "{exited:?}");
}

#[test]
fn sighup_during_the_initial_table_load_does_not_kill_the_balancer() {
    use data::table::{TableRow, VotingTable};
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let b1 = Backend::start(Reply::Body(0, "ok".into()));
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<TableRow> = (0..300_000)
        .map(|i| TableRow {
            term: format!("term{i}"),
            replica: (i % 2) as u16,
            weight: 1.0,
        })
        .collect();
    let table = dir.path().join("big.parquet");
    VotingTable::new(2, rows, Default::default())
        .unwrap()
        .write_parquet(&table)
        .unwrap();
    let text = config(&[&b0, &b1], "").replace(
        "name = \"round-robin\"",
        &format!("name = \"table\"\ntable = \"{}\"", table.display()),
    );
    let path = dir.path().join("balancer.toml");
    std::fs::write(&path, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_balancer"))
        .arg("--config")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    wait_until(
        Duration::from_secs(20),
        "the `loading voting table` line",
        || {
            while let Ok(l) = rx.try_recv() {
                log.push(l);
            }
            log.iter().any(|l| l.contains("loading voting table"))
        },
    );
    // SIGHUPs while the table loads, until the listeners are up.
    let out = child.stdout.take().unwrap();
    let (otx, orx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = otx.send(line);
        }
    });
    let mut sent = 0;
    let mut addr: Option<SocketAddr> = None;
    let start = Instant::now();
    while addr.is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "never listened");
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the balancer died during its table load: {st:?}");
        }
        probe::kill(pid, libc::SIGHUP);
        sent += 1;
        thread::sleep(Duration::from_millis(5));
        while let Ok(l) = orx.try_recv() {
            if let Some(a) = l.strip_prefix("listening on ") {
                addr = Some(a.parse().unwrap());
            }
        }
    }
    eprintln!(
        "{sent} SIGHUPs sent during a {:?} table load",
        start.elapsed()
    );
    assert!(sent >= 1);
    let addr = addr.unwrap();
    assert_eq!(
        request(addr, "GET", "/search?q=term7", &[], b"").status,
        200
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "alive after the SIGHUPs"
    );
    probe::kill(pid, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(st.success(), "{st:?}");
}

// ---------------------------------------------------------------- admin API

#[test]
fn an_upload_without_the_token_gets_its_401_before_the_body_is_sent() {
    use data::table::{TableRow, VotingTable};
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.parquet");
    let row = TableRow {
        term: "alpha".into(),
        replica: 0,
        weight: 1.0,
    };
    VotingTable::new(1, vec![row], Default::default())
        .unwrap()
        .write_parquet(&table)
        .unwrap();
    let text = config(&[&b0], "admin_max_upload_bytes = 1048576").replace(
        "name = \"round-robin\"",
        &format!("name = \"table\"\ntable = \"{}\"", table.display()),
    );
    let lb = spawn_with(dir, &text, |_| {});
    let hwm_before = probe::proc_status_kb(lb.pid(), "VmHWM");
    // Headers announce 1 GiB; no body byte is sent before the answer.
    let mut s = connect(lb.admin, Duration::from_secs(5));
    write!(
        s,
        "POST /admin/table HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1073741824\r\n\r\n"
    )
    .unwrap();
    let start = Instant::now();
    let resp = read_response(&mut s).expect("an answer without the body");
    assert_eq!(resp.status, 401, "{}", resp.text());
    assert!(start.elapsed() < Duration::from_secs(1));
    // Sending the body anyway: the connection is closed long before 1 GiB.
    let chunk = vec![0u8; 1 << 20];
    let mut sent = 0usize;
    while sent < 1 << 30 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let hwm_after = probe::proc_status_kb(lb.pid(), "VmHWM");
    eprintln!(
        "1 GiB upload without a token: 401 in {:?}, {} MiB written before the close, VmHWM {} -> {} kB",
        start.elapsed(),
        sent >> 20,
        hwm_before,
        hwm_after
    );
    assert!(sent < 1 << 30, "the whole body was accepted");
    assert!(
        hwm_after < hwm_before + 16 * 1024,
        "{hwm_before} -> {hwm_after} kB"
    );

    // With the token, a declared size over the limit is refused before reading, and an
    // undeclared (chunked) body is cut at the limit.
    let auth = format!("Bearer {TOKEN}");
    let mut s = connect(lb.admin, Duration::from_secs(5));
    write!(
        s,
        "POST /admin/table HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: 1073741824\r\n\r\n"
    )
    .unwrap();
    let resp = read_response(&mut s).expect("413");
    assert_eq!(resp.status, 413, "{}", resp.text());
    let mut s = connect(lb.admin, Duration::from_secs(5));
    write!(
        s,
        "POST /admin/table HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    for _ in 0..3 {
        let _ = write!(s, "{:x}\r\n", chunk.len());
        let _ = s.write_all(&chunk);
        let _ = s.write_all(b"\r\n");
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let resp = read_response(&mut s).expect("413 for a chunked body");
    assert_eq!(resp.status, 413, "{}", resp.text());
    let v: serde_json::Value = serde_json::from_slice(&resp.body).expect("JSON error");
    assert!(v["error"].as_str().unwrap().contains("1048576"), "{v}");
}

#[test]
fn path_reloads_answer_the_same_for_every_file_that_is_not_a_table_in_the_directory() {
    use data::table::{TableRow, VotingTable};
    let b0 = Backend::start(Reply::Body(0, "ok".into()));
    let b1 = Backend::start(Reply::Body(0, "ok".into()));
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let tables = root.join("tables");
    std::fs::create_dir(&tables).unwrap();
    let table = |r: u16| {
        VotingTable::new(
            2,
            vec![TableRow {
                term: "alpha".into(),
                replica: r,
                weight: 1.0,
            }],
            Default::default(),
        )
        .unwrap()
    };
    table(0).write_parquet(&tables.join("t0.parquet")).unwrap();
    table(1)
        .write_parquet(&root.join("outside.parquet"))
        .unwrap();
    std::fs::write(tables.join("junk.parquet"), b"not parquet").unwrap();
    std::os::unix::fs::symlink(root.join("outside.parquet"), tables.join("escape.parquet"))
        .unwrap();
    std::fs::create_dir(tables.join("sub")).unwrap();
    let fifo = std::ffi::CString::new(tables.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let text = config(
        &[&b0, &b1],
        &format!("tables_dir = \"{}\"", tables.display()),
    )
    .replace(
        "name = \"round-robin\"",
        &format!(
            "name = \"table\"\ntable = \"{}\"",
            tables.join("t0.parquet").display()
        ),
    );
    let lb = spawn_with(dir, &text, |_| {});
    let reload = |p: &str| {
        let body = serde_json::json!({ "path": p }).to_string();
        let start = Instant::now();
        let r = lb.admin("POST", "/admin/table", body.as_bytes());
        (r.status, r.text(), start.elapsed())
    };
    let outside = root.join("outside.parquet");
    let cases = [
        "missing.parquet",
        "/etc/shadow",
        "/nonexistent/t.parquet",
        "fifo",
        "sub",
        "junk.parquet",
        "escape.parquet",
        "../outside.parquet",
        outside.to_str().unwrap(),
    ];
    let answers: Vec<_> = cases.iter().map(|c| (c, reload(c))).collect();
    let first = &answers[0].1;
    for (case, (status, body, took)) in &answers {
        eprintln!("{case}: {status} in {took:?}");
        assert_eq!((*status, body), (first.0, &first.1), "{case}");
        assert!(*took < Duration::from_secs(1), "{case}: {took:?}");
    }
    assert_eq!(first.0, 422);
    assert!(first.1.contains("not a valid voting table"), "{}", first.1);
    // A valid table inside the directory loads.
    let (status, body, _) = reload("t0.parquet");
    assert_eq!(status, 200, "{body}");

    // Without tables_dir, path reloads are refused with a message that says so.
    let plain = spawn(&config(&[&b0, &b1], "").replace(
        "name = \"round-robin\"",
        &format!("name = \"table\"\ntable = \"{}\"", outside.display()),
    ));
    let r = plain.admin("POST", "/admin/table", br#"{"path": "x.parquet"}"#);
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("tables_dir"), "{}", r.text());
}

// ---------------------------------------------------------------- proxy

#[test]
fn a_replica_that_stalls_mid_body_is_cut_at_the_deadline() {
    let b0 = Backend::start(Reply::StallMidBody);
    let lb = spawn(&config(&[&b0], "").replace("deadline_ms = 3000", "deadline_ms = 1000"));
    let mut s = connect(lb.addr, Duration::from_secs(10));
    let start = Instant::now();
    send(&mut s, "GET", "/search?q=stall", &[], b"");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let ended = loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break start.elapsed(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let text = String::from_utf8_lossy(&got);
    eprintln!("stalled body cut after {ended:?}");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("0123456789"), "{text}");
    assert!(ended >= Duration::from_millis(900), "{ended:?}");
    assert!(ended < Duration::from_millis(2500), "{ended:?}");
    assert!(
        lb.log().contains("cut at the request deadline"),
        "{}",
        lb.log()
    );
}

#[test]
fn requests_past_max_in_flight_get_503_with_retry_after() {
    let b0 = Backend::start(Reply::Body(700, "slow".into()));
    let lb = spawn(&config(&[&b0], "max_in_flight = 2"));
    let addr = lb.addr;
    let slow: Vec<_> = (0..2)
        .map(|i| thread::spawn(move || request(addr, "GET", &format!("/search?q=s{i}"), &[], b"")))
        .collect();
    thread::sleep(Duration::from_millis(250));
    let r = lb.search("third");
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.headers.get("retry-after").map(String::as_str), Some("1"));
    assert!(r.text().contains("overloaded"), "{}", r.text());
    for t in slow {
        assert_eq!(t.join().unwrap().status, 200);
    }
    assert_eq!(lb.search("after").status, 200);
}

#[test]
fn past_replica_max_in_flight_requests_wait_in_the_queue_then_time_out() {
    // Two replicas of 2 places each; 12 requests of 300 ms at once: 4 are answered at a
    // time, the others wait in the balancer's queue instead of reaching a replica.
    let seen = Arc::new(Concurrency::default());
    let b0 = Backend::start(Reply::Counted(300, Arc::clone(&seen)));
    let b1 = Backend::start(Reply::Counted(300, Arc::clone(&seen)));
    let lb = spawn(&config(
        &[&b0, &b1],
        "replica_max_in_flight = 2\nqueue_timeout_ms = 2500",
    ));
    let addr = lb.addr;
    let start = Instant::now();
    let all: Vec<_> = (0..12)
        .map(|i| thread::spawn(move || request(addr, "GET", &format!("/search?q=q{i}"), &[], b"")))
        .collect();
    for t in all {
        let r = t.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let took = start.elapsed();
    eprintln!(
        "12 requests through 4 places in {took:?}; at most {} at once upstream",
        seen.max.load(Ordering::SeqCst)
    );
    assert_eq!(seen.max.load(Ordering::SeqCst), 4, "the cap holds exactly");
    assert!(
        took >= Duration::from_millis(850),
        "three rounds of 300 ms: {took:?}"
    );
    let metrics = lb.admin("GET", "/metrics", b"").text();
    assert!(metrics.contains("ballot_queued 0"), "{metrics}");

    // One place and a short queue timeout: the second request gets 503 with Retry-After.
    let slow = Backend::start(Reply::Body(1500, "slow".into()));
    let lb = spawn(&config(
        &[&slow],
        "replica_max_in_flight = 1\nqueue_timeout_ms = 300",
    ));
    let addr = lb.addr;
    let first = thread::spawn(move || request(addr, "GET", "/search?q=first", &[], b""));
    thread::sleep(Duration::from_millis(200));
    let waited = Instant::now();
    let r = lb.search("second");
    let waited = waited.elapsed();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.headers.get("retry-after").map(String::as_str), Some("1"));
    assert!(r.text().contains("queue timeout"), "{}", r.text());
    assert!(
        (Duration::from_millis(250)..Duration::from_millis(1200)).contains(&waited),
        "{waited:?}"
    );
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(lb.search("after").status, 200);
    let metrics = lb.admin("GET", "/metrics", b"").text();
    assert!(
        metrics.contains("ballot_client_errors_total{kind=\"queue_timeout\"} 1"),
        "{metrics}"
    );
}

/// Two backends answering after the delay each one's atomic holds (0 at first), behind a
/// `ch-bl` balancer with one place per replica and `timeout` replacing the default request
/// timeout; and, found by probing, two queries whose terms hash to b0 and one to b1.
fn ch_bl_pair(timeout: &str) -> (Balancer, [Arc<AtomicU64>; 2], [Vec<String>; 2]) {
    let delays = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let b0 = Backend::start(Reply::Delay(Arc::clone(&delays[0])));
    let b1 = Backend::start(Reply::Delay(Arc::clone(&delays[1])));
    let lb = spawn(
        &config(
            &[&b0, &b1],
            "replica_max_in_flight = 1\nqueue_timeout_ms = 2500",
        )
        .replace("request_timeout_ms = 2000", timeout)
        .replace("round-robin", "ch-bl"),
    );
    let mut home: [Vec<String>; 2] = Default::default();
    for i in 0..64 {
        let q = format!("term{i}");
        let r = lb.search(&q);
        assert_eq!(r.status, 200, "{}", r.text());
        let b = r.headers.get("x-ballot-replica").map(String::as_str);
        home[usize::from(b == Some("b1"))].push(q);
        if home[0].len() >= 2 && !home[1].is_empty() {
            return (lb, delays, home);
        }
    }
    panic!("no two b0 queries and one b1 query among 64: {home:?}");
}

/// Response header `h`, or "".
fn header(r: &Resp, h: &str) -> String {
    r.headers.get(h).cloned().unwrap_or_default()
}

/// Sends `GET /search?q=...` from a thread.
fn send_from_thread(addr: SocketAddr, q: String) -> thread::JoinHandle<Resp> {
    thread::spawn(move || request(addr, "GET", &format!("/search?q={q}"), &[], b""))
}

#[test]
fn a_query_waits_for_its_own_replica_rather_than_a_place_another_one_freed() {
    // One place per replica. Two queries whose terms hash to b0 and one to b1; b1 frees
    // its place first. The second b0 query, queued while both were full, must wait for b0
    // (its cache), not take b1's place: a shared queue that sent waiters wherever a place
    // freed broke the caches' partition once every replica was full, and kept a paused
    // cluster overloaded. A b0 query that arrives next finds b0's backlog (one in flight,
    // one queued) over the load bound and overflows to b1.
    let (lb, delays, home) = ch_bl_pair("request_timeout_ms = 2000");
    delays[0].store(900, Ordering::SeqCst);
    delays[1].store(300, Ordering::SeqCst);
    let addr = lb.addr;
    let first = send_from_thread(addr, home[0][0].clone());
    thread::sleep(Duration::from_millis(50));
    let other = send_from_thread(addr, home[1][0].clone());
    thread::sleep(Duration::from_millis(50));
    // Sent once b1 is idle again, while b0 is full and has a queue.
    let late = {
        let q = home[0][0].clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(350));
            let sent = Instant::now();
            (
                request(addr, "GET", &format!("/search?q={q}"), &[], b""),
                sent.elapsed(),
            )
        })
    };
    let waiting = Instant::now();
    let second = lb.search(&home[0][1]);
    let waited = waiting.elapsed();
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(
        header(&second, "x-ballot-replica"),
        "b0",
        "waited {waited:?}"
    );
    assert!(
        waited >= Duration::from_millis(1400),
        "behind b0's first query: {waited:?}"
    );
    for t in [first, other] {
        assert_eq!(t.join().unwrap().status, 200);
    }
    let (late, took) = late.join().unwrap();
    assert_eq!(late.status, 200, "{}", late.text());
    assert_eq!(
        (
            header(&late, "x-ballot-replica"),
            header(&late, "x-ballot-reason")
        ),
        ("b1".to_owned(), "overflow".to_owned()),
        "the load bound counts the queue ({took:?})"
    );
    assert!(took < Duration::from_millis(800), "{took:?}");
    let replicas = lb.admin("GET", "/admin/replicas", b"").text();
    assert!(replicas.contains("\"queued\":0"), "{replicas}");
}

#[test]
fn a_query_queued_for_a_replica_that_hangs_routes_again_when_it_is_ejected() {
    // One place per replica. b0 hangs on its first query; b1 is busy for 400 ms, so a
    // second b0 query waits in b0's queue. When the first times out, b0 is ejected before
    // its place is handed on, so the waiting query routes again (to b1) as its first
    // attempt, instead of spending its own request timeout on the hung replica and
    // reaching b1 only as a failover.
    let (lb, delays, home) = ch_bl_pair("request_timeout_ms = 500");
    delays[0].store(2000, Ordering::SeqCst);
    delays[1].store(400, Ordering::SeqCst);
    let addr = lb.addr;
    let hung = send_from_thread(addr, home[0][0].clone());
    thread::sleep(Duration::from_millis(30));
    let busy = send_from_thread(addr, home[1][0].clone());
    thread::sleep(Duration::from_millis(30));
    let sent = Instant::now();
    let queued = lb.search(&home[0][1]);
    let took = sent.elapsed();
    assert_eq!(queued.status, 200, "{}", queued.text());
    assert_eq!(header(&queued, "x-ballot-replica"), "b1", "{took:?}");
    assert_ne!(
        header(&queued, "x-ballot-reason"),
        "failover",
        "the queued query was sent to the hung replica first ({took:?})"
    );
    assert!(
        took >= Duration::from_millis(400),
        "it waited for b0: {took:?}"
    );
    for t in [hung, busy] {
        assert_eq!(t.join().unwrap().status, 200);
    }
}

#[test]
fn end_to_end_headers_are_forwarded_with_x_forwarded_for_and_a_request_id() {
    let b0 = Backend::start(Reply::EchoHeaders);
    let lb = spawn(&config(&[&b0], "access_log = true"));
    let r = request(
        lb.addr,
        "GET",
        "/search?q=headers",
        &[
            ("Accept", "text/plain"),
            ("X-Custom", "one"),
            ("Connection", "keep-alive, X-Secret"),
            ("X-Secret", "hidden"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Authorization", "Basic abc"),
            ("TE", "trailers"),
            ("Upgrade", "websocket"),
            ("X-Forwarded-For", "10.1.2.3"),
            ("X-Request-Id", "client-id-7"),
        ],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = r.text();
    for want in [
        "accept: text/plain",
        "x-custom: one",
        "x-forwarded-for: 10.1.2.3, 127.0.0.1",
        "x-request-id: client-id-7",
        &format!("host: {}", b0.addr),
    ] {
        assert!(
            seen.lines().any(|l| l == want),
            "{want} missing in:\n{seen}"
        );
    }
    for gone in [
        "x-secret",
        "keep-alive",
        "proxy-authorization",
        "te:",
        "upgrade",
    ] {
        assert!(
            !seen.lines().any(|l| l.starts_with(gone)),
            "{gone} forwarded:\n{seen}"
        );
    }
    assert_eq!(r.headers["x-request-id"], "client-id-7");
    assert!(
        !r.headers.contains_key("x-backend-private"),
        "{:?}",
        r.headers
    );

    // Without a (valid) id the balancer makes one, sends it and echoes it.
    let r = request(
        lb.addr,
        "GET",
        "/search?q=noid",
        &[("X-Request-Id", "bad id with spaces")],
        b"",
    );
    let id = r.headers["x-request-id"].clone();
    assert_eq!(id.len(), 32, "{id}");
    assert!(r.text().lines().any(|l| l == format!("x-request-id: {id}")));
    // Errors echo it too.
    let r = request(
        lb.addr,
        "GET",
        "/search?nope=1",
        &[("X-Request-Id", "e-1")],
        b"",
    );
    assert_eq!((r.status, r.headers["x-request-id"].as_str()), (400, "e-1"));

    // One access-log line per request.
    wait_until(Duration::from_secs(3), "access log lines", || {
        lb.log().lines().filter(|l| l.contains(" access:")).count() >= 3
    });
    let log = lb.log();
    let line = log
        .lines()
        .find(|l| l.contains("request_id=\"client-id-7\""))
        .unwrap_or_else(|| panic!("no access line for client-id-7:\n{log}"));
    for field in [
        "replica=b0",
        "reason=\"no-vote\"",
        "status=200",
        "attempts=1",
        "latency_ms=",
    ] {
        assert!(line.contains(field), "{field} missing: {line}");
    }
}

#[test]
fn the_balancer_runs_on_jemalloc_that_returns_freed_pages_within_a_second() {
    // The options exported by the binary (`_rjem_malloc_conf`), read back from jemalloc: a
    // misspelt symbol would leave jemalloc's defaults, which keep a burst's freed pages for
    // 10 s and purge them only when the balancer allocates again (serving::alloc).
    assert_allocator_options(
        env!("CARGO_BIN_EXE_balancer"),
        &[
            "dirty_decay_ms: 1000",
            "muzzy_decay_ms: 0",
            "background_thread: true",
        ],
    );
}

// ---------------------------------------------------------------- upstream HTTP/1.1

/// `n` searches one after another on one client connection; their bodies.
fn searches(lb: &Balancer, n: usize) -> Vec<Resp> {
    let mut s = connect(lb.addr, Duration::from_secs(10));
    (0..n)
        .map(|i| {
            send(&mut s, "GET", &format!("/search?q=q{i}"), &[], b"");
            read_response(&mut s).unwrap_or_else(|| panic!("no answer to search {i}"))
        })
        .collect()
}

#[test]
fn chunked_interim_and_close_delimited_answers_reach_the_client_whole() {
    // A 103 first, then a chunked body with extensions and trailers, split mid-chunk.
    let chunked = Backend::start(RawReply::reply(
        &[
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel",
            b"lo\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n",
        ],
        false,
    ));
    let lb = spawn(&config(&[&chunked], ""));
    for r in searches(&lb, 3) {
        assert_eq!((r.status, r.text().as_str()), (200, "hello world"), "{r:?}");
    }
    assert_eq!(chunked.search_conns.load(Ordering::SeqCst), 1, "kept alive");

    // No length: the body runs to the close, and the connection is not reused.
    let until_close = Backend::start(RawReply::reply(
        &[
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil",
            b" close",
        ],
        true,
    ));
    let lb = spawn(&config(&[&until_close], ""));
    for r in searches(&lb, 2) {
        assert_eq!((r.status, r.text().as_str()), (200, "until close"), "{r:?}");
    }
    assert_eq!(until_close.search_conns.load(Ordering::SeqCst), 2);

    // A 1 MiB body in 64 KiB pieces arrives byte for byte.
    let body: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut pieces = vec![b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n".to_vec()];
    pieces.extend(body.chunks(64 << 10).map(<[u8]>::to_vec));
    let big = Backend::start(Reply::Raw(Arc::new(RawReply {
        pieces,
        close: false,
        answered_per_conn: usize::MAX,
    })));
    let lb = spawn(&config(&[&big], "").replace("deadline_ms = 3000", "deadline_ms = 10000"));
    for r in searches(&lb, 2) {
        assert_eq!(r.status, 200);
        assert!(r.body == body, "{} bytes, not the 1 MiB sent", r.body.len());
    }
    assert_eq!(big.search_conns.load(Ordering::SeqCst), 1, "kept alive");
}

#[test]
fn a_request_on_a_connection_the_replica_closes_unanswered_goes_on_a_new_one() {
    // Each connection answers one request and closes on the next without a byte.
    let b0 = Backend::start(Reply::Raw(Arc::new(RawReply {
        pieces: vec![b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()],
        close: false,
        answered_per_conn: 1,
    })));
    let lb = spawn(&config(&[&b0], "").replace("retries = 1", "retries = 0"));
    for r in searches(&lb, 4) {
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{r:?}");
    }
    assert_eq!(b0.search_conns.load(Ordering::SeqCst), 4);
    let metrics = lb.admin("GET", "/metrics", b"").text();
    let failures = prometheus_sum(&metrics, "ballot_upstream_failures_total");
    assert_eq!(failures.unwrap_or(0.0), 0.0, "{metrics}");
}

#[test]
fn answers_that_break_http_are_a_502_json_error() {
    let cases: [(&[u8], &str); 4] = [
        (b"garbage\r\n\r\n", "invalid response head"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
            "invalid Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "unsupported Transfer-Encoding",
        ),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
    ];
    for (answer, why) in cases {
        let b0 = Backend::start(RawReply::reply(&[answer], true));
        let lb = spawn(&config(&[&b0], ""));
        let r = lb.search("bad");
        assert_eq!(r.status, 502, "{}", r.text());
        let json: serde_json::Value = serde_json::from_slice(&r.body).expect("a JSON error");
        let msg = json["error"].as_str().unwrap_or_default();
        assert!(msg.contains(why), "{why:?} not in {msg:?}");
        assert_eq!(lb.admin("GET", "/healthz", b"").status, 200, "still up");
    }
}

#[test]
fn idle_connections_the_replica_closes_are_closed_here_within_seconds() {
    // Each answer is followed by the replica closing the connection, without saying so in
    // a header: the balancer pools the connection, and must notice the close by itself.
    let b0 = Backend::start(RawReply::reply(
        &[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        true,
    ));
    let lb = spawn(&config(&[&b0], ""));
    // The health checks' own connection is open by then.
    thread::sleep(Duration::from_millis(500));
    let before = open_fds(lb.pid());
    let addr = lb.addr;
    let burst: Vec<_> = (0..8)
        .map(|i| thread::spawn(move || request(addr, "GET", &format!("/search?q=b{i}"), &[], b"")))
        .collect();
    for t in burst {
        assert_eq!(t.join().unwrap().status, 200);
    }
    let took = wait_until(
        Duration::from_secs(5),
        "the replica's closes closed here",
        || open_fds(lb.pid()) <= before,
    );
    eprintln!("descriptors back to {before} after {took:?}");
}
