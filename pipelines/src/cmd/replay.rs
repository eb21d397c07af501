//! `ballot replay`: a load generator that replays a query log against a live replica or
//! balancer over HTTP and reports throughput, latency percentiles and errors by kind, and,
//! with `--stats-from`, the cluster's measured miss bytes ratio from the replicas' counters.
//!
//! Two disciplines, after the load-testing literature:
//! - **Open loop** (`--rate`): requests leave on a fixed schedule whatever the answers do,
//!   and latency is measured from each request's *intended* send time, so a stalled server
//!   cannot hide its queue by slowing the client down ("coordinated omission", Gil Tene;
//!   wrk2). Outstanding requests are capped; past the cap a request is counted as an
//!   `overload` error instead of growing memory without bound.
//! - **Closed loop** (`--concurrency N`): N workers each send the next query when the
//!   previous one is answered (the classic wrk/ab model); latency is per request.
//!
//! Several `--target`s (balancers in front of the same replicas) share the load and stand
//! in for each other when a connection fails (`targets`).
//!
//! Latency goes into a log-bucketed HDR-style histogram (`histogram`). Every loop is bounded
//! by the log part, `--queries` and `--duration`; Ctrl-C stops at once, cancels what is in
//! flight and still reports what was measured.

pub mod histogram;
pub mod stats;
pub mod targets;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use self::histogram::Histogram;
use self::stats::ClusterStats;
use self::targets::Targets;
use crate::client::{self, check_reachable, BaseUrl, HttpClient};
use crate::inputs::{LogArgs, SplitArgs};
use crate::json::write_json;

/// Which part of the split log to replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// The test part, in split order (what `ballot eval` counts).
    Test,
    /// The train part, in split order (e.g. to warm caches).
    Train,
    /// Train then test.
    All,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Test => "test",
            Part::Train => "train",
            Part::All => "all",
        }
    }
}

