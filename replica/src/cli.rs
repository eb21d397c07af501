//! The `replica` command line: serves one ballot search replica over HTTP. The `replica`
//! binary and `ballot replica` (which `ballot demo` starts as child processes) both run
//! [`main_from`].
//!
//! Prints the index summary, the direct-I/O mode and `listening on ADDR` (the bound
//! address, so `--listen 127.0.0.1:0` can be discovered by a test or script), then serves
//! with the hardened loop of the `serving` crate (header and idle timeouts, a connection cap
//! sized to the open-file limit, which is raised to the hard limit at start) until SIGTERM or
//! SIGINT: idle connections and half-sent requests close at once, the requests in flight
//! finish, and the process exits 0. SIGHUP is ignored. Logs go to stderr through `tracing`
//! (`RUST_LOG`, `--log-format`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::budget::{InflightBudget, DEFAULT_INFLIGHT_BYTES, DEFAULT_WAIT_MS};
use crate::cache::RamCache;
use crate::http::{search_threads, serve, AppState};
use crate::metrics::LATENCY_BUCKETS;
use crate::query::Engine;
use crate::store::{FlashStore, StoreOptions};
use anyhow::{bail, Context, Result};
use clap::Parser;
use eviction::EvictionKind;
use metrics_exporter_prometheus::PrometheusBuilder;

/// Longest wait for in-flight requests after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Open file descriptors one client connection needs.
const FDS_PER_CONNECTION: u64 = 1;

/// A ballot search replica: postings on flash behind a RAM cache, over HTTP.
#[derive(Parser, Debug)]
#[command(name = "replica", version, about)]
struct Args {
    /// Index directory written by `ballot build-index`.
    #[arg(long)]
    index: PathBuf,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// RAM cache capacity in stored postings bytes.
    #[arg(long)]
    cache_bytes: u64,
    /// Eviction policy: lru, sieve or s3fifo.
    #[arg(long, default_value_t = EvictionKind::SERVING_DEFAULT)]
    eviction: EvictionKind,
    /// This replica's name, echoed in answers and /stats.
    #[arg(long, default_value = "replica")]
    id: String,
    /// Emulated flash bandwidth in MB/s shared by all reads (default: the device's).
    #[arg(long)]
    flash_read_mbps: Option<f64>,
    /// Emulated latency added to every flash read, in microseconds.
    #[arg(long, default_value_t = 0)]
    flash_latency_us: u64,
    /// Concurrent searches admitted; past it, 503 at once. The blocking pool that runs them
    /// has this many threads, at most 64.
    #[arg(long, default_value_t = 256)]
    max_inflight: u64,
    /// Byte budget for the postings lists held by searches in flight (stored bytes, plus
    /// one read buffer per search); a search that does not fit waits up to
    /// --inflight-wait-ms, then gets 503. Resident memory stays within the cache, this
    /// budget and a fixed overhead.
    #[arg(long, default_value_t = DEFAULT_INFLIGHT_BYTES, value_parser = clap::value_parser!(u64).range(1024..))]
    inflight_bytes: u64,
    /// Longest wait of a search for the in-flight byte budget, in milliseconds (0: shed at
    /// once; at most 60000).
    #[arg(long, default_value_t = DEFAULT_WAIT_MS, value_parser = clap::value_parser!(u64).range(..=60_000))]
    inflight_wait_ms: u64,
    /// Use buffered reads + fadvise(DONTNEED) even where O_DIRECT works.
    #[arg(long)]
    no_direct_io: bool,
    /// Milliseconds a client has to send a request head, from the connection's start or
    /// from the first byte of a later request.
    #[arg(long, default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Milliseconds a keep-alive connection may sit idle between requests.
    #[arg(long, default_value_t = 60_000)]
    idle_timeout_ms: u64,
    /// Open client connections at most; past it new connections wait in the listen backlog
    /// (default 10000, lowered to what the open-file limit allows).
    #[arg(long)]
    max_connections: Option<usize>,
    /// Log lines as `text` or `json` (default: $BALLOT_LOG_FORMAT, else text); `RUST_LOG`
    /// filters them (default `info`).
    #[arg(long)]
    log_format: Option<String>,
}

