//! The `replica` binary under hostile clients and signals, over loopback: slowloris and
//! idle connections, the connection cap, a low open-file limit, SIGHUP, SIGTERM with
//! half-sent requests open, and the allocator's options. Steps follow signals (every
//! connection open, descriptors held, a log line), and every wait has a deadline.

use std::io::Write;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use e2e::http::is_timeout;
use e2e::probe::{self, assert_allocator_options, open_fds, Slowloris};
use e2e::{get, wait_until, Conn, Server, LIMIT};

const REPLICA: &str = env!("CARGO_BIN_EXE_replica");

/// A replica started on a small index built in its own temporary directory.
struct Replica {
    srv: Server,
    _dir: tempfile::TempDir,
}

impl Replica {
    /// Starts the replica with `extra` arguments, after `setup` adjusts the command.
    fn start(extra: &[&str], setup: impl FnOnce(&mut Command)) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let idx = dir.path().join("idx");
        let terms: Vec<(String, u64)> =
            (0..20).map(|i| (format!("t{i:02}"), 50 + i * 10)).collect();
        replica::build_index(&idx, 2_000, terms).expect("build index");
        let mut cmd = Command::new(REPLICA);
        cmd.arg("--index")
            .arg(&idx)
            .args(["--listen", "127.0.0.1:0", "--cache-bytes", "100000"])
            .args(extra);
        setup(&mut cmd);
        let srv = Server::start(&mut cmd, dir.path().join("replica.stderr"), "replica");
        Replica { srv, _dir: dir }
    }
}

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    let r = Replica::start(&["--header-timeout-ms", "1000"], |_| {});
    let slow = Slowloris::start(
        r.srv.addr(),
        100,
        Duration::from_millis(200),
        Duration::from_secs(8),
    );
    // Served while they are open: the signal is the last one's connect, not a sleep.
    slow.wait_open();
    assert_eq!(get(r.srv.addr(), "/search?q=t01").status, 200);
    let times: Vec<Duration> = slow
        .join()
        .into_iter()
        .map(|c| c.expect("a slowloris connection stayed open for 8 s"))
        .collect();
    let (min, max) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    eprintln!("100 slowloris connections closed after {min:?} to {max:?}");
    // Each is timed from its own connect: the header timeout is the subject.
    assert!(*min >= Duration::from_millis(900), "{min:?}");
    assert!(*max < Duration::from_millis(2500), "{max:?}");
}

#[test]
fn idle_connections_close_after_the_idle_timeout_not_the_header_timeout() {
    let r = Replica::start(
        &["--header-timeout-ms", "500", "--idle-timeout-ms", "2000"],
        |_| {},
    );
    let mut s = Conn::open(r.srv.addr(), Duration::from_secs(5));
    assert_eq!(s.request("GET", "/search?q=t01", &[], b"").status, 200);
    // The subject, not an order between requests: idle for longer than the header timeout
    // and shorter than the idle timeout, the connection is still open.
    thread::sleep(Duration::from_millis(1200));
    assert_eq!(s.request("GET", "/healthz", &[], b"").status, 200);
    // Timed from the second answer.
    let took = s
        .wait_closed(Duration::from_secs(6))
        .expect("idle connection stays open");
    eprintln!("idle keep-alive connection closed {took:?} after its last answer");
    assert!(took >= Duration::from_millis(1800), "{took:?}");
    assert!(took < Duration::from_millis(3500), "{took:?}");
}

#[test]
fn the_connection_cap_holds_new_clients_in_the_backlog() {
    let r = Replica::start(&["--max-connections", "4"], |_| {});
    let mut held: Vec<Conn> = (0..4)
        .map(|_| {
            let mut s = Conn::open(r.srv.addr(), Duration::from_secs(5));
            assert_eq!(s.request("GET", "/healthz", &[], b"").status, 200);
            s
        })
        .collect();
    let mut extra = Conn::open(r.srv.addr(), Duration::from_secs(5));
    extra.send("GET", "/healthz", &[], b"");
    // A negative check takes some time: no answer within 800 ms.
    extra.set_read_timeout(Some(Duration::from_millis(800)));
    let answer = extra.read_response();
    assert!(
        matches!(&answer, Err(e) if is_timeout(e)),
        "served past the cap of 4: {answer:?}"
    );
    drop(held.pop());
    extra.set_read_timeout(Some(LIMIT));
    assert_eq!(extra.read_response().expect("served").status, 200);
}