/// Arguments of `ballot replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Base URL of a replica or of the balancer, e.g. http://127.0.0.1:8080. Repeat for
    /// several balancers: clients are spread over them, and a query whose connection fails
    /// is sent to the next one.
    #[arg(long, required = true)]
    pub target: Vec<String>,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    /// Part of the split log to replay.
    #[arg(long, value_enum, default_value_t = Part::Test)]
    pub part: Part,
    /// Open loop: send this many queries per second on a fixed schedule.
    #[arg(long, conflicts_with = "concurrency", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Closed loop: this many workers, each sending its next query when answered
    /// (the default, with 8 workers, when neither --rate nor --concurrency is given).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Stop after this many queries (default: the whole part).
    #[arg(long)]
    pub queries: Option<usize>,
    /// Skip the part's first this many queries (a phase that must not repeat the queries
    /// an earlier phase served starts after them).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
    /// Stop issuing queries after this long (`30s`, `500ms`, `2m`, or seconds).
    #[arg(long)]
    pub duration: Option<String>,
    /// Path of the search endpoint; the query goes in its `q` parameter and the results
    /// wanted in `k` (e.g. `/api/` for a Tantivy server, `/solr/core/select` for Solr).
    #[arg(long, default_value = "/search")]
    pub search_path: String,
    /// Results requested per query (`k=`).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Per-request timeout (connect, answer and body).
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Bound of the start-up reachability check of --target and --stats-from.
    #[arg(long, default_value = "2s")]
    pub connect_timeout: String,
    /// Open loop: send over this many keep-alive connections, each carrying one request at
    /// a time (as wrk2 does); a request waits for a free one, and its latency still counts
    /// from its intended send time. Without it, every request in flight has a connection
    /// of its own, so the number of connections follows the latency.
    #[arg(long, requires = "rate", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub connections: Option<u64>,
    /// Open loop: most requests in flight; past it a request counts as an `overload` error.
    #[arg(long, default_value_t = 10_000)]
    pub max_outstanding: usize,
    /// Replica base URLs whose `GET /stats` is read before and after (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub stats_from: Vec<String>,
    /// Also report every interval of this length (`60s`, `1m`): requests sent, answered
    /// and failed by kind, and latency percentiles of the requests sent in it (open loop:
    /// by intended send time), in the text report and as `intervals` in the JSON.
    #[arg(long)]
    pub interval: Option<String>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Parses `1.5s`, `250ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok()
}

fn duration_arg(s: &str, what: &str) -> Result<Duration> {
    match parse_duration(s) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => bail!("{what} {s:?} is not a positive duration like 30s, 500ms or 2m"),
    }
}

/// The load discipline.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Open { rate: f64 },
    Closed { workers: usize },
}

/// Validated settings.
struct Plan {
    targets: Arc<Targets>,
    stats_from: Vec<BaseUrl>,
    mode: Mode,
    duration: Option<Duration>,
    timeout: Duration,
    connect_timeout: Duration,
    max_outstanding: usize,
    k: usize,
    /// Length of the report's intervals (none: no intervals).
    interval: Option<Duration>,
    /// Open loop: a fixed set of this many connections (none: one per request in flight).
    connections: Option<usize>,
}

fn plan(args: &ReplayArgs) -> Result<Plan> {
    let bases = args
        .target
        .iter()
        .map(|t| BaseUrl::parse(t, "--target"))
        .collect::<Result<Vec<_>>>()?;
    let stats_from = args
        .stats_from
        .iter()
        .map(|u| BaseUrl::parse(u.trim(), "--stats-from"))
        .collect::<Result<Vec<_>>>()?;
    let mode = match (&args.rate, args.concurrency) {
        (Some(r), _) => {
            let rate: f64 = r
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0 && *v <= 1e7)
                .with_context(|| {
                    format!("--rate {r:?} is not a number of queries per second in (0, 1e7]")
                })?;
            Mode::Open { rate }
        }
        (None, Some(0)) => bail!("--concurrency must be at least 1"),
        (None, Some(n)) if n > 100_000 => bail!("--concurrency {n} is above 100000"),
        (None, Some(n)) => Mode::Closed { workers: n },
        (None, None) => Mode::Closed { workers: 8 },
    };
    if args.queries == Some(0) {
        bail!("--queries must be at least 1");
    }
    if args.max_outstanding == 0 {
        bail!("--max-outstanding must be at least 1");
    }
    if args.k > 1000 {
        bail!("--k must be at most 1000");
    }
    // The query string is replay's own (`?q=`), so the path may not bring one.
    if args.search_path.contains(['?', '#'])
        || !balancer_server::config::is_request_path(&args.search_path)
    {
        bail!(
            "--search-path {:?} must be a request path starting with / (no spaces, ? or #)",
            args.search_path
        );
    }
    Ok(Plan {
        targets: Arc::new(Targets::new(bases, args.search_path.clone(), args.k)),
        stats_from,
        mode,
        duration: args
            .duration
            .as_deref()
            .map(|d| duration_arg(d, "--duration"))
            .transpose()?,
        timeout: duration_arg(&args.timeout, "--timeout")?,
        connect_timeout: duration_arg(&args.connect_timeout, "--connect-timeout")?,
        max_outstanding: args.max_outstanding,
        k: args.k,
        interval: args
            .interval
            .as_deref()
            .map(|d| duration_arg(d, "--interval"))
            .transpose()?,
        connections: args.connections.map(|n| n as usize),
    })
}

/// Everything measured, shared by the request tasks.
#[derive(Default)]
struct Tally {
    /// Latency of the 2xx answers (open loop: from the intended send time).
    latency: Histogram,
    /// Open loop: latency from the actual send time.
    service: Histogram,
    ok: u64,
    errors: BTreeMap<String, u64>,
    /// Failed requests by the whole second of the replay in which they were sent (open
    /// loop: their intended send time), so failures can be laid beside events.
    failures_by_second: BTreeMap<u64, u64>,
    /// With `--interval`: what each interval measured, by interval number.
    intervals: BTreeMap<u64, Interval>,
    cancelled: u64,
}

/// What the requests sent in one report interval measured.
#[derive(Default)]
struct Interval {
    sent: u64,
    ok: u64,
    errors: BTreeMap<String, u64>,
    /// Latency of the 2xx answers (open loop: from the intended send time).
    latency: Histogram,
}

impl Interval {
    fn merge(&mut self, other: &Interval) {
        self.sent += other.sent;
        self.ok += other.ok;
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_insert(0) += v;
        }
        self.latency.merge(&other.latency);
    }
}

struct Shared {
    tally: Mutex<Tally>,
    done: AtomicU64,
    failed: AtomicU64,
    /// With `--interval`: its length.
    interval: Option<Duration>,
}

impl Shared {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        // A poisoned lock only means a task panicked mid-update; the counts stay usable.
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The report interval of a request sent `sent_after` the start (`None` without
    /// `--interval`).
    fn interval_of(&self, sent_after: Duration) -> Option<u64> {
        self.interval
            .map(|len| (sent_after.as_secs_f64() / len.as_secs_f64()) as u64)
    }

    /// Counts an open-loop request sent `sent_after` the start (for the intervals).
    fn sent(&self, sent_after: Duration) {
        if let Some(i) = self.interval_of(sent_after) {
            self.tally().intervals.entry(i).or_default().sent += 1;
        }
    }

    /// Counts an open-loop answer: latency from the intended and from the actual send.
    fn ok(&self, latency: Duration, service: Duration, sent_after: Duration) {
        {
            let mut t = self.tally();
            t.ok += 1;
            t.latency.record(latency.as_nanos() as u64);
            t.service.record(service.as_nanos() as u64);
            if let Some(i) = self.interval_of(sent_after) {
                let iv = t.intervals.entry(i).or_default();
                iv.ok += 1;
                iv.latency.record(latency.as_nanos() as u64);
            }
        }
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failure of `kind` for a request sent `sent_after` the replay's start.
    fn error(&self, kind: String, sent_after: Duration) {
        {
            let mut t = self.tally();
            if let Some(i) = self.interval_of(sent_after) {
                *t.intervals
                    .entry(i)
                    .or_default()
                    .errors
                    .entry(kind.clone())
                    .or_insert(0) += 1;
            }
            *t.errors.entry(kind).or_insert(0) += 1;
            *t.failures_by_second
                .entry(sent_after.as_secs())
                .or_insert(0) += 1;
        }
        self.done.fetch_add(1, Ordering::Relaxed);
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    fn cancelled(&self) {
        self.tally().cancelled += 1;
    }
}

/// What one replay measured.
struct Outcome {
    sent: u64,
    /// Wall-clock start, in milliseconds since the Unix epoch.
    started_unix_ms: u64,
    elapsed: Duration,
    interrupted: bool,
    tally: Tally,
    stats: Option<ClusterStats>,
}

/// What one replay from code ([`replay_queries`]) measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Requests sent.
    pub sent: u64,
    /// 2xx answers.
    pub ok: u64,
    /// Failed requests by kind.
    pub errors: BTreeMap<String, u64>,
    /// Wall time of the replay.
    pub elapsed: Duration,
    /// Latency of the answers (open loop: from the intended send time).
    pub latency: Histogram,
    /// The replicas' `/stats` deltas (when `stats_from` was given).
    pub stats: Option<ClusterStats>,
    /// True when Ctrl-C cut the replay short.
    pub interrupted: bool,
}

impl Measured {
    /// Answers per second of wall time.
    pub fn throughput(&self) -> f64 {
        per_second(self.ok, self.elapsed)
    }

    /// Failed requests of any kind.
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Latency percentile `p` (0–100) in milliseconds.
    pub fn latency_ms(&self, p: f64) -> f64 {
        ms(self.latency.percentile(p))
    }
}

/// Replays `queries` against `targets` (a replica's or balancers' base URLs, spread and
/// retried as `ballot replay --target ...` does) in `mode`, reading the `/stats` of
/// `stats_from` before and after; blocks until done. This is `ballot replay` without the
/// log loading and the printing, for the demo.
pub fn replay_queries(
    targets: &[String],
    stats_from: &[String],
    mode: Mode,
    queries: Arc<Vec<String>>,
) -> Result<Measured> {
    let plan = Plan {
        targets: Arc::new(Targets::new(
            targets
                .iter()
                .map(|t| BaseUrl::parse(t, "target"))
                .collect::<Result<Vec<_>>>()?,
            "/search".to_owned(),
            10,
        )),
        stats_from: stats_from
            .iter()
            .map(|u| BaseUrl::parse(u, "stats URL"))
            .collect::<Result<Vec<_>>>()?,
        mode,
        duration: None,
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        max_outstanding: 10_000,
        k: 10,
        interval: None,
        connections: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let out = rt.block_on(replay(&plan, queries))?;
    rt.shutdown_timeout(Duration::from_millis(200));
    Ok(Measured {
        sent: out.sent,
        ok: out.tally.ok,
        errors: out.tally.errors,
        elapsed: out.elapsed,
        latency: out.tally.latency,
        stats: out.stats,
        interrupted: out.interrupted,
    })
}

/// Runs `ballot replay`.
pub fn run(args: &ReplayArgs) -> Result<()> {
    let plan = plan(args)?;
    let dataset = args.log.load_reported()?;
    let order = args.split.apply(&dataset)?;
    let ids = match args.part {
        Part::Test => order.test(),
        Part::Train => order.train(),
        Part::All => &order.order[..],
    };
    let Some(ids) = ids.get(args.skip..).filter(|rest| !rest.is_empty()) else {
        bail!(
            "{}: the {} part has {} queries, none left after --skip {}",
            dataset.label,
            args.part.name(),
            ids.len(),
            args.skip
        );
    };
    let limit = args.queries.unwrap_or(usize::MAX).min(ids.len());
    if limit == 0 {
        bail!("{}: the {} part is empty", dataset.label, args.part.name());
    }
    let queries: Arc<Vec<String>> = Arc::new(
        ids[..limit]
            .iter()
            .map(|&i| dataset.queries.get(i as usize).to_owned())
            .collect(),
    );
    drop(dataset);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let out = rt.block_on(replay(&plan, queries.clone()))?;
    // Tasks cancelled by Ctrl-C may still hold pooled connections; do not wait for them.
    rt.shutdown_timeout(Duration::from_millis(200));

    let report = report_json(args, &plan, queries.len(), &out);
    print_report(&plan, &out);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}

async fn replay(plan: &Plan, queries: Arc<Vec<String>>) -> Result<Outcome> {
    for t in plan.targets.bases() {
        check_reachable(t, "--target", plan.connect_timeout).await?;
    }
    for s in &plan.stats_from {
        check_reachable(s, "--stats-from", plan.connect_timeout).await?;
    }
    let idle = match plan.mode {
        Mode::Closed { workers } => workers.max(16),
        Mode::Open { .. } => plan.max_outstanding.min(1024),
    };
    let client = client::client(plan.connect_timeout, idle);
    let mut before = Vec::new();
    for s in &plan.stats_from {
        before.push(stats::fetch(&client, s, plan.timeout).await?);
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });

    let shared = Arc::new(Shared {
        tally: Mutex::new(Tally::default()),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        interval: plan.interval,
    });
    let planned = match plan.mode {
        Mode::Open { rate } => match plan.duration {
            Some(d) => queries.len().min((d.as_secs_f64() * rate).ceil() as usize),
            None => queries.len(),
        },
        Mode::Closed { .. } => queries.len(),
    };
    let bar = progress_bar(planned as u64, shared.clone());
    let start = Instant::now();
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let sent = match plan.mode {
        Mode::Open { rate } => {
            open_loop(
                plan,
                rate,
                &client,
                &queries,
                &shared,
                stop_rx.clone(),
                start,
            )
            .await
        }
        Mode::Closed { workers } => {
            closed_loop(
                plan,
                workers,
                &client,
                &queries,
                &shared,
                stop_rx.clone(),
                start,
            )
            .await
        }
    };
    let elapsed = start.elapsed();
    let interrupted = *stop_rx.borrow();
    interrupt.abort();
    bar.finish_and_clear();

    // After Ctrl-C the servers may be going away with us: report what was measured.
    let stats = if plan.stats_from.is_empty() || interrupted {
        None
    } else {
        let mut after = Vec::new();
        for s in &plan.stats_from {
            after.push(stats::fetch(&client, s, plan.timeout).await?);
        }
        Some(stats::summarize(&plan.stats_from, &before, &after))
    };
    let tally = std::mem::take(&mut *shared.tally());
    Ok(Outcome {
        sent,
        started_unix_ms,
        elapsed,
        interrupted,
        tally,
        stats,
    })
}

/// Resolves once Ctrl-C was pressed (never, if the signal task is gone without a press).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A bar over the planned queries, fed every 100 ms from the shared counters (hidden when
/// stderr is not a terminal).
fn progress_bar(len: u64, shared: Arc<Shared>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} {per_sec} {msg} [{elapsed}]")
    {
        bar.set_style(style);
    }
    let b = bar.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while !b.is_finished() {
            tick.tick().await;
            b.set_position(shared.done.load(Ordering::Relaxed));
            b.set_message(format!("errors {}", shared.failed.load(Ordering::Relaxed)));
        }
    });
    bar
}

/// One open-loop request: its query, the target it starts at, and when it was meant to
/// leave.
struct Job {
    query: usize,
    first: usize,
    intended: Instant,
}

/// What the open loop's requests share.
#[derive(Clone)]
struct OpenCtx {
    targets: Arc<Targets>,
    queries: Arc<Vec<String>>,
    shared: Arc<Shared>,
    outstanding: Arc<AtomicUsize>,
    stop: watch::Receiver<bool>,
    timeout: Duration,
    start: Instant,
}

impl OpenCtx {
    /// Sends `job` on `client` and counts its answer (latency from the intended send time).
    async fn answer(&self, client: &HttpClient, job: Job) {
        let sent_at = Instant::now();
        let mut stop = self.stop.clone();
        let sent_after = job.intended - self.start;
        tokio::select! {
            r = self.targets.get(client, &self.queries[job.query], job.first, self.timeout) => match r {
                Ok(_) => self.shared.ok(job.intended.elapsed(), sent_at.elapsed(), sent_after),
                Err(f) => self.shared.error(f.kind(), sent_after),
            },
            _ = stopped(&mut stop) => self.shared.cancelled(),
        }
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `n` workers, each with one keep-alive connection of its own, taking jobs in turn (a fair
/// lock hands the queue to the longest-waiting worker, so every connection stays in use);
/// they end when the returned sender is dropped and the queue is empty.
fn connection_workers(
    n: usize,
    connect_timeout: Duration,
    ctx: &OpenCtx,
) -> tokio::sync::mpsc::UnboundedSender<Job> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    for _ in 0..n {
        let (rx, ctx) = (Arc::clone(&rx), ctx.clone());
        let client = client::client(connect_timeout, 1);
        tokio::spawn(async move {
            loop {
                let job = rx.lock().await.recv().await;
                let Some(job) = job else { break };
                ctx.answer(&client, job).await;
            }
        });
    }
    tx
}

/// Sends query `i` on a fixed schedule; returns how many requests left (overloads excluded).
async fn open_loop(
    plan: &Plan,
    rate: f64,
    client: &HttpClient,
    queries: &Arc<Vec<String>>,
    shared: &Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    start: Instant,
) -> u64 {
    let ctx = OpenCtx {
        targets: Arc::clone(&plan.targets),
        queries: Arc::clone(queries),
        shared: Arc::clone(shared),
        outstanding: Arc::new(AtomicUsize::new(0)),
        stop: stop.clone(),
        timeout: plan.timeout,
        start,
    };
    let queue = plan
        .connections
        .map(|n| connection_workers(n, plan.connect_timeout, &ctx));
    let mut sent = 0;
    for i in 0..queries.len() {
        let offset = Duration::from_secs_f64(i as f64 / rate);
        if plan.duration.is_some_and(|d| offset >= d) {
            break;
        }
        let intended = start + offset;
        if intended > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(intended) => {}
                _ = stopped(&mut stop) => {}
            }
        }
        if *stop.borrow() {
            break;
        }
        if ctx.outstanding.load(Ordering::Acquire) >= plan.max_outstanding {
            shared.error("overload".into(), offset);
            continue;
        }
        shared.sent(offset);
        ctx.outstanding.fetch_add(1, Ordering::AcqRel);
        sent += 1;
        let job = Job {
            query: i,
            first: i,
            intended,
        };
        match &queue {
            // The workers hold the receiver until the sender is dropped below, so this send
            // cannot fail; if it did, the request would still be sent, from here.
            Some(q) => {
                if let Err(e) = q.send(job) {
                    ctx.answer(client, e.0).await;
                }
            }
            None => {
                let (client, ctx) = (client.clone(), ctx.clone());
                tokio::spawn(async move { ctx.answer(&client, job).await });
            }
        }
    }
    drop(queue);
    // Each request ends within its timeout, or at once on Ctrl-C.
    while ctx.outstanding.load(Ordering::Acquire) > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    sent
}

/// `workers` tasks share one cursor over the queries.
async fn closed_loop(
    plan: &Plan,
    workers: usize,
    client: &HttpClient,
    queries: &Arc<Vec<String>>,
    shared: &Arc<Shared>,
    stop: watch::Receiver<bool>,
    start: Instant,
) -> u64 {
    let next = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let deadline = plan.duration.map(|d| start + d);
    let mut handles = Vec::with_capacity(workers);
    for w in 0..workers.min(queries.len()) {
        let (client, shared, queries) = (client.clone(), shared.clone(), queries.clone());
        let (next, sent, mut stop) = (next.clone(), sent.clone(), stop.clone());
        let (targets, timeout) = (Arc::clone(&plan.targets), plan.timeout);
        handles.push(tokio::spawn(async move {
            // Latencies stay in the worker and are merged once at the end: no lock per answer.
            let mut local = Histogram::new();
            let mut local_intervals: BTreeMap<u64, Interval> = BTreeMap::new();
            let mut ok = 0;
            loop {
                if *stop.borrow() || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= queries.len() {
                    break;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                let t0 = Instant::now();
                let interval = shared.interval_of(t0 - start);
                if let Some(iv) = interval {
                    local_intervals.entry(iv).or_default().sent += 1;
                }
                tokio::select! {
                    r = targets.get(&client, &queries[i], w, timeout) => match r {
                        Ok(_) => {
                            let took = t0.elapsed().as_nanos() as u64;
                            local.record(took);
                            if let Some(iv) = interval {
                                let iv = local_intervals.entry(iv).or_default();
                                iv.ok += 1;
                                iv.latency.record(took);
                            }
                            ok += 1;
                            shared.done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(f) => shared.error(f.kind(), t0 - start),
                    },
                    _ = stopped(&mut stop) => {
                        shared.cancelled();
                        break;
                    }
                }
            }
            let mut t = shared.tally();
            t.latency.merge(&local);
            t.ok += ok;
            for (i, iv) in &local_intervals {
                t.intervals.entry(*i).or_default().merge(iv);
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    sent.load(Ordering::Relaxed)
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn latency_json(h: &Histogram) -> Value {
    json!({
        "count": h.len(),
        "mean": h.mean() / 1e6,
        "min": ms(h.min()),
        "p50": ms(h.percentile(50.0)),
        "p90": ms(h.percentile(90.0)),
        "p99": ms(h.percentile(99.0)),
        "p999": ms(h.percentile(99.9)),
        "max": ms(h.max()),
    })
}

fn throughput(out: &Outcome) -> f64 {
    per_second(out.tally.ok, out.elapsed)
}

/// `n` per second of `elapsed` (0 for no time).
fn per_second(n: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// The `intervals` of the JSON report: one object per interval with a request in it.
fn intervals_json(len: Duration, intervals: &BTreeMap<u64, Interval>) -> Value {
    let rows: Vec<Value> = intervals
        .iter()
        .map(|(i, iv)| {
            json!({
                "start_s": *i as f64 * len.as_secs_f64(),
                "sent": iv.sent,
                "ok": iv.ok,
                "errors": iv.errors,
                "error_total": iv.errors.values().sum::<u64>(),
                "latency_ms": latency_json(&iv.latency),
            })
        })
        .collect();
    Value::Array(rows)
}

fn report_json(args: &ReplayArgs, plan: &Plan, available: usize, out: &Outcome) -> Value {
    let t = &out.tally;
    let (mode, rate, workers) = match plan.mode {
        Mode::Open { rate } => ("open", Some(rate), None),
        Mode::Closed { workers } => ("closed", None, Some(workers)),
    };
    json!({
        "config": {
            "target": plan.targets.bases()[0].text,
            "targets": plan.targets.bases().iter().map(|b| b.text.clone()).collect::<Vec<_>>(),
            "log": args.log.log.as_ref().map_or_else(
                || format!("synthetic default ({} queries, seed {})", args.log.synth_queries, args.log.synth_seed),
                |p| p.display().to_string()),
            "part": args.part.name(),
            "mode": mode,
            "rate": rate,
            "concurrency": workers,
            "queries_available": available,
            "duration_s": plan.duration.map(|d| d.as_secs_f64()),
            "k": plan.k,
            "timeout_s": plan.timeout.as_secs_f64(),
            "max_outstanding": plan.max_outstanding,
            "connections": plan.connections,
            "stats_from": plan.stats_from.iter().map(|u| u.text.clone()).collect::<Vec<_>>(),
        },
        "sent": out.sent,
        "ok": t.ok,
        "errors": t.errors,
        "error_total": t.errors.values().sum::<u64>(),
        "retried": plan.targets.retried(),
        "failures_by_second": t.failures_by_second,
        "intervals": plan.interval.map(|len| intervals_json(len, &t.intervals)),
        "cancelled": t.cancelled,
        "interrupted": out.interrupted,
        "started_unix_ms": out.started_unix_ms,
        "elapsed_s": out.elapsed.as_secs_f64(),
        "throughput_qps": throughput(out),
        "latency_ms": latency_json(&t.latency),
        "service_latency_ms": matches!(plan.mode, Mode::Open { .. }).then(|| latency_json(&t.service)),
        "stats": out.stats,
    })
}

fn print_report(plan: &Plan, out: &Outcome) {
    let t = &out.tally;
    let mode = match plan.mode {
        Mode::Open { rate } => format!("open loop at {rate} queries/s"),
        Mode::Closed { workers } => format!("closed loop, {workers} workers"),
    };
    let texts: Vec<&str> = plan
        .targets
        .bases()
        .iter()
        .map(|b| b.text.as_str())
        .collect();
    println!("target      {} ({mode})", texts.join(", "));
    if texts.len() > 1 {
        println!(
            "retried     {} queries on another target after a failed connection",
            plan.targets.retried()
        );
    }
    if out.interrupted {
        println!("interrupted by Ctrl-C: {} requests cancelled", t.cancelled);
    }
    let errors: Vec<String> = t.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "sent        {}  ok {}  errors {}{}",
        out.sent,
        t.ok,
        t.errors.values().sum::<u64>(),
        if errors.is_empty() {
            String::new()
        } else {
            format!(" ({})", errors.join(", "))
        }
    );
    println!(
        "elapsed     {:.2}s  throughput {:.1} ok/s",
        out.elapsed.as_secs_f64(),
        throughput(out)
    );
    let h = &t.latency;
    if h.is_empty() {
        println!("latency ms  - (no successful answer)");
        return print_stats(out);
    }
    println!(
        "latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  mean {:.3}{}",
        ms(h.percentile(50.0)),
        ms(h.percentile(90.0)),
        ms(h.percentile(99.0)),
        ms(h.percentile(99.9)),
        ms(h.max()),
        h.mean() / 1e6,
        if matches!(plan.mode, Mode::Open { .. }) {
            " (from intended send time)"
        } else {
            ""
        }
    );
    if let Some(len) = plan.interval {
        print_intervals(len, &t.intervals);
    }
    print_stats(out);
}

fn print_intervals(len: Duration, intervals: &BTreeMap<u64, Interval>) {
    println!(
        "{:>9} {:>9} {:>9} {:>8} {:>10} {:>10}",
        "start_s", "sent", "ok", "failed", "p50_ms", "p99_ms"
    );
    for (i, iv) in intervals {
        println!(
            "{:>9.1} {:>9} {:>9} {:>8} {:>10.3} {:>10.3}",
            *i as f64 * len.as_secs_f64(),
            iv.sent,
            iv.ok,
            iv.errors.values().sum::<u64>(),
            ms(iv.latency.percentile(50.0)),
            ms(iv.latency.percentile(99.0)),
        );
    }
}

fn print_stats(out: &Outcome) {
    if let Some(s) = &out.stats {
        println!(
            "{:<32} {:>9} {:>7} {:>14} {:>14} {:>10} {:>14} {:>14}",
            "replica",
            "queries",
            "share",
            "hit_bytes",
            "miss_bytes",
            "miss_bytes",
            "flash_bytes",
            "cache_bytes"
        );
        let field =
            |r: &stats::ReplicaDelta, k: &str| r.delta.get(k).and_then(Value::as_u64).unwrap_or(0);
        let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"));
        for r in &s.replicas {
            println!(
                "{:<32} {:>9} {:>7.3} {:>14} {:>14} {:>10} {:>14} {:>14}",
                r.url,
                field(r, "queries"),
                r.query_share,
                field(r, "hit_bytes"),
                field(r, "miss_bytes"),
                ratio(r.miss_bytes_ratio),
                field(r, "flash_bytes"),
                field(r, "cache_bytes")
            );
        }
        println!(
            "{:<32} {:>9} {:>7} {:>14} {:>14} {:>10} {:>14}",
            "cluster",
            s.queries,
            "1.000",
            s.hit_bytes,
            s.miss_bytes,
            ratio(s.miss_bytes_ratio),
            s.flash_bytes
        );
        println!(
            "cluster miss bytes ratio {}  miss ratio {}  imbalance {}",
            ratio(s.miss_bytes_ratio),
            ratio(s.miss_ratio),
            s.imbalance
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("abc"), None);
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(parse_duration("-1s"), None);
    }
}
