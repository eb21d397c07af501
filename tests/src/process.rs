//! Child processes of the tests: [`Running`] kills and reaps its process when dropped,
//! [`output_within`] runs a command to completion under a deadline, and [`Server`] starts
//! a server until it prints `listening on ADDR` and keeps its stdout lines and its stderr
//! log for the test; [`start_replay`] and [`finish_replay`] run an open-loop `ballot
//! replay`. No test handles a `std::process::Child` itself.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::LIMIT;

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
            // A poll interval: the exit is the signal.
            std::thread::sleep(Duration::from_millis(10));
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
        // A poll interval: the exit is the signal.
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
        Command::new(crate::bin("ballot")).args(args),
        limit,
        &format!("ballot {}", args.join(" ")),
    )
}

/// Starts `cmd` with stdin closed, stdout piped and stderr written to `stderr_log`; returns
/// the running child and its stdout lines. A thread reads stdout to its end, so the child
/// never blocks on a full pipe, also after the receiver is dropped.
pub fn spawn_piped(
    cmd: &mut Command,
    stderr_log: &Path,
    what: &str,
) -> (Running, Receiver<String>) {
    let log = std::fs::File::create(stderr_log)
        .unwrap_or_else(|e| panic!("{what}: cannot create {}: {e}", stderr_log.display()));
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut running = Running::new(child, what);
    let stdout = running.take_stdout().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut open = true;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // Once nobody listens, keep reading (and dropping) so the child never blocks.
            open = open && tx.send(line).is_ok();
        }
    });
    (running, rx)
}

/// Waits up to `limit` for a line starting with `prefix` among `lines`; returns the rest of
/// that line and every line before it. Panics with `what`'s stderr log on a timeout or an
/// early end of stdout.
fn wait_line(
    lines: &Receiver<String>,
    prefix: &str,
    limit: Duration,
    what: &str,
    stderr_log: &Path,
) -> (String, Vec<String>) {
    let start = Instant::now();
    let mut before = Vec::new();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        match lines.recv_timeout(left) {
            Ok(line) => match line.strip_prefix(prefix) {
                Some(rest) => return (rest.trim().to_owned(), before),
                None => before.push(line),
            },
            Err(e) => panic!(
                "{what} did not print `{prefix}` within {limit:?} ({}); stdout so far: {before:?}; stderr:\n{}",
                match e {
                    RecvTimeoutError::Timeout => "timed out",
                    RecvTimeoutError::Disconnected => "its stdout ended",
                },
                std::fs::read_to_string(stderr_log).unwrap_or_default()
            ),
        }
    }
}

/// Starts `cmd` (stdout piped, stderr to `stderr_log`) and waits up to `limit` for the line
/// `listening on ADDR` on its stdout. Returns the running child, `ADDR`, and the stdout
/// lines after that one (a thread keeps reading them).
pub fn start_listening(
    cmd: &mut Command,
    stderr_log: &Path,
    limit: Duration,
    what: &str,
) -> (Running, String, Receiver<String>) {
    let (running, rx) = spawn_piped(cmd, stderr_log, what);
    let (addr, _) = wait_line(&rx, "listening on ", limit, what, stderr_log);
    (running, addr, rx)
}

/// A server process started until it printed `listening on ADDR`: its address, its stdout
/// lines (those before that line, and the later ones as they come), and its stderr log
/// (printed when a test fails while it runs). Killed and reaped when dropped.
#[derive(Debug)]
pub struct Server {
    process: Running,
    addr: SocketAddr,
    before: Vec<String>,
    lines: Receiver<String>,
    stderr_log: PathBuf,
    what: String,
}

impl Server {
    /// Starts `cmd` with its stderr written to `stderr_log`, and waits up to [`LIMIT`] for
    /// `listening on ADDR`.
    pub fn start(cmd: &mut Command, stderr_log: impl Into<PathBuf>, what: &str) -> Server {
        let stderr_log = stderr_log.into();
        let (process, lines) = spawn_piped(cmd, &stderr_log, what);
        let (addr, before) = wait_line(&lines, "listening on ", LIMIT, what, &stderr_log);
        let addr = addr
            .parse()
            .unwrap_or_else(|e| panic!("{what}: `listening on {addr}`: {e}"));
        Server {
            process,
            addr,
            before,
            lines,
            stderr_log,
            what: what.to_owned(),
        }
    }

