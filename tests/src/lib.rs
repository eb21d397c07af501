//! Support for ballot's end-to-end and server tests, shared by every test that starts a
//! server process or talks HTTP to one (`tests/tests/*`, `balancer/server/tests/*`,
//! `replica/tests/*`, `pipelines/tests/*`):
//!
//! - [`bins`]: the real binaries (`ballot`, `replica`, `balancer`), located next to the
//!   test executable and rebuilt when a source they are made from is newer than they are,
//!   so a test never runs old code;
//! - [`process`]: child processes that are always killed and reaped ([`Running`]), commands
//!   run under a deadline ([`output_within`]), and servers started until their
//!   `listening on ADDR` line ([`Server`], [`start_listening`]);
//! - [`http`]: one small blocking HTTP/1.1 client ([`Conn`], [`request`]) that parses
//!   status, headers, `Content-Length`, chunked and close-delimited bodies, with timeouts;
//! - [`backend`]: a programmable fake replica ([`Backend`]) that counts what it receives
//!   and can hold requests until the test releases them;
//! - [`balancer`]: the `balancer` binary started on a config ([`Balancer`]), with its admin
//!   API, metrics and log at hand;
//! - [`probe`]: hostile clients (slowloris, idle connections) and `/proc` readings;
//! - [`table`]: voting tables written for a balancer's config ([`write_votes`]).
//!
//! Every wait has a deadline, and a test that runs past it fails with a message naming what
//! it waited for. Waits are for signals (a counter reaching a value, a line printed), never
//! for a fixed time: [`LIMIT`] is only a hang guard.
//!
//! Heavy live tests (many processes, thousands of requests) take [`heavy`] so that two of
//! them never share the machine.

pub mod backend;
pub mod balancer;
pub mod bins;
pub mod http;
pub mod probe;
pub mod process;
pub mod table;

use std::path::PathBuf;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use backend::{Backend, Reply, Request};
pub use balancer::Balancer;
pub use bins::bin;
pub use http::{get, http_get, replica_queries, request, try_request, Conn, Response};
pub use process::{
    ballot_within, finish_replay, output_within, spawn_piped, start_ballot, start_listening,
    start_replay, start_replica, Running, Server,
};
pub use table::write_votes;

/// How long a test waits for something that should happen within a second: only a hang
/// guard, generous for a busy machine. What a test checks is counted (requests received,
/// checks run, lines printed), not timed.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A guard that serializes the heavy live tests of one test binary.
pub fn heavy() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// The sum over its labels of metric `name` in a Prometheus text exposition (`GET
/// /metrics`), or `None` when no sample of it is there ([`data::prometheus`]).
pub fn prometheus_sum(text: &str, name: &str) -> Option<f64> {
    data::prometheus::sum(text, name, |_| true)
}

/// Polls `cond` every 20 ms until it holds, failing the test with `what` after `limit`;
/// returns how long it took. The poll interval orders nothing: `cond` is the signal.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        // A poll interval: `cond` is the signal.
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