/// Parses `args` (the first item is the program name) and serves until a shutdown signal.
pub fn main_from<I, T>(args: I) -> std::process::ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::parse_from(args);
    match serving::logging::LogFormat::choose(args.log_format.as_deref()) {
        Ok(f) => serving::logging::init(f),
        Err(e) => {
            eprintln!("replica: error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replica: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The connection limits from the flags, the cap fitted to the open-file limit (raised to
/// the hard limit first).
fn limits(args: &Args) -> Result<serving::Limits> {
    let nofile = serving::rlimit::raise_nofile().context("reading the open-file limit")?;
    if let Some(from) = nofile.raised_from {
        tracing::info!(from, to = nofile.soft, "raised the open-file limit");
    }
    let wanted = args
        .max_connections
        .unwrap_or(serving::limits::DEFAULT_MAX_CONNECTIONS);
    let max_connections = serving::rlimit::fit_connections(wanted, nofile.soft, FDS_PER_CONNECTION);
    if max_connections < wanted && args.max_connections.is_some() {
        tracing::warn!(
            wanted,
            max_connections,
            nofile = nofile.soft,
            "--max-connections lowered to fit the open-file limit"
        );
    }
    let limits = serving::Limits {
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_connections,
    };
    limits.validate().map_err(anyhow::Error::msg)?;
    Ok(limits)
}

fn run(args: Args) -> Result<()> {
    // SIGHUP must not kill the replica, not even while it opens its index.
    serving::signals::ignore_hangup();
    if args.max_inflight == 0 {
        bail!("--max-inflight must be at least 1");
    }
    if args.max_connections == Some(0) {
        bail!("--max-connections must be at least 1");
    }
    let limits = limits(&args)?;
    let store = FlashStore::open(
        &args.index,
        StoreOptions {
            no_direct: args.no_direct_io,
            read_mbps: args.flash_read_mbps,
            latency: Duration::from_micros(args.flash_latency_us),
        },
    )
    .with_context(|| format!("opening index {}", args.index.display()))?;
    let recorder = PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS)
        .context("histogram buckets")?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
    crate::metrics::register_metrics();

    let m = &store.directory().manifest;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "replica {}: index {} ({} terms, {} docs, {} postings bytes); cache {} bytes ({})",
        args.id,
        args.index.display(),
        m.terms,
        m.docs,
        m.postings_bytes,
        args.cache_bytes,
        args.eviction
    )?;
    let emulation = match (args.flash_read_mbps, args.flash_latency_us) {
        (None, 0) => "none".to_string(),
        (mbps, us) => format!(
            "{} MB/s, {us} us/read",
            mbps.map_or("unlimited".into(), |m| m.to_string())
        ),
    };
    writeln!(
        out,
        "io mode: {}; flash emulation: {emulation}",
        store.mode()
    )?;
    out.flush()?;
    drop(out);

    let cache = RamCache::new(args.eviction, args.cache_bytes);
    let engine = Arc::new(Engine::new(store, cache));
    let state = Arc::new(AppState::new(
        engine,
        args.id.clone(),
        args.max_inflight,
        InflightBudget::new(
            args.inflight_bytes,
            Duration::from_millis(args.inflight_wait_ms),
        ),
        Some(handle.clone()),
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(search_threads(args.max_inflight))
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let (mut hup, mut stop) = serving::signals::Signals::install()
            .context("installing the signal handlers")?
            .take_hup();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::info!("SIGHUP: the replica has nothing to reload; ignored");
            }
        });
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on {addr}")?;
            out.flush()?;
        }
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                handle.run_upkeep();
            }
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let gate = serving::Gate::new("client", limits);
        let server = tokio::spawn(serve(listener, state, gate, stop_rx));
        let sig = stop.recv().await;
        tracing::info!("{sig}: draining the requests in flight");
        let _ = stop_tx.send(true);
        if tokio::time::timeout(DRAIN_TIMEOUT, server).await.is_err() {
            tracing::warn!(
                "drain limit of {DRAIN_TIMEOUT:?} passed; exiting with requests in flight"
            );
        }
        println!("drained; bye");
        Ok(())
    })
}