    /// The address of its `listening on` line.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// The stdout lines printed before `listening on`.
    pub fn lines_before(&self) -> &[String] {
        &self.before
    }

    /// Waits up to [`LIMIT`] for a stdout line starting with `prefix` (skipping the lines
    /// before it) and returns the rest of it.
    pub fn wait_line(&self, prefix: &str) -> String {
        wait_line(&self.lines, prefix, LIMIT, &self.what, &self.stderr_log).0
    }

    /// The stdout lines printed so far and not read yet.
    pub fn lines(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Every stdout line not read yet, up to the end of stdout (the process has exited or
    /// closed it), waiting at most [`LIMIT`].
    pub fn lines_to_end(&self) -> Vec<String> {
        let start = Instant::now();
        let mut out = Vec::new();
        loop {
            match self
                .lines
                .recv_timeout(LIMIT.saturating_sub(start.elapsed()))
            {
                Ok(l) => out.push(l),
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}: stdout still open after {LIMIT:?}", self.what)
                }
            }
        }
    }

    /// Its stderr log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    /// The path of its stderr log.
    pub fn log_path(&self) -> &Path {
        &self.stderr_log
    }

    /// Sends `signal` (a `libc::SIG*` number) to the process.
    pub fn signal(&self, signal: i32) {
        self.process.signal(signal);
    }

    /// The exit status if the process has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.process.try_wait()
    }

    /// Waits for the process to end, failing the test after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        self.process.wait_within(limit)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.process.kill();
        if std::thread::panicking() {
            // The end of the log: what the server said while the test failed.
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(200)..];
            eprintln!(
                "{} stderr ({}, last {} lines):\n{}",
                self.what,
                self.stderr_log.display(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Starts `ballot replay` of the first `queries` queries of the synthetic default log,
/// open loop at `rate` queries/s, against the balancer at `addr`: its JSON report goes to
/// `dir/replay.json`, its stderr to `dir/replay.stderr` ([`finish_replay`] reads them).
pub fn start_replay(
    addr: impl std::fmt::Display,
    queries: usize,
    rate: u32,
    dir: &Path,
) -> Running {
    let child = Command::new(crate::bin("ballot"))
        .args([
            "replay",
            "--target",
            &format!("http://{addr}"),
            "--synth-queries",
            &queries.to_string(),
            "--part",
            "all",
            "--rate",
            &rate.to_string(),
            "--timeout",
            "20s",
            "--json",
            dir.join("replay.json").to_str().expect("a UTF-8 path"),
        ])
        .stdout(Stdio::null())
        .stderr(File::create(dir.join("replay.stderr")).expect("replay.stderr"))
        .spawn()
        .expect("replay starts");
    Running::new(child, "ballot replay")
}

/// Waits (at most two minutes) for a replay [`start_replay`] started in `dir` and returns
/// its JSON report; fails with its stderr if it failed.
pub fn finish_replay(mut replay: Running, dir: &Path) -> serde_json::Value {
    let status = replay.wait_within(Duration::from_secs(120));
    assert!(
        status.success(),
        "replay failed: {}",
        std::fs::read_to_string(dir.join("replay.stderr")).unwrap_or_default()
    );
    let text = std::fs::read_to_string(dir.join("replay.json")).expect("replay.json");
    serde_json::from_str(&text).expect("a JSON report")
}

/// Starts the server `ballot <args>` (stderr to `stderr_log`) until it prints `listening on`.
pub fn start_ballot(args: &[&str], stderr_log: &Path) -> Server {
    Server::start(
        Command::new(crate::bin("ballot")).args(args),
        stderr_log,
        &format!("ballot {}", args.join(" ")),
    )
}

/// Starts `ballot replica` `id` on `index` with a 2 MB cache on a loopback port the OS
/// picks, its stderr to `dir/<id>.stderr`.
pub fn start_replica(index: &Path, id: &str, dir: &Path) -> Server {
    start_ballot(
        &[
            "replica",
            "--index",
            index.to_str().expect("a UTF-8 path"),
            "--listen",
            "127.0.0.1:0",
            "--cache-bytes",
            "2000000",
            "--id",
            id,
        ],
        &dir.join(format!("{id}.stderr")),
    )
}