#[test]
fn with_a_low_file_limit_new_clients_are_served_once_idle_ones_time_out() {
    let r = Replica::start(&["--header-timeout-ms", "1500"], |c| {
        probe::with_nofile(c, 128, 128)
    });
    let pid = r.srv.pid();
    assert_eq!(probe::nofile(pid), (128, 128));
    // The replica fits its connection cap to the limit, one descriptor a connection
    // (replica/src/cli.rs); it does not log the cap.
    let cap = serving::rlimit::fit_connections(serving::limits::DEFAULT_MAX_CONNECTIONS, 128, 1);
    let before = open_fds(pid);
    let idle = probe::idle_connections(r.srv.addr(), 200);
    // The signal, not a sleep: the replica holds as many idle connections as it can (its
    // cap, or the descriptors, when it logs a failed accept).
    wait_until(LIMIT, "the idle connections filling the replica", || {
        open_fds(pid) >= before + cap || r.srv.log().contains("accept failed")
    });
    let start = Instant::now();
    let resp = get(r.srv.addr(), "/search?q=t02");
    let took = start.elapsed();
    eprintln!(
        "with 200 idle connections at ulimit -n 128 (cap {cap}), a new client was served in {took:?}"
    );
    assert_eq!(resp.status, 200);
    assert!(took < Duration::from_secs(8), "{took:?}");
    drop(idle);
    let log = r.srv.log();
    assert!(log.matches("accept failed").count() <= 2, "{log}");

    let raised = Replica::start(&[], |c| probe::with_nofile(c, 128, 2048));
    assert_eq!(probe::nofile(raised.srv.pid()), (2048, 2048));
}

#[test]
fn sighup_does_not_kill_the_replica() {
    let mut r = Replica::start(&[], |_| {});
    for _ in 0..20 {
        r.srv.signal(libc::SIGHUP);
        // Spaces the signals so that they are not all merged into one pending signal; it
        // orders no request.
        thread::sleep(Duration::from_millis(5));
    }
    // Signals, not a sleep: the replica answers and has logged a SIGHUP it ignored ...
    assert_eq!(get(r.srv.addr(), "/healthz").status, 200);
    wait_until(LIMIT, "a SIGHUP logged", || r.srv.log().contains("SIGHUP"));
    assert!(r.srv.try_wait().is_none(), "died of SIGHUP");
    // ... and a pending SIGHUP is delivered before a later SIGTERM (the lower number
    // first): a clean exit means none of them killed it.
    r.srv.signal(libc::SIGTERM);
    let st = r.srv.wait_exit(Duration::from_secs(5));
    assert!(st.success(), "{st:?}");
}

#[test]
fn sigterm_with_half_sent_requests_exits_at_once_with_status_0() {
    let mut r = Replica::start(&[], |_| {});
    let before = open_fds(r.srv.pid());
    let mut half: Vec<Conn> = (0..100)
        .map(|i| {
            let mut s = Conn::open(r.srv.addr(), Duration::from_secs(5));
            write!(s, "GET /search?q=t{i:02} HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    // And idle keep-alive connections.
    let mut idle: Vec<Conn> = (0..20)
        .map(|_| {
            let mut s = Conn::open(r.srv.addr(), Duration::from_secs(5));
            assert_eq!(s.request("GET", "/healthz", &[], b"").status, 200);
            s
        })
        .collect();
    // The signal, not a sleep: the replica has accepted all 120 connections.
    wait_until(LIMIT, "120 connections accepted", || {
        open_fds(r.srv.pid()) >= before + 120
    });
    let start = Instant::now();
    r.srv.signal(libc::SIGTERM);
    for s in half.iter_mut().chain(idle.iter_mut()) {
        s.wait_closed(Duration::from_secs(2))
            .expect("a connection stayed open");
    }
    let st = r.srv.wait_exit(Duration::from_secs(5));
    let took = start.elapsed();
    eprintln!("SIGTERM with 100 half-sent requests: exit {st:?} after {took:?}");
    assert!(st.success(), "{st:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn a_request_head_past_32_kib_is_refused() {
    let r = Replica::start(&[], |_| {});
    let big = "a".repeat(40 << 10);
    let mut s = Conn::open(r.srv.addr(), Duration::from_secs(5));
    let _ = write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n"
    );
    let resp = s.read_response();
    assert_eq!(resp.map(|r| r.status).ok(), Some(431));
    assert_eq!(get(r.srv.addr(), "/healthz").status, 200);
}

#[test]
fn the_replica_runs_on_jemalloc_with_one_arena_and_small_thread_caches() {
    // The options exported by the binary (`_rjem_malloc_conf`), read back from jemalloc: a
    // misspelt symbol would leave jemalloc's defaults (8 arenas, 32 KiB thread caches), and
    // the replica's 64 search threads would hold 58 MB instead of 22 (serving::alloc).
    assert_allocator_options(
        REPLICA,
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
