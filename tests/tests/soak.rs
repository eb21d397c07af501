//! The chaos soak's short version (the long one is `bench/soak.sh`): four real replicas
//! behind the real balancer (policy `table`, trained by `ballot train`), an open-loop
//! `ballot replay` at a modest fixed rate in three windows, and meanwhile a chaos loop that
//! kills a replica and restarts it, pauses another for 10 s (SIGSTOP/SIGCONT), reloads the
//! table through the admin API (by path, then by upload), drains and re-enables a third,
//! and holds slowloris connections to the balancer. It checks that no request fails, that
//! the balancer survives and stays within bounded descriptors and memory, and that the
//! slowloris connections are closed by the header timeout; it prints the per-window p99 and
//! the `/proc` samples.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use e2e::{ballot_within, bin, heavy, stderr, try_request, Balancer, Server};
use serde_json::Value;

const TOKEN: &str = "soak-token";
const RATE: u32 = 200;
const WINDOWS: u32 = 3;
const WINDOW_SECS: u32 = 20;
const SLOWLORIS: usize = 50;
const QUERIES: &str = "20000";

/// One `/proc` sample of a process.
#[derive(Clone, Debug)]
struct Sample {
    t: f64,
    name: String,
    rss_kb: u64,
    fds: usize,
}

fn sample(pid: u32, name: &str, t: f64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample {
        t,
        name: name.to_owned(),
        rss_kb,
        fds,
    })
}

/// One admin request with the token; the status code (0 if there was no answer).
fn admin(addr: SocketAddr, method: &str, path: &str, content_type: &str, body: &[u8]) -> u16 {
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if !content_type.is_empty() {
        headers.push(("Content-Type", content_type));
    }
    try_request(addr, method, path, &headers, body, Duration::from_secs(10)).map_or(0, |r| r.status)
}

fn start_replica(index: &Path, id: &str, listen: &str, log: &Path) -> Server {
    Server::start(
        Command::new(bin("replica")).args([
            "--index",
            index.to_str().unwrap(),
            "--listen",
            listen,
            "--cache-bytes",
            "400000",
            "--id",
            id,
        ]),
        log,
        &format!("replica {id}"),
    )
}

/// Holds `n` connections that send a request head one byte a second, reopening each one
/// the server closes; returns how many the server closed.
fn slowloris(addr: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let open = |i: usize| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
            s.set_write_timeout(Some(Duration::from_secs(1))).ok()?;
            s.set_nonblocking(false).ok()?;
            write!(s, "GET /search?q=slow{i} HTTP/1.1\r\nHost: x\r\n").ok()?;
            Some(s)
        };
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(open).collect();
        let mut closed = 0;
        while !stop.load(Ordering::Relaxed) {
            // The pace is the subject (a byte a second, slower than the header timeout),
            // not an order between requests.
            thread::sleep(Duration::from_secs(1));
            for (i, c) in conns.iter_mut().enumerate() {
                let alive = c.as_mut().is_some_and(|s| {
                    let _ = s.set_nonblocking(true);
                    let mut b = [0u8; 64];
                    let eof = matches!(s.read(&mut b), Ok(0));
                    let _ = s.set_nonblocking(false);
                    !eof && s.write_all(b"a").is_ok()
                });
                if !alive {
                    if c.is_some() {
                        closed += 1;
                    }
                    *c = open(i);
                }
            }
        }
        closed
    })
}

