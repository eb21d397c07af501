//! The `balancer` binary started on a config text for a test ([`Balancer`]): its client and
//! admin addresses, requests with the admin token, its `/admin/replicas` state and
//! `/metrics`, its log, and signals. Built on [`Server`]: killed and reaped when dropped,
//! its log printed when the test fails.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use crate::http::{request, Response};
use crate::{prometheus_sum, wait_until, Server, LIMIT};

/// A running balancer (see the module header).
#[derive(Debug)]
pub struct Balancer {
    server: Server,
    admin: SocketAddr,
    token: Option<String>,
    dir: tempfile::TempDir,
}

/// The value of `admin_token = "..."` in a config text.
fn token_of(config: &str) -> Option<String> {
    config.lines().find_map(|l| {
        let v = l.trim().strip_prefix("admin_token")?.trim_start();
        let v = v.strip_prefix('=')?.trim();
        Some(v.strip_prefix('"')?.strip_suffix('"')?.to_owned())
    })
}

impl Balancer {
    /// Starts `program` (the `balancer` binary) on `config`, in a temporary directory.
    pub fn start(program: impl AsRef<OsStr>, config: &str) -> Balancer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Balancer::start_with(Command::new(program), dir, config)
    }

    /// Starts `cmd` (the `balancer` binary or `ballot balancer`, with any arguments and
    /// settings of its own) with `--config DIR/balancer.toml` holding `config`, its stderr
    /// in `DIR/balancer.stderr`, and waits for both `listening on` and `admin on`. The
    /// admin requests carry the config's `admin_token`.
    pub fn start_with(mut cmd: Command, dir: tempfile::TempDir, config: &str) -> Balancer {
        let path = dir.path().join("balancer.toml");
        std::fs::write(&path, config).expect("write the balancer config");
        cmd.arg("--config").arg(&path);
        let server = Server::start(&mut cmd, dir.path().join("balancer.stderr"), "balancer");
        let admin = server.wait_line("admin on ");
        let admin = admin
            .parse()
            .unwrap_or_else(|e| panic!("`admin on {admin}`: {e}"));
        Balancer {
            server,
            admin,
            token: token_of(config),
            dir,
        }
    }

    /// The client listener.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The admin listener.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Its temporary directory (config, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its stderr log so far.
    pub fn log(&self) -> String {
        self.server.log()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: i32) {
        self.server.signal(signal);
    }

    /// The exit status if the process has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.server.try_wait()
    }

    /// Waits for the process to end, failing the test after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        self.server.wait_exit(limit)
    }

    /// `GET target` on the client listener.
    pub fn get(&self, target: &str) -> Response {
        crate::http::get(self.addr(), target)
    }

    /// `GET /search?q=QUERY` (`q` as given: encode it yourself).
    pub fn search(&self, q: &str) -> Response {
        self.get(&format!("/search?q={q}"))
    }

    /// A request to the admin listener with the admin token.
    pub fn admin(&self, method: &str, target: &str, body: &[u8]) -> Response {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        request(self.admin, method, target, &headers, body)
    }

    /// `GET /metrics` of the admin listener.
    pub fn metrics(&self) -> String {
        let r = self.admin("GET", "/metrics", b"");
        assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
        r.text()
    }

    /// The sum of every series of metric `name` (`None` when it has none).
    pub fn metric(&self, name: &str) -> Option<f64> {
        prometheus_sum(&self.metrics(), name)
    }

    /// The value of the one series `name{labels}` (`labels` as exported, e.g.
    /// `replica="r0"`); `None` when the balancer exports no such series.
    pub fn series(&self, name: &str, labels: &str) -> Option<f64> {
        data::prometheus::sum(&self.metrics(), name, |s| s.labels == labels)
    }

    /// `GET /admin/replicas`: the replicas' states.
    pub fn replicas(&self) -> Vec<Value> {
        let r = self.admin("GET", "/admin/replicas", b"");
        assert_eq!(r.status, 200, "GET /admin/replicas: {}", r.text());
        r.json()["replicas"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("no replicas in {}", r.text()))
    }

    /// The state of replica `name` in `/admin/replicas` (`Null` when it is not there).
    pub fn replica(&self, name: &str) -> Value {
        self.replicas()
            .into_iter()
            .find(|r| r["name"] == name)
            .unwrap_or(Value::Null)
    }

    /// A number field of replica `name` in `/admin/replicas` (`in_flight`, `queued`,
    /// `checks`, `health_changed_at_check`).
    pub fn replica_count(&self, name: &str, field: &str) -> u64 {
        let r = self.replica(name);
        r[field]
            .as_u64()
            .unwrap_or_else(|| panic!("no {field} for {name} in {r}"))
    }

    /// Waits (within [`LIMIT`]) until replica `name` has `n` requests queued for it.
    pub fn wait_queued(&self, name: &str, n: u64) {
        let what = format!("{n} requests queued for {name}");
        wait_until(LIMIT, &what, || self.replica_count(name, "queued") >= n);
    }

    /// Waits (within [`LIMIT`]) until replica `name` is `healthy` (or not), and returns
    /// the check count at which its health changed.
    pub fn wait_health(&self, name: &str, healthy: bool) -> u64 {
        let what = format!("{name} {}", if healthy { "re-admitted" } else { "ejected" });
        let took = wait_until(LIMIT, &what, || self.replica(name)["healthy"] == healthy);
        let at = self.replica_count(name, "health_changed_at_check");
        eprintln!("{what} after {took:?}, at check {at}");
        at
    }
}

#[cfg(test)]
mod tests {
    use super::token_of;

    #[test]
    fn the_admin_token_is_read_from_the_config() {
        let c = "listen = \"x\"\nadmin_token = \"s3cret\"\n[health]\n";
        assert_eq!(token_of(c).as_deref(), Some("s3cret"));
        assert_eq!(token_of("listen = \"x\"\n"), None);
    }
}
