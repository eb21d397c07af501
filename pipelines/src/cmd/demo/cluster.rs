//! The live demo's child processes: R replicas and one balancer, started from this very
//! executable (`ballot replica`, `ballot balancer`, the same code as the `replica` and
//! `balancer` binaries) on loopback ports the OS picks.
//!
//! Every child is stopped (SIGTERM, then SIGKILL after a grace period) when its [`Proc`] is
//! dropped, when the demo gets Ctrl-C or SIGTERM ([`stop_children_on_signal`]), and, on
//! Linux, by the kernel if the demo itself dies (`PR_SET_PDEATHSIG`). A child's output
//! goes to a log file next to the report, which an error message names.

use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Longest wait for a child to print its `listening on ADDR` line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Grace period between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Process ids of the running children, for the signal handler.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<u32>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sends `signal` to process `pid`.
fn send_signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Installs (once) a handler that, on Ctrl-C or SIGTERM, stops every running child and
/// exits with status 130 or 143.
pub fn stop_children_on_signal() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let Ok(mut term) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                else {
                    return;
                };
                // The shell convention: 128 + the signal's number.
                let status = tokio::select! {
                    _ = tokio::signal::ctrl_c() => 128 + libc::SIGINT,
                    _ = term.recv() => 128 + libc::SIGTERM,
                };
                let pids = running().clone();
                eprintln!("\ninterrupted: stopping {} child processes", pids.len());
                for &pid in &pids {
                    send_signal(pid, libc::SIGTERM);
                }
                let deadline = Instant::now() + STOP_GRACE;
                while Instant::now() < deadline && !running().is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                for pid in running().iter() {
                    send_signal(*pid, libc::SIGKILL);
                }
                std::process::exit(status);
            });
        });
    });
}

/// One running child process.
pub struct Proc {
    name: String,
    child: Child,
    /// The address it printed in its `listening on ADDR` line.
    pub addr: SocketAddr,
    /// Where its output goes.
    pub log: PathBuf,
    stopped: bool,
}

