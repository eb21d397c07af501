//! Support for ballot's end-to-end tests: the real binaries (`ballot`, `replica`,
//! `balancer`), located next to the test executable and built if missing; child processes
//! that are always killed and reaped; and waits that can never hang: every child has a
//! deadline, every readiness line a timeout, and a test that runs past its deadline fails
//! with a message naming what it waited for.
//!
//! Heavy live tests (many processes, thousands of requests) take [`heavy`] so that two of
//! them never share the machine; timing-sensitive assertions are therefore measured on a
//! machine no busier than the rest of the suite makes it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The cargo profile directory the tests were built in (`target/release` or `target/debug`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable sits in target/<profile>/deps")
        .to_path_buf()
}

/// The path of the workspace binary `name` (`ballot`, `replica`, `balancer`), built by
/// `cargo build` in the tests' own profile when it is not there yet (for example when only
/// this package's tests were asked for).
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<()>> = OnceLock::new();
    let path = profile_dir().join(name);
    if path.is_file() {
        return path;
    }
    let _once = BUILT.get_or_init(|| Mutex::new(())).lock();
    if path.is_file() {
        return path;
    }
    let package = match name {
        "ballot" => "pipelines",
        "replica" => "replica",
        "balancer" => "balancer-server",
        other => panic!("unknown binary {other}"),
    };
    let release = profile_dir().file_name().is_some_and(|p| p == "release");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(["build", "--locked", "-p", package, "--bin", name]);
    if release {
        cargo.arg("--release");
    }
    let out = output_within(&mut cargo, Duration::from_secs(1800), "cargo build");
    assert!(
        out.status.success(),
        "cargo build -p {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        path.is_file(),
        "{} missing after cargo build",
        path.display()
    );
    path
}

/// A guard that serializes the heavy live tests of one test binary.
pub fn heavy() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A child process that is killed and reaped when dropped.
#[derive(Debug)]
pub struct Running {
    child: Child,
    what: String,
}

impl Running {
    /// Wraps `child`, described by `what` in messages.
    pub fn new(child: Child, what: impl Into<String>) -> Self {
        Running {
            child,
            what: what.into(),
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for the process to end, failing the test after `limit`.
    pub fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(s) = self.try_wait() {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "{} did not finish within {limit:?}",
                self.what
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (a `libc::SIG*` number) to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on a child we own and have not reaped; no memory is involved.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.what);
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The child's stdout pipe, if it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `cmd` to completion with its output captured, failing the test (and killing the
/// process) if it takes longer than `limit`. `what` names it in the failure message.
pub fn output_within(cmd: &mut Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let mut running = Running::new(child, what);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = running.try_wait() {
            break s;
        }
        if start.elapsed() > limit {
            running.kill();
            let stderr = err.join().unwrap_or_default();
            panic!(
                "{what} did not finish within {limit:?}; its stderr:\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Runs `ballot <args>` to completion within `limit`.
pub fn ballot_within(args: &[&str], limit: Duration) -> Output {
    output_within(
        Command::new(bin("ballot")).args(args),
        limit,
        &format!("ballot {}", args.join(" ")),
    )
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Starts `cmd` (stdout piped, stderr to `stderr_log`) and waits up to `limit` for the line
/// `listening on ADDR` on its stdout. Returns the running child and `ADDR`; the other stdout
/// lines are kept flowing (a thread reads them) and those starting with `prefix ` are sent
/// back through the returned receiver as `(prefix, rest)` pairs.
pub fn start_listening(
    cmd: &mut Command,
    stderr_log: &Path,
    limit: Duration,
    what: &str,
) -> (Running, String, std::sync::mpsc::Receiver<String>) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr_log).expect("stderr log"))
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut running = Running::new(child, what);
    let stdout = running.take_stdout().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    return (running, addr.trim().to_owned(), rx);
                }
            }
            Err(_) => panic!(
                "{what} did not print `listening on` within {limit:?}; stderr:\n{}",
                std::fs::read_to_string(stderr_log).unwrap_or_default()
            ),
        }
    }
}

/// `$BALLOT_DATA/<name>`: `None` when `BALLOT_DATA` is unset (the test then skips); panics
/// when it is set but the file is missing (the test must fail, not skip).
pub fn real_data(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("BALLOT_DATA")?;
    let path = PathBuf::from(dir).join(name);
    assert!(
        path.is_file(),
        "BALLOT_DATA is set but {} is missing",
        path.display()
    );
    Some(path)
}

/// One plain HTTP/1.0 `GET path` to `addr`, with connect and read timeouts of `limit`:
/// the status code and the body, or `None` if the server could not be reached.
pub fn http_get(addr: &str, path: &str, limit: Duration) -> Option<(u16, String)> {
    use std::io::Write;
    let sock: std::net::SocketAddr = addr.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.set_write_timeout(Some(limit)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The sum over its labels of metric `name` in a Prometheus text exposition (`GET
/// /metrics`), or `None` when no sample of it is there.
pub fn prometheus_sum(text: &str, name: &str) -> Option<f64> {
    let mut samples = text
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .peekable();
    samples.peek()?;
    Some(samples.sum())
}

/// Polls `cond` every 20 ms until it holds, failing the test with `what` after `limit`;
/// returns how long it took.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::prometheus_sum;

    #[test]
    fn prometheus_sum_adds_the_labels_of_one_metric_only() {
        let text = "# TYPE ballot_retries_total counter\n\
                    ballot_retries_total 3\n\
                    ballot_ejections_total{replica=\"r0\"} 2\n\
                    ballot_ejections_total{replica=\"r1\"} 5\n\
                    ballot_ejections_total_extra 100\n";
        assert_eq!(prometheus_sum(text, "ballot_ejections_total"), Some(7.0));
        assert_eq!(prometheus_sum(text, "ballot_retries_total"), Some(3.0));
        assert_eq!(prometheus_sum(text, "ballot_shed_total"), None);
    }
}