#[test]
fn chaos_soak_short() {
    let _heavy = heavy();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let index = dir.join("index");
    let tables = dir.join("tables");
    std::fs::create_dir(&tables).unwrap();
    let table = tables.join("table.parquet");
    let built = ballot_within(
        &[
            "build-index",
            "--synth-queries",
            QUERIES,
            "--docs",
            "50000",
            "-o",
            index.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(built.status.success(), "{}", stderr(&built));
    let trained = ballot_within(
        &[
            "train",
            "--synth-queries",
            QUERIES,
            "--sizes",
            index.join("sizes.parquet").to_str().unwrap(),
            "--replicas",
            "4",
            "-o",
            table.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert!(trained.status.success(), "{}", stderr(&trained));

    let mut replicas: Vec<Server> = (0..4)
        .map(|i| {
            start_replica(
                &index,
                &format!("r{i}"),
                "127.0.0.1:0",
                &dir.join(format!("r{i}.stderr")),
            )
        })
        .collect();
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         tables_dir = \"{}\"\nheader_timeout_ms = 3000\n\
         request_timeout_ms = 1000\ndeadline_ms = 5000\nretries = 2\n\n\
         [health]\ninterval_ms = 300\ntimeout_ms = 300\nfall = 2\nrise = 2\n\n\
         [policy]\nname = \"table\"\ntable = \"{}\"\n",
        tables.display(),
        table.display()
    );
    for (i, r) in replicas.iter().enumerate() {
        let addr = r.addr();
        config += &format!("\n[[replicas]]\nname = \"r{i}\"\naddress = \"{addr}\"\n");
    }
    let balancer = Balancer::start(bin("balancer"), &config);
    let (lb, admin_addr) = (balancer.addr(), balancer.admin_addr());

    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let pids: Arc<Mutex<Vec<(String, u32)>>> = Arc::new(Mutex::new(
        std::iter::once(("balancer".to_owned(), balancer.pid()))
            .chain(
                replicas
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (format!("r{i}"), r.pid())),
            )
            .collect(),
    ));
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let sampler = {
        let (stop, pids, samples) = (Arc::clone(&stop), Arc::clone(&pids), Arc::clone(&samples));
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = start.elapsed().as_secs_f64();
                for (name, pid) in pids.lock().unwrap().clone() {
                    if let Some(s) = sample(pid, &name, t) {
                        samples.lock().unwrap().push(s);
                    }
                }
                // A sampling interval, not an order between requests.
                thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let slow = slowloris(lb, SLOWLORIS, Arc::clone(&stop));

    // The chaos loop, on a fixed timeline against the fixed-rate windows of load: a soak's
    // schedule, not an order between requests (no assertion depends on where an event
    // falls); it hands the replicas back when done.
    let events = Arc::new(Mutex::new(Vec::<(f64, String)>::new()));
    let (back_tx, back_rx) = mpsc::channel();
    let chaos = {
        let (events, pids) = (Arc::clone(&events), Arc::clone(&pids));
        let (index, dir, table) = (index.clone(), dir.to_path_buf(), table.clone());
        let mut replicas = std::mem::take(&mut replicas);
        thread::spawn(move || {
            let log = |what: String| {
                let t = start.elapsed().as_secs_f64();
                eprintln!("[{t:5.1} s] {what}");
                events.lock().unwrap().push((t, what));
            };
            let at = |secs: u64| {
                let t = Duration::from_secs(secs);
                if let Some(d) = t.checked_sub(start.elapsed()) {
                    // The chaos schedule (see above), not an order between requests.
                    thread::sleep(d);
                }
            };
            at(6);
            let port = replicas[0].addr().port();
            replicas[0].kill();
            log("kill -9 r0".into());
            // Down for a moment: part of the chaos schedule.
            thread::sleep(Duration::from_millis(500));
            let restarted = start_replica(
                &index,
                "r0",
                &format!("127.0.0.1:{port}"),
                &dir.join("r0-restarted.stderr"),
            );
            pids.lock().unwrap()[1].1 = restarted.pid();
            replicas[0] = restarted;
            log("r0 restarted".into());
            at(16);
            replicas[1].signal(libc::SIGSTOP);
            log("SIGSTOP r1".into());
            at(26);
            replicas[1].signal(libc::SIGCONT);
            log("SIGCONT r1".into());
            at(30);
            let code = admin(
                admin_addr,
                "POST",
                "/admin/table",
                "application/json",
                br#"{"path": "table.parquet"}"#,
            );
            log(format!("table reload by path: {code}"));
            at(34);
            let bytes = std::fs::read(&table).unwrap();
            let code = admin(
                admin_addr,
                "POST",
                "/admin/table",
                "application/octet-stream",
                &bytes,
            );
            log(format!("table reload by upload: {code}"));
            at(38);
            let code = admin(admin_addr, "POST", "/admin/replicas/r2/drain", "", b"");
            log(format!("drain r2: {code}"));
            at(43);
            let code = admin(admin_addr, "POST", "/admin/replicas/r2/enable", "", b"");
            log(format!("enable r2: {code}"));
            let _ = back_tx.send(replicas);
        })
    };

    // The load: back-to-back open-loop windows.
    let mut windows = Vec::new();
    for w in 1..=WINDOWS {
        let report = dir.join(format!("window-{w}.json"));
        let out = e2e::output_within(
            Command::new(bin("ballot")).args([
                "replay",
                "--target",
                &format!("http://{lb}"),
                "--synth-queries",
                QUERIES,
                "--part",
                "all",
                "--shuffle-seed",
                &w.to_string(),
                "--rate",
                &RATE.to_string(),
                "--duration",
                &format!("{WINDOW_SECS}s"),
                "--timeout",
                "10s",
                "--json",
                report.to_str().unwrap(),
            ]),
            Duration::from_secs(u64::from(WINDOW_SECS) + 60),
            &format!("replay window {w}"),
        );
        assert!(out.status.success(), "window {w}: {}", stderr(&out));
        let text = std::fs::read_to_string(&report).unwrap();
        windows.push(serde_json::from_str::<Value>(&text).unwrap());
    }
    chaos.join().expect("chaos loop");
    let mut replicas = back_rx.recv().unwrap();
    let alive = try_request(lb, "GET", "/healthz", &[], b"", Duration::from_secs(5)).ok();
    stop.store(true, Ordering::Relaxed);
    let slowloris_closed = slow.join().unwrap();
    sampler.join().unwrap();

    // Report.
    let mut failed = 0;
    let mut sent = 0;
    eprintln!("window  sent    ok  failed  p99_ms  errors");
    for (w, r) in windows.iter().enumerate() {
        eprintln!(
            "{:>6}  {:>5}  {:>5}  {:>6}  {:>6.1}  {}",
            w + 1,
            r["sent"],
            r["ok"],
            r["error_total"],
            r["latency_ms"]["p99"].as_f64().unwrap_or(0.0),
            r["errors"]
        );
        failed += r["error_total"].as_u64().unwrap();
        sent += r["sent"].as_u64().unwrap();
    }
    let samples = samples.lock().unwrap().clone();
    let of = |name: &str| -> Vec<Sample> {
        samples.iter().filter(|s| s.name == name).cloned().collect()
    };
    for name in ["balancer", "r0", "r1", "r2", "r3"] {
        let s = of(name);
        let line: Vec<String> = s
            .iter()
            .step_by(5)
            .map(|s| format!("{:.0}s {}MB/{}fd", s.t, s.rss_kb / 1024, s.fds))
            .collect();
        eprintln!("{name}: {}", line.join("  "));
    }
    eprintln!(
        "sent {sent}, failed {failed}; slowloris connections closed by the server: {slowloris_closed}; events: {:?}",
        events.lock().unwrap()
    );

    assert_eq!(
        alive.map(|r| r.status),
        Some(200),
        "the balancer answers after the soak"
    );
    for e in events.lock().unwrap().iter() {
        if e.1.contains("reload") || e.1.contains("drain") || e.1.contains("enable") {
            assert!(e.1.ends_with("200"), "{e:?}");
        }
    }
    assert!(
        sent >= u64::from(RATE * WINDOW_SECS * WINDOWS) * 9 / 10,
        "sent {sent}"
    );
    // Kills are retried on the next replica and a paused replica times out into a retry:
    // no client request may fail.
    assert_eq!(failed, 0, "failed requests: {windows:?}");
    // The header timeout (3 s) closes every slowloris connection again and again.
    assert!(
        slowloris_closed >= SLOWLORIS as u64 * 5,
        "slowloris connections closed: {slowloris_closed}"
    );
    // Bounded resources after the first window: descriptors within the slowloris
    // connections plus a margin, memory within 50% plus 16 MB.
    let warm = f64::from(WINDOW_SECS);
    let bal: Vec<Sample> = of("balancer").into_iter().filter(|s| s.t >= warm).collect();
    assert!(bal.len() >= 10, "{} balancer samples", bal.len());
    let fds_lo = bal.iter().map(|s| s.fds).min().unwrap();
    let fds_hi = bal.iter().map(|s| s.fds).max().unwrap();
    assert!(
        fds_hi <= fds_lo + SLOWLORIS + 64,
        "balancer descriptors {fds_lo}..{fds_hi}"
    );
    let rss_first = bal[0].rss_kb;
    let rss_max = bal.iter().map(|s| s.rss_kb).max().unwrap();
    assert!(
        rss_max <= rss_first * 3 / 2 + 16 * 1024,
        "balancer RSS {rss_first} -> {rss_max} kB"
    );
    for r in &mut replicas {
        r.kill();
    }
}