impl Proc {
    /// Starts `ballot <args>` with output to `log`, and waits for its `listening on ADDR`.
    pub fn start(name: &str, args: &[String], log: &Path) -> Result<Proc> {
        let exe = own_executable()?;
        let out = File::create(log).with_context(|| format!("{}: cannot create", log.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("{}: cannot reopen", log.display()))?;
        let mut cmd = Command::new(&exe);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: getpid(2), prctl(2) and getppid(2) are async-signal-safe and touch no
        // memory of the parent; the closure runs in the forked child before exec.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("the demo exited while starting"));
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {name} ({})", exe.display()))?;
        running().push(child.id());
        let mut proc = Proc {
            name: name.to_owned(),
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: log.to_owned(),
            stopped: false,
        };
        proc.addr = proc.wait_listening()?;
        Ok(proc)
    }

    /// Polls the log for `listening on ADDR`; fails if the child exits or takes too long.
    fn wait_listening(&mut self) -> Result<SocketAddr> {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(addr) = text
                .lines()
                .find_map(|l| l.strip_prefix("listening on "))
                .and_then(|a| a.trim().parse().ok())
            {
                return Ok(addr);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!(
                    "{} exited ({status}) before listening; its output ({}):\n{}",
                    self.name,
                    self.log.display(),
                    tail(&text, 20)
                );
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "{} did not print `listening on` within {START_TIMEOUT:?}; see {}",
                    self.name,
                    self.log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The rest of the first line of its output that starts with `prefix`.
    pub fn printed(&self, prefix: &str) -> Option<String> {
        let text = std::fs::read_to_string(&self.log).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_owned())
    }

    /// The child's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, then SIGKILL after the grace period; waits for the exit. Idempotent.
    ///
    /// The pid leaves the signal handler's list before the child is reaped: until then it
    /// is a zombie and its pid cannot be reused, so the handler never signals a stranger.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.forget();
        // `try_wait` reaps a child that has exited; only an unreaped one is signalled.
        if matches!(self.child.try_wait(), Ok(None)) {
            send_signal(self.child.id(), libc::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    fn forget(&self) {
        let id = self.child.id();
        running().retain(|&p| p != id);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// This executable. On Linux `/proc/self/exe`, which still runs this very binary when a
/// rebuild has replaced the file on disk meanwhile.
fn own_executable() -> Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_owned());
    }
    std::env::current_exe().context("cannot find the ballot executable")
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Settings of one replica process.
#[derive(Clone, Debug)]
pub struct ReplicaSpec {
    /// Index directory.
    pub index: PathBuf,
    /// RAM cache bytes.
    pub cache_bytes: u64,
    /// Eviction policy of the RAM cache.
    pub eviction: eviction::EvictionKind,
    /// Emulated flash bandwidth, MB/s.
    pub flash_read_mbps: Option<f64>,
}

/// Starts the replica `name` of a cluster.
pub fn start_replica(spec: &ReplicaSpec, name: &str, logs: &Path) -> Result<Proc> {
    let mut args = vec![
        "replica".to_owned(),
        "--index".into(),
        spec.index.display().to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--cache-bytes".into(),
        spec.cache_bytes.to_string(),
        "--id".into(),
        name.to_owned(),
        "--eviction".into(),
        spec.eviction.name().into(),
    ];
    if let Some(m) = spec.flash_read_mbps {
        args.extend(["--flash-read-mbps".into(), m.to_string()]);
    }
    Proc::start(
        &format!("replica {name}"),
        &args,
        &logs.join(format!("{name}.log")),
    )
}

/// Settings of the balancer process.
#[derive(Clone, Debug)]
pub struct BalancerSpec {
    /// Routing policy name.
    pub policy: String,
    /// Voting table (for `table`).
    pub table: Option<PathBuf>,
    /// Postings sizes (term weights of `term-vote` and `table`).
    pub sizes: Option<PathBuf>,
    /// Load-bound slack.
    pub eps: f64,
    /// What the load bound counts (`window` or `work`, the loads the simulator bounds).
    pub load: balancer::LoadKind,
    /// With `work`: the fixed cost of one query, in flash bytes.
    pub work_query_bytes: u64,
    /// With `work`: where each query's flash bytes come from.
    pub work_source: balancer::WorkSource,
    /// Shadow caches of this size and policy in the balancer (with `work_source =
    /// "shadow"`: the replicas' own).
    pub shadow: Option<(u64, eviction::EvictionKind)>,
    /// `table`'s home share.
    pub homes: f64,
    /// `table`'s weight of the shadow caches' evidence (read with `shadow`).
    pub cache_evidence: f64,
    /// `[policy] cache_admission` (the table's share; `None`: not set).
    pub cache_admission: Option<f32>,
    /// Routing decisions the balancer's load window counts.
    pub load_window: usize,
    /// `backlog_reports_ms` (0: each balancer counts only its own requests).
    pub backlog_reports_ms: u64,
    /// `replica_max_in_flight`.
    pub replica_max_in_flight: u64,
    /// `steal_after_ms` (`None`: not set, late binding off).
    pub steal_after_ms: Option<u64>,
    /// A sharded backend: the replicas are shard-major, `replicas / count` per shard.
    pub shards: Option<ShardsSpec>,
}

/// The balancer's `[shards]` section.
#[derive(Clone, Debug)]
pub struct ShardsSpec {
    /// Shards.
    pub count: usize,
    /// `route`.
    pub route: String,
}

/// The environment variable whose token, when set, opens the demo balancers' admin API
/// (their status page and `/admin/explain`; each prints its admin address to its log).
pub const ADMIN_TOKEN_ENV: &str = "BALLOT_ADMIN_TOKEN";

/// Writes balancer `index`'s TOML config for `replicas` into `dir` and starts it (the
/// demo's balancers of one policy share the spec and differ only in their files).
pub fn start_balancer(
    spec: &BalancerSpec,
    index: usize,
    replicas: &[&Proc],
    dir: &Path,
) -> Result<Proc> {
    let path_value = |p: &Path| -> Result<String> {
        let abs =
            std::path::absolute(p).with_context(|| format!("{}: cannot resolve", p.display()))?;
        Ok(toml_string(&abs.display().to_string()))
    };
    // The admin API (status page, explain) opens when the demo's caller sets the token.
    let admin = if std::env::var_os(ADMIN_TOKEN_ENV).is_some() {
        format!("admin_token_env = \"{ADMIN_TOKEN_ENV}\"\n")
    } else {
        String::new()
    };
    let mut toml = format!(
        "{admin}listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\neps = {}\n\
         load = \"{}\"\nload_window = {}\nwork_query_bytes = {}\nwork_source = \"{}\"\n\
         request_timeout_ms = 20000\ndeadline_ms = 60000\nretries = 2\n\
         backlog_reports_ms = {}\nreplica_max_in_flight = {}\n{}\n\
         [health]\ninterval_ms = 500\ntimeout_ms = 2000\nfall = 2\nrise = 2\n\n\
         [policy]\nname = {}\n",
        spec.eps,
        spec.load,
        spec.load_window,
        spec.work_query_bytes,
        spec.work_source,
        spec.backlog_reports_ms,
        spec.replica_max_in_flight,
        spec.steal_after_ms
            .map_or(String::new(), |ms| format!("steal_after_ms = {ms}\n")),
        toml_string(&spec.policy)
    );
    toml += &format!("homes = {}\n", spec.homes);
    toml += &format!("cache_evidence = {}\n", spec.cache_evidence);
    if let Some(share) = spec.cache_admission {
        toml += &format!("cache_admission = {share}\n");
    }
    if let Some(t) = &spec.table {
        toml += &format!("table = {}\n", path_value(t)?);
    }
    if let Some(s) = &spec.sizes {
        toml += &format!("sizes = {}\n", path_value(s)?);
    }
    if let Some((cache_bytes, eviction)) = spec.shadow {
        toml += &format!("\n[shadow]\ncache_bytes = {cache_bytes}\neviction = \"{eviction}\"\n");
    }
    let per_shard = replicas.len() / spec.shards.as_ref().map_or(1, |s| s.count.max(1));
    if let Some(sh) = &spec.shards {
        toml += &format!("\n[shards]\nroute = {}\n", toml_string(&sh.route));
    }
    for (i, r) in replicas.iter().enumerate() {
        let (shard, column) = (i / per_shard.max(1), i % per_shard.max(1));
        let name = if spec.shards.is_some() {
            format!("s{shard}r{column}")
        } else {
            format!("r{i}")
        };
        toml += &format!(
            "\n[[replicas]]\nname = \"{name}\"\naddress = \"{}\"\nshard = {shard}\n",
            r.addr
        );
    }
    let name = match index {
        0 => format!("balancer-{}", spec.policy),
        i => format!("balancer-{}-{i}", spec.policy),
    };
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, toml).with_context(|| format!("{}: cannot write", config.display()))?;
    Proc::start(
        &format!("balancer ({})", spec.policy),
        &[
            "balancer".into(),
            "--config".into(),
            config.display().to_string(),
        ],
        &dir.join(format!("{name}.log")),
    )
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(toml_string("x\ny"), "\"x\\u000Ay\"");
        let v: toml_value::Doc = toml_value::parse(&format!("k = {}", toml_string("q\"\\\n")));
        assert_eq!(v.k, "q\"\\\n");
    }

    mod toml_value {
        #[derive(serde::Deserialize)]
        pub struct Doc {
            pub k: String,
        }
        pub fn parse(s: &str) -> Doc {
            toml::from_str(s).expect("valid TOML")
        }
    }
}
