//! The `replica` binary under hostile clients and signals, over loopback: slowloris and
//! idle connections, the connection cap, a low open-file limit, SIGHUP, SIGTERM with
//! half-sent requests open, and the allocator's options. Every wait has a deadline.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

#[path = "../../serving/tests/support/probe.rs"]
mod probe;
use probe::{assert_allocator_options, connect, read_response, request, send, wait_closed};

fn build(dir: &Path) -> PathBuf {
    let idx = dir.join("idx");
    let terms: Vec<(String, u64)> = (0..20).map(|i| (format!("t{i:02}"), 50 + i * 10)).collect();
    replica::build_index(&idx, 2_000, terms).expect("build index");
    idx
}

struct Replica {
    child: Child,
    addr: SocketAddr,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    fn start(extra: &[&str], setup: impl FnOnce(&mut Command)) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let idx = build(dir.path());
        let stderr = dir.path().join("replica.stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_replica"));
        cmd.arg("--index")
            .arg(&idx)
            .args(["--listen", "127.0.0.1:0", "--cache-bytes", "100000"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        setup(&mut cmd);
        let mut child = cmd.spawn().expect("spawn replica");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "replica did not listen; stderr:\n{}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            });
            if let Some(a) = line.strip_prefix("listening on ") {
                break a.parse().unwrap();
            }
        };
        thread::spawn(move || for _ in rx {});
        Replica {
            child,
            addr,
            stderr,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                start.elapsed() < limit,
                "replica still running after {limit:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    let r = Replica::start(&["--header-timeout-ms", "1000"], |_| {});
    let addr = r.addr;
    let slow = thread::spawn(move || {
        probe::slowloris(
            addr,
            100,
            Duration::from_millis(200),
            Duration::from_secs(8),
        )
    });
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        request(r.addr, "GET", "/search?q=t01", &[], b"").status,
        200
    );
    let times: Vec<Duration> = slow
        .join()
        .unwrap()
        .into_iter()
        .map(|c| c.expect("a slowloris connection stayed open for 8 s"))
        .collect();
    let (min, max) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    eprintln!("100 slowloris connections closed after {min:?} to {max:?}");
    assert!(*min >= Duration::from_millis(900), "{min:?}");
    assert!(*max < Duration::from_millis(2500), "{max:?}");
}

#[test]
fn idle_connections_close_after_the_idle_timeout_not_the_header_timeout() {
    let r = Replica::start(
        &["--header-timeout-ms", "500", "--idle-timeout-ms", "2000"],
        |_| {},
    );
    let mut s = connect(r.addr, Duration::from_secs(5));
    send(&mut s, "GET", "/search?q=t01", &[], b"");
    assert_eq!(read_response(&mut s).expect("first").status, 200);
    thread::sleep(Duration::from_millis(1200));
    send(&mut s, "GET", "/healthz", &[], b"");
    assert_eq!(read_response(&mut s).expect("second").status, 200);
    let took = wait_closed(&mut s, Duration::from_secs(6)).expect("idle connection stays open");
    eprintln!("idle keep-alive connection closed {took:?} after its last answer");
    assert!(took >= Duration::from_millis(1800), "{took:?}");
    assert!(took < Duration::from_millis(3500), "{took:?}");
}

#[test]
fn the_connection_cap_holds_new_clients_in_the_backlog() {
    let r = Replica::start(&["--max-connections", "4"], |_| {});
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = connect(r.addr, Duration::from_secs(5));
            send(&mut s, "GET", "/healthz", &[], b"");
            assert_eq!(read_response(&mut s).expect("held").status, 200);
            s
        })
        .collect();
    let mut extra = connect(r.addr, Duration::from_secs(5));
    send(&mut extra, "GET", "/healthz", &[], b"");
    extra
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    assert!(
        read_response(&mut extra).is_none(),
        "served past the cap of 4"
    );
    drop(held.pop());
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(read_response(&mut extra).expect("served").status, 200);
}

