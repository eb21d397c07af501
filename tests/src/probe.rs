//! Hostile clients and process readings for the hardening tests of both servers:
//! slowloris connections that report when they are all open, idle connections, and
//! `/proc` readings (descriptors, memory, open-file limits) of a server process.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::http::is_timeout;
use crate::{wait_until, LIMIT};

/// Connections that send a request head one byte at a time (see [`Slowloris::start`]).
pub struct Slowloris {
    opened: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    n: usize,
    threads: Vec<JoinHandle<Option<Duration>>>,
}

impl Slowloris {
    /// Opens `n` connections to `addr`, each sending a request head one byte every `every`
    /// until the server closes it or `limit` passes. Each connection times itself from its
    /// own connect.
    pub fn start(addr: SocketAddr, n: usize, every: Duration, limit: Duration) -> Slowloris {
        let opened = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let threads = (0..n)
            .map(|i| {
                let (opened, closed) = (Arc::clone(&opened), Arc::clone(&closed));
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                        .expect("slowloris connect");
                    let start = Instant::now();
                    opened.fetch_add(1, Ordering::SeqCst);
                    let head = format!("GET /search?q=slow{i} HTTP/1.1\r\nHost: x\r\n");
                    let mut bytes = head.bytes().chain(std::iter::repeat(b'a'));
                    let mut buf = [0u8; 1024];
                    // The pace is the subject (a client slower than the header timeout),
                    // not an order between requests.
                    s.set_read_timeout(Some(every)).unwrap();
                    let took = loop {
                        if start.elapsed() >= limit {
                            break None;
                        }
                        let b = bytes.next().unwrap_or(b'a');
                        if s.write_all(&[b]).is_err() {
                            break Some(start.elapsed());
                        }
                        match s.read(&mut buf) {
                            Ok(0) => break Some(start.elapsed()),
                            Ok(_) => {}
                            Err(e) if is_timeout(&e) => {}
                            Err(_) => break Some(start.elapsed()),
                        }
                    };
                    if took.is_some() {
                        closed.fetch_add(1, Ordering::SeqCst);
                    }
                    took
                })
            })
            .collect();
        Slowloris {
            opened,
            closed,
            n,
            threads,
        }
    }

    /// Waits (within [`LIMIT`]) until every connection is open.
    pub fn wait_open(&self) {
        wait_until(LIMIT, "every slowloris connection open", || {
            self.opened.load(Ordering::SeqCst) == self.n
        });
    }

    /// Connections the server has closed so far.
    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }

    /// Per connection, how long after its connect the server closed it (`None`: still
    /// open at the limit).
    pub fn join(self) -> Vec<Option<Duration>> {
        self.threads
            .into_iter()
            .map(|t| t.join().expect("slowloris thread"))
            .collect()
    }
}

/// `n` connections that send nothing.
pub fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect"))
        .collect()
}

/// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`), or a count (`Threads`).
pub fn proc_status_kb(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{key} missing in /proc/{pid}/status"))
}

/// Open file descriptors of `pid`.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The soft and hard open-file limits of `pid`.
pub fn nofile(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("proc limits");
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// Makes `cmd` start with the open-file limits `soft` and `hard`.
pub fn with_nofile(cmd: &mut Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // setrlimit, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Asserts that jemalloc runs the server binary `bin` with every option in `wanted`
/// (`"narenas: 1"`, as jemalloc prints them at exit under
/// `_RJEM_MALLOC_CONF=stats_print:true`; the binary runs with `--help`).
pub fn assert_allocator_options(bin: &str, wanted: &[&str]) {
    let out = crate::output_within(
        Command::new(bin)
            .arg("--help")
            .env("_RJEM_MALLOC_CONF", "stats_print:true"),
        LIMIT,
        &format!("{bin} --help"),
    );
    assert!(out.status.success(), "{bin} --help: {:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let opts: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("opt."))
        .map(|l| l.split(" (").next().unwrap_or(l))
        .collect();
    for want in wanted {
        assert!(
            opts.contains(want),
            "jemalloc option {want:?} not in force: {opts:?}"
        );
    }
}
