//! The `balancer` command line: ballot's HTTP load balancer. The `balancer` binary and
//! `ballot balancer` (which `ballot demo` starts as a child process) both run [`main_from`].
//!
//! Reads a TOML config (`--config`), routes `GET /search?q=...` to replicas by the
//! configured policy (voting tables after Archer et al., PVLDB 2019, under the bounded-load
//! rule of Mirrokni et al., SODA 2018, as HAProxy's `hash-balance-factor`), and serves the
//! admin API and metrics on a second listener.
//!
//! Prints `listening on ADDR` and `admin on ADDR` (the bound addresses) once both listeners
//! are up. Both listeners run the hardened loop of the `serving` crate (header and idle
//! timeouts, a connection cap fitted to the open-file limit, which is raised to the hard
//! limit at start). SIGHUP re-reads the configured voting table (its handler is installed
//! before the first table load, so a SIGHUP during that load is queued, not fatal); SIGTERM
//! and SIGINT stop accepting, close idle connections and half-sent requests at once, drain
//! the requests in flight, and exit 0. Logs go to stderr through `tracing` (`RUST_LOG`,
//! `--log-format`); `access_log = true` adds one line per request.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use balancer_server::config::{Config, Validated, FDS_PER_CONNECTION};
use balancer_server::front;
use balancer_server::reload::{reload, Source};

use crate::{admin, App};
use anyhow::Context;
use clap::Parser;
use hyper_util::service::TowerToHyperService;
use serving::logging::LogFormat;
use tokio::sync::watch;

/// Open connections to the admin listener at most.
const ADMIN_MAX_CONNECTIONS: usize = 64;

/// ballot's cache-aware HTTP load balancer.
#[derive(Parser, Debug)]
#[command(
    name = "balancer",
    version,
    about = "ballot's cache-aware HTTP load balancer: routes searches by the votes of their terms"
)]
struct Args {
    /// The TOML configuration file.
    #[arg(long)]
    config: PathBuf,
    /// Threads serving the proxy, each with its own listener and upstream connections
    /// (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Log lines as `text` or `json` (default: $BALLOT_LOG_FORMAT, else text); `RUST_LOG`
    /// filters them (default `info`).
    #[arg(long)]
    log_format: Option<String>,
}

/// Parses `args` (the first item is the program name), serves until SIGTERM or SIGINT and
/// drains.
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::parse_from(args);
    serving::logging::init(
        LogFormat::choose(args.log_format.as_deref()).map_err(anyhow::Error::msg)?,
    );
    let cfg = Config::load(&args.config)?;
    let workers = match args.workers {
        Some(0) => anyhow::bail!("--workers must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // Thread per core, as HAProxy's `nbthread`: each worker is a single-threaded runtime
    // with its own listener (SO_REUSEPORT) and its own upstream connections, so a request
    // never hops threads and no worker wakes another. This thread is worker 0 and also runs
    // the admin listener, health checks and signals.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the Tokio runtime")?;
    rt.block_on(run(cfg, workers))
}

/// The client listener's limits: the configured ones with the connection cap fitted to the
/// open-file limit, raised to the hard limit first.
fn client_limits(cfg: &Validated) -> anyhow::Result<serving::Limits> {
    let nofile = serving::rlimit::raise_nofile().context("reading the open-file limit")?;
    if let Some(from) = nofile.raised_from {
        tracing::info!(from, to = nofile.soft, "raised the open-file limit");
    }
    let mut limits = cfg.config.client_limits();
    let wanted = limits.max_connections;
    limits.max_connections =
        serving::rlimit::fit_connections(wanted, nofile.soft, FDS_PER_CONNECTION);
    if limits.max_connections < wanted && cfg.config.max_connections.is_some() {
        tracing::warn!(
            wanted,
            max_connections = limits.max_connections,
            nofile = nofile.soft,
            "max_connections lowered to fit the open-file limit"
        );
    }
    Ok(limits)
}

async fn run(cfg: Validated, workers: usize) -> anyhow::Result<()> {
    // Signal handlers first: a SIGHUP or SIGTERM during the table load below waits in its
    // queue instead of killing the process.
    let (mut hup, mut stop_signal) = serving::signals::Signals::install()
        .context("cannot install the signal handlers")?
        .take_hup();
    let listen = cfg.config.listen;
    let admin_listen = cfg.config.admin_listen;
    let drain_limit = cfg.deadline() + Duration::from_secs(1);
    let table_path = cfg.config.policy.table.clone();
    let limits = client_limits(&cfg)?;
    let admin_limits = serving::Limits {
        max_connections: ADMIN_MAX_CONNECTIONS,
        ..limits
    };
    if let Some(p) = &table_path {
        tracing::info!("loading voting table {}", p.display());
    }
    let app = App::build(cfg)?;

    let mut clients = front::bind(listen, workers)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let client = clients.remove(0);
    let admin_l = tokio::net::TcpListener::bind(admin_listen)
        .await
        .with_context(|| format!("cannot listen on {admin_listen} (admin)"))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", client.local_addr()?)?;
        writeln!(out, "admin on {}", admin_l.local_addr()?)?;
        out.flush()?;
    }
    tracing::info!(
        max_connections = limits.max_connections,
        header_timeout_ms = limits.header_timeout.as_millis() as u64,
        idle_timeout_ms = limits.idle_timeout.as_millis() as u64,
        max_in_flight = app.lb.admission.max(),
        workers,
        "serving"
    );
    app.spawn_background();

    let (stop_tx, stop_rx) = watch::channel(false);
    let hup_lb = Arc::clone(&app.lb);
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let Some(p) = &table_path else {
                tracing::info!("SIGHUP ignored: no voting table configured");
                continue;
            };
            tracing::info!("SIGHUP: re-reading {}", p.display());
            // Errors are logged and counted by `reload`.
            let _ = reload(&hup_lb, Source::Path(p.clone())).await;
        }
    });

    let gate = serving::Gate::proxy("client", limits);
    let client_srv = front::serve_client(
        client,
        Arc::clone(&app.lb),
        Arc::clone(&gate),
        stop_rx.clone(),
    );
    let mut shards = Vec::with_capacity(clients.len());
    for (i, l) in clients.into_iter().enumerate() {
        shards.push(front::spawn_worker(
            i + 1,
            l,
            Arc::clone(&app.lb),
            Arc::clone(&gate),
            stop_rx.clone(),
        )?);
    }
    let admin_svc = TowerToHyperService::new(admin::router(Arc::clone(&app)));
    let admin_srv = serving::serve(
        serving::Gate::new("admin", admin_limits),
        admin_l,
        move |_peer| admin_svc.clone(),
        stop_rx.clone(),
    );
    let client_task = tokio::spawn(client_srv);
    let admin_task = tokio::spawn(admin_srv);

    let sig = stop_signal.recv().await;
    tracing::info!("{sig}: draining the requests in flight");
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(drain_limit, async {
        let _ = client_task.await;
        for done in shards {
            let _ = done.await;
        }
        let _ = admin_task.await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = gate.open(),
            "drain limit of {drain_limit:?} passed; exiting with requests in flight"
        );
    }
    Ok(())
}
