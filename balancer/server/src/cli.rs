//! The `balancer` command line: ballot's HTTP load balancer. The `balancer` binary and
//! `ballot balancer` (which `ballot demo` starts as a child process) both run [`main_from`].
//!
//! Reads a TOML config (`--config`), routes `GET /search?q=...` to replicas by the
//! configured policy (voting tables after Archer et al., PVLDB 2019, under the bounded-load
//! rule of Mirrokni et al., SODA 2018, as HAProxy's `hash-balance-factor`), and serves the
//! admin API and metrics on a second listener.
//!
//! Prints `listening on ADDR` and `admin on ADDR` (the bound addresses) once both listeners
//! are up. SIGHUP re-reads the configured voting table; SIGTERM and SIGINT stop accepting,
//! drain the requests in flight, and exit.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::reload::{reload, Source};
use crate::{admin, front, App};
use anyhow::Context;
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// ballot's cache-aware HTTP load balancer.
#[derive(Parser, Debug)]
#[command(name = "balancer", version, about)]
struct Args {
    /// The TOML configuration file.
    #[arg(long)]
    config: PathBuf,
    /// Threads serving the proxy, each with its own listener and upstream connections
    /// (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

/// Parses `args` (the first item is the program name), serves until SIGTERM or SIGINT and
/// drains.
pub fn main_from<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::parse_from(args);
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

async fn run(cfg: crate::config::Validated, workers: usize) -> anyhow::Result<()> {
    let listen = cfg.config.listen;
    let admin_listen = cfg.config.admin_listen;
    let drain_limit = cfg.deadline() + Duration::from_secs(1);
    let table_path = cfg.config.policy.table.clone();
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
    app.spawn_background();

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut term = signal(SignalKind::terminate()).context("cannot catch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot catch SIGHUP")?;
    let hup_app = Arc::clone(&app);
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            match &table_path {
                Some(p) => {
                    eprintln!("balancer: SIGHUP: re-reading {}", p.display());
                    // Errors are logged and counted by `reload`.
                    let _ = reload(Arc::clone(&hup_app.state), Source::Path(p.clone())).await;
                }
                None => eprintln!("balancer: SIGHUP ignored: no voting table configured"),
            }
        }
    });

    let wait = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|&s| s).await;
    };
    let client_srv = front::serve_client(client, Arc::clone(&app), stop_rx.clone());
    let mut shards = Vec::with_capacity(clients.len());
    for (i, l) in clients.into_iter().enumerate() {
        shards.push(front::spawn_worker(
            i + 1,
            l,
            Arc::clone(&app),
            stop_rx.clone(),
        )?);
    }
    let admin_srv = axum::serve(admin_l, admin::router(Arc::clone(&app)))
        .with_graceful_shutdown(wait(stop_rx.clone()));
    let client_task = tokio::spawn(client_srv);
    let admin_task = tokio::spawn(async move { admin_srv.await });

    tokio::select! {
        _ = term.recv() => eprintln!("balancer: SIGTERM: draining"),
        _ = int.recv() => eprintln!("balancer: SIGINT: draining"),
    }
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
        eprintln!("balancer: drain limit passed; exiting with requests in flight");
    }
    Ok(())
}