#[test]
fn with_a_low_file_limit_new_clients_are_served_once_idle_ones_time_out() {
    let r = Replica::start(&["--header-timeout-ms", "1500"], |c| {
        probe::with_nofile(c, 128, 128)
    });
    assert_eq!(probe::nofile(r.pid()), (128, 128));
    let idle = probe::idle_connections(r.addr, 200);
    thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let resp = request(r.addr, "GET", "/search?q=t02", &[], b"");
    let took = start.elapsed();
    eprintln!("with 200 idle connections at ulimit -n 128, a new client was served in {took:?}");
    assert_eq!(resp.status, 200);
    assert!(took < Duration::from_secs(8), "{took:?}");
    drop(idle);
    assert!(r.log().matches("accept failed").count() <= 2, "{}", r.log());

    let raised = Replica::start(&[], |c| probe::with_nofile(c, 128, 2048));
    assert_eq!(probe::nofile(raised.pid()), (2048, 2048));
}

#[test]
fn sighup_does_not_kill_the_replica() {
    let mut r = Replica::start(&[], |_| {});
    for _ in 0..20 {
        probe::kill(r.pid(), libc::SIGHUP);
        thread::sleep(Duration::from_millis(5));
    }
    thread::sleep(Duration::from_millis(100));
    assert!(r.child.try_wait().unwrap().is_none(), "died of SIGHUP");
    assert_eq!(request(r.addr, "GET", "/healthz", &[], b"").status, 200);
    probe::kill(r.pid(), libc::SIGTERM);
    assert!(r.exit_within(Duration::from_secs(5)).success());
}

#[test]
fn sigterm_with_half_sent_requests_exits_at_once_with_status_0() {
    let mut r = Replica::start(&[], |_| {});
    let mut half: Vec<TcpStream> = (0..100)
        .map(|i| {
            let mut s = connect(r.addr, Duration::from_secs(5));
            write!(s, "GET /search?q=t{i:02} HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    // And idle keep-alive connections.
    let mut idle: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = connect(r.addr, Duration::from_secs(5));
            send(&mut s, "GET", "/healthz", &[], b"");
            assert_eq!(read_response(&mut s).expect("answer").status, 200);
            s
        })
        .collect();
    thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    probe::kill(r.pid(), libc::SIGTERM);
    for s in half.iter_mut().chain(idle.iter_mut()) {
        wait_closed(s, Duration::from_secs(2)).expect("a connection stayed open");
    }
    let st = r.exit_within(Duration::from_secs(5));
    let took = start.elapsed();
    eprintln!("SIGTERM with 100 half-sent requests: exit {st:?} after {took:?}");
    assert!(st.success(), "{st:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_request_head_past_32_kib_is_refused() {
    let r = Replica::start(&[], |_| {});
    let big = "a".repeat(40 << 10);
    let mut s = connect(r.addr, Duration::from_secs(5));
    let _ = write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n"
    );
    let resp = read_response(&mut s);
    assert_eq!(resp.map(|r| r.status), Some(431));
    assert_eq!(request(r.addr, "GET", "/healthz", &[], b"").status, 200);
}

#[test]
fn the_replica_runs_on_jemalloc_with_one_arena_and_small_thread_caches() {
    // The options exported by the binary (`_rjem_malloc_conf`), read back from jemalloc: a
    // misspelt symbol would leave jemalloc's defaults (8 arenas, 32 KiB thread caches), and
    // the replica's 64 search threads would hold 58 MB instead of 22 (serving::alloc).
    assert_allocator_options(
        env!("CARGO_BIN_EXE_replica"),
        &[
            "narenas: 1",
            "tcache_max: 1024",
            "tcache_nslots_small_max: 16",
            "dirty_decay_ms: 1000",
            "muzzy_decay_ms: 0",
            "background_thread: true",
        ],
    );
}
