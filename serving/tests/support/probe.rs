//! Client-side probes shared by the hardening tests of the `balancer` and `replica`
//! binaries (included with `#[path]`): raw HTTP/1.1 over loopback with bounded waits,
//! slowloris and idle connections, and `/proc` readings of a child process.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// A connection with read and write timeouts of `limit`.
pub fn connect(addr: SocketAddr, limit: Duration) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, limit).expect("connect");
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    s
}

/// A parsed response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Writes one request (keep-alive) with `headers` and `body`.
pub fn send(s: &mut TcpStream, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: test\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    if !body.is_empty() {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "\r\n";
    s.write_all(head.as_bytes()).expect("write request");
    s.write_all(body).expect("write body");
}

/// Reads one response (Content-Length or chunked body), leaving the connection usable.
/// `None` if the connection closed or timed out first.
pub fn read_response(s: &mut TcpStream) -> Option<Resp> {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let mut body = Vec::new();
    if let Some(n) = headers.get("content-length") {
        body.resize(n.parse().ok()?, 0);
        r.read_exact(&mut body).ok()?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    // BufReader may have read ahead only within this response: HTTP/1.1 without pipelining.
    Some(Resp {
        status,
        headers,
        body,
    })
}

/// One request on a fresh connection.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = connect(addr, Duration::from_secs(10));
    send(&mut s, method, target, headers, body);
    read_response(&mut s).unwrap_or_else(|| panic!("no response to {method} {target}"))
}

/// Waits up to `limit` for the peer to close `s` (end of file or reset); how long it took.
pub fn wait_closed(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

/// Opens `n` connections that send a request head one byte every `every`, and returns,
/// per connection, how long after its start the server closed it (`None`: still open
/// after `limit`).
pub fn slowloris(
    addr: SocketAddr,
    n: usize,
    every: Duration,
    limit: Duration,
) -> Vec<Option<Duration>> {
    let threads: Vec<_> = (0..n)
        .map(|i| {
            std::thread::spawn(move || {
                let mut s = connect(addr, Duration::from_secs(5));
                let head = format!("GET /search?q=slow{i} HTTP/1.1\r\nHost: x\r\n");
                let start = Instant::now();
                let mut bytes = head.bytes().chain(std::iter::repeat(b'a'));
                let mut buf = [0u8; 1024];
                s.set_read_timeout(Some(every)).unwrap();
                while start.elapsed() < limit {
                    let b = bytes.next().unwrap_or(b'a');
                    if s.write_all(&[b]).is_err() {
                        return Some(start.elapsed());
                    }
                    match s.read(&mut buf) {
                        Ok(0) => return Some(start.elapsed()),
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(_) => return Some(start.elapsed()),
                    }
                }
                None
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// `n` connections that send nothing.
pub fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| connect(addr, Duration::from_secs(5)))
        .collect()
}

/// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`).
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

/// Sends `signal` to `pid`.
pub fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child process of this test; no memory is involved.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal})");
}

/// Asserts that jemalloc runs the server binary `bin` with every option in `wanted`
/// (`"narenas: 1"`, as jemalloc prints them at exit under
/// `_RJEM_MALLOC_CONF=stats_print:true`; the binary runs with `--help`).
pub fn assert_allocator_options(bin: &str, wanted: &[&str]) {
    let out = Command::new(bin)
        .arg("--help")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .expect("run the binary");
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
