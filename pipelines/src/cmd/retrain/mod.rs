//! `ballot retrain`: the job users schedule over a partitioned log (one folder per day,
//! `date=YYYY-MM-DD/`). It trains a table on the last `--days` days before the newest day,
//! keeping the served table's homes within a movement budget (`--max-move`,
//! [`learner::stable`]; `--fresh` trains from scratch), evaluates it and the table the
//! balancers serve on that newest day (held out; the train days warm the simulated caches;
//! `--eval-seeds` replays and queueing simulations, the figures their means), promotes the
//! new table only when it moves within the budget and is predicted to serve more, by a
//! margin ([`rule`], [`mod@predict`]), switches every listed balancer to it or none
//! ([`promote`]: checked on all first, rolled back where it switched if one fails; each
//! ramps it in), and writes a JSON record of the decision. A balancer that refuses is
//! retried and, if it still refuses, named in the record and the exit status; never skipped
//! silently.

pub mod predict;
pub mod promote;
pub mod rule;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use balancer::policy::{build_policy, PolicyKind, PolicyParams};
use cache_sim::queueing::BalancerModel;
use cache_sim::sim::movement::{movement, query_movement, requested_by_term, top_votes};
use cache_sim::sim::parts::{PartFlash, PartObserver};
use cache_sim::sim::{replay, SimConfig, SimResult, Trace};
use clap::Args;
use data::table::VotingTable;
use eviction::EvictionKind;
use learner::refine::RefineConfig;
use learner::{Stable, TrainConfig};
use querylog::{
    list_partitions, read_partitions_compact, QueryColumn, ReadOptions, TimeRange, Times, DAY_MS,
};
use serde::Serialize;
use serde_json::json;

use self::predict::{cluster, predict, Predicted, ServingArgs};
use self::rule::{decide, Figures, Rule, Throughputs, DEFAULT_MIN_GAIN, DEFAULT_MIN_PART_WINS};
use super::train::train_reported;
use crate::client;
use crate::inputs::day_label;
use crate::inputs::{CacheSizeArgs, LayoutArgs, SizeArgs};
use crate::json::write_json;
use crate::progress::Stage;
use crate::routing_args::RoutingArgs;

/// Arguments of `ballot retrain`.
#[derive(Args, Debug)]
pub struct RetrainArgs {
    /// Directory of daily partitions (`date=2006-03-01/part-0.parquet`, ...; any log
    /// format inside).
    #[arg(long)]
    pub log: PathBuf,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Keep consecutive repeats.
    #[arg(long)]
    pub keep_repeats: bool,
    /// Days to train on: the ones before the newest day, which is held out for the test.
    #[arg(long, default_value_t = 7)]
    pub days: usize,
    #[command(flatten)]
    pub sizes: SizeArgs,
    #[command(flatten)]
    pub routing: RoutingArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    /// Number of replicas R (the balancers' table width).
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    #[command(flatten)]
    pub cache: CacheSizeArgs,
    /// Eviction policy of the simulated caches (train and evaluation): lru, sieve or
    /// s3fifo, as the replicas run (the replica's default is sieve).
    #[arg(long, default_value_t = EvictionKind::SERVING_DEFAULT)]
    pub eviction: EvictionKind,
    /// Load-bound slack.
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub eps: f64,
    /// Seed of METIS and of simulated random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replays of the held-out day per table, each with its own seed of the simulated
    /// random choices (--seed, --seed + 1, ...): the figures are their means. One day's
    /// figure moves with the seed about as much as a candidate's gain.
    #[arg(long, default_value_t = DEFAULT_EVAL_SEEDS)]
    pub eval_seeds: u64,
    /// Refinement: at most this many fit queries replayed per iteration (0 = all).
    #[arg(long, default_value_t = learner::train::DEFAULT_REPLAY_FIT_MAX)]
    pub refine_sample: usize,
    /// The table the balancers serve, as a file. Without it, it is fetched from the first
    /// `--balancer` (`GET /admin/table/parquet`).
    #[arg(long)]
    pub current: Option<PathBuf>,
    /// Admin address (`host:port`) of a balancer to push a promoted table to; repeat for
    /// each balancer.
    #[arg(long = "balancer", value_name = "HOST:PORT")]
    pub balancers: Vec<String>,
    /// File holding the balancers' admin token (default: the BALLOT_ADMIN_TOKEN
    /// environment variable).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Promote only when the new table's predicted throughput on the held-out day is at
    /// least this much higher, relative to the served table's (0.02 = 2% more).
    #[arg(long, default_value_t = DEFAULT_MIN_GAIN)]
    pub min_gain: f64,
    /// ... and all replicas together read at most this much more flash bytes per query,
    /// relative (0.05 = 5% more): no balance bought with many more flash reads.
    #[arg(long, default_value_t = 0.05)]
    pub max_miss_rise: f64,
    /// Parts the held-out day is cut into (its hours with 24 when the records have times;
    /// otherwise equal slices in log order), on each of which the two tables are compared.
    #[arg(long, default_value_t = 24)]
    pub parts: usize,
    /// ... and the share of those parts (with queries) on which the new table's busiest
    /// replica must read fewer flash bytes per query in the replay (0: the parts do not
    /// decide).
    #[arg(long, default_value_t = DEFAULT_MIN_PART_WINS)]
    pub min_part_wins: f64,
    /// Replaced by --max-miss-rise (the busiest replica's share is no longer compared on
    /// its own).
    #[arg(long, hide = true)]
    pub max_flash_rise: Option<f64>,
    /// Attempts per admin call to a balancer (check, switch, rollback) before it is
    /// reported failed.
    #[arg(long, default_value_t = 3)]
    pub push_attempts: u32,
    /// Seconds between attempts (doubling each time).
    #[arg(long, default_value_t = 1.0)]
    pub push_backoff: f64,
    /// The largest share of the train days' requested postings bytes whose top vote the new
    /// table may move from the served table's: the new table is trained to keep within it
    /// (unless --fresh), and a candidate that moves more is refused.
    #[arg(long, default_value_t = DEFAULT_MAX_MOVE)]
    pub max_move: f64,
    /// Train the new table from scratch instead of from the served table's homes (its
    /// movement is still checked against --max-move; `--fresh --max-move 1` is the
    /// retraining of earlier versions).
    #[arg(long)]
    pub fresh: bool,
    /// Where to write the new table (Parquet), promoted or not.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Where to write the JSON record of the decision.
    #[arg(long)]
    pub record: PathBuf,
}

/// Default of `--max-move`.
pub const DEFAULT_MAX_MOVE: f64 = 0.2;

/// Default of `--eval-seeds`.
pub const DEFAULT_EVAL_SEEDS: u64 = 8;

/// One table's numbers on the held-out day.
#[derive(Clone, Debug, Serialize)]
struct Scored {
    source: String,
    /// The rule's figures over the whole day.
    #[serde(flatten)]
    figures: Figures,
    imbalance: f64,
    overflow_share: f64,
    /// The queueing simulator's prediction.
    predicted: Predicted,
    /// The rule's figures on each part of the day.
    #[serde(skip)]
    parts: Vec<Figures>,
}

impl Scored {
    /// The scores of replays `runs` (one per evaluation seed, each with its parts): the
    /// figures of their sums, so a figure per query is the mean over the runs (the busiest
    /// replica is the one that reads most over all of them), with one run's query counts,
    /// and the mean imbalance and overflow share.
    fn new(source: String, runs: &[(SimResult, PartFlash)], predicted: Predicted) -> Scored {
        let mut p = runs[0].1.clone();
        for (_, more) in &runs[1..] {
            p.add(more);
        }
        let n = runs.len() as f64;
        let replicas = p.flash.first().map_or(0, Vec::len);
        let per_replica: Vec<u64> = (0..replicas)
            .map(|i| p.flash.iter().map(|f| f[i]).sum())
            .collect();
        let queries = runs.iter().map(|(r, _)| r.queries).sum();
        let requested = runs.iter().map(|(r, _)| r.requested_bytes).sum();
        let one_run = |mut f: Figures, queries: u64| {
            f.queries = queries;
            f
        };
        Scored {
            source,
            figures: one_run(
                Figures::new(queries, requested, &per_replica),
                runs[0].0.queries,
            ),
            imbalance: runs.iter().map(|(r, _)| r.imbalance).sum::<f64>() / n,
            overflow_share: runs.iter().map(|(r, _)| r.overflow_share).sum::<f64>() / n,
            predicted,
            parts: (0..p.queries.len())
                .map(|i| {
                    one_run(
                        Figures::new(p.queries[i], p.requested[i], &p.flash[i]),
                        runs[0].1.queries[i],
                    )
                })
                .collect(),
        }
    }

    fn line(&self, name: &str) -> String {
        let f = &self.figures;
        format!(
            "{name}: predicted {:.1} queries/s; replayed, busiest replica {:.0} flash bytes per query ({:.3} of the flash), all replicas {:.0} (miss bytes ratio {:.4}), imbalance {:.3}",
            self.predicted.throughput_qps,
            f.busiest_flash_bytes_per_query,
            f.busiest_flash_share,
            f.flash_bytes_per_query,
            f.miss_bytes_ratio,
            self.imbalance
        )
    }
}

/// Runs `ballot retrain`.
pub fn run(args: &RetrainArgs) -> Result<()> {
    let started = Instant::now();
    validate(args)?;
    let token = admin_token(args)?;
    let (train_days, test_day) = pick_days(&args.log, args.days)?;
    eprintln!(
        "retrain: train on {} day(s) {}..{}, test on {}",
        train_days.len(),
        day_label(train_days[0]),
        day_label(*train_days.last().unwrap_or(&train_days[0])),
        day_label(test_day)
    );
    let opts = ReadOptions {
        keep_repeats: args.keep_repeats,
        layout: args.layout.spec()?,
        ..Default::default()
    };
    let train_range = TimeRange {
        from_ms: Some(train_days[0]),
        to_ms: Some(test_day),
    };
    let test_range = TimeRange {
        from_ms: Some(test_day),
        to_ms: Some(test_day + DAY_MS),
    };
    let (train_log, _) = read_days(&args.log, &opts, &train_range, "train days")?;
    let (test_log, test_times) = read_days(&args.log, &opts, &test_range, "test day")?;
    let (part_of, parts_by) = cut_day(&test_times, test_log.len(), test_day, args.parts);
    let sizes = args.sizes.load_for(&args.log.display().to_string())?;

    // The trace: train days (warm-up) then the held-out day, as `eval` replays a time split.
    let stage = Stage::start("tokenizing");
    let trace = Trace::build(
        train_log.iter().chain(test_log.iter()),
        train_log.len(),
        &sizes,
    );
    stage.finish(&format!(
        "{} train + {} test queries, {} distinct terms",
        trace.train_len,
        trace.test_len(),
        trace.dict.len()
    ));
    let capacity = args.cache.capacity(&trace);

    let current = load_current(args, token.as_deref())?;
    let train_queries: Vec<&str> = train_log.iter().collect();
    let cfg = TrainConfig {
        load: args.routing.sim_load_for(PolicyKind::Table)?,
        homes: args.routing.homes,
        eviction: args.eviction,
        eps: args.eps,
        seed: args.seed,
        replay_fit_max: (args.refine_sample > 0).then_some(args.refine_sample),
        refine: RefineConfig::default(),
        stable: (!args.fresh).then(|| Stable {
            served: Arc::clone(&current.1),
            max_move: args.max_move,
        }),
        ..TrainConfig::new(args.replicas, args.cache.cache_frac, capacity)
    };
    let out = train_reported(&train_queries, &sizes, &cfg)?;
    // Stable training measured its movement over the same train queries.
    let moved = out.report.movement.unwrap_or_else(|| {
        movement(
            &top_votes(&trace, &current.1),
            &top_votes(&trace, &out.table),
            &requested_by_term(&trace, 0..trace.train_len),
        )
    });
    let moved_queries = query_movement(&trace, 0..trace.train_len, &current.1, &out.table)?;
    println!(
        "moves the top vote of {:.1}% and the first choice of queries holding {:.1}% of the \
         train days' requested bytes ({})",
        moved.share() * 100.0,
        moved_queries.share() * 100.0,
        if args.fresh {
            "trained from scratch"
        } else {
            "trained from the served table's homes"
        }
    );
    out.table
        .write_parquet(&args.output)
        .context("writing the new table")?;
    let new_table = Arc::new(out.table);

    let stage = Stage::start("evaluating on the held-out day");
    let new_score = evaluate(
        &trace,
        args,
        capacity,
        new_table,
        &part_of,
        args.output.display().to_string(),
    )?;
    let cur_score = evaluate(
        &trace,
        args,
        capacity,
        current.1,
        &part_of,
        current.0.clone(),
    )?;
    stage.finish("done");

    let rule = Rule {
        min_gain: args.min_gain,
        max_miss_rise: args.max_miss_rise,
        min_part_wins: args.min_part_wins,
        max_move: args.max_move,
    };
    let part_pairs: Vec<(Figures, Figures)> = cur_score
        .parts
        .iter()
        .copied()
        .zip(new_score.parts.iter().copied())
        .collect();
    let verdict = decide(
        &rule,
        &moved,
        Throughputs {
            served: cur_score.predicted.throughput_qps,
            candidate: new_score.predicted.throughput_qps,
        },
        &cur_score.figures,
        &new_score.figures,
        &part_pairs,
    );
    let promote = verdict.promote;
    let reason = verdict.reason.clone();
    println!("{}", cur_score.line("served"));
    println!("{}", new_score.line("new   "));
    println!("{}: {reason}", if promote { "promote" } else { "refuse" });

    let promotion = if promote {
        let body = std::fs::read(&args.output)
            .with_context(|| format!("{}: reading the new table", args.output.display()))?;
        let retry = promote::Retry {
            attempts: args.push_attempts,
            backoff: args.push_backoff,
        };
        promote::promote(&args.balancers, &body, token.as_deref(), retry)
    } else {
        promote::Promotion {
            outcome: "skipped",
            ..promote::Promotion::default()
        }
    };
    for s in &promotion.switches {
        if s.ok {
            println!(
                "switched {} (attempt {}): serving version {}",
                s.balancer,
                s.attempts,
                s.version.map_or("?".to_owned(), |v| v.to_string())
            );
        }
    }
    for r in &promotion.refused {
        eprintln!("refused by {r}");
    }
    for r in &promotion.rollbacks {
        match &r.error {
            None => println!("rolled back {}: serving its previous table", r.balancer),
            Some(e) => eprintln!("rollback of {} FAILED: {e}", r.balancer),
        }
    }
    let record = json!({
        "decision": if promote { "promoted" } else { "refused" },
        "reason": reason,
        "log": args.log.display().to_string(),
        "train_days": train_days.iter().map(|&d| day_label(d)).collect::<Vec<_>>(),
        "test_day": day_label(test_day),
        "train_queries": trace.train_len,
        "test_queries": trace.test_len(),
        "replicas": args.replicas,
        "cache_frac": args.cache.cache_frac,
        "cache_bytes": capacity,
        "eviction": args.eviction.name(),
        "rule": rule,
        "eval_seeds": args.eval_seeds,
        "serving": {
            "flash_read_mbps": args.serving.flash_read_mbps,
            "flash_latency_us": args.serving.flash_latency_us,
            "concurrency": args.serving.concurrency,
        },
        "trained": if args.fresh { "fresh" } else { "stable" },
        "moved_share": moved.share(),
        "movement": moved,
        "moved_queries_share": moved_queries.share(),
        "deciding": verdict.deciding,
        "part_wins": verdict.part_wins,
        "parts": verdict.parts,
        "part_wins_needed": verdict.wins_needed,
        "parts_by": parts_by,
        "new": new_score,
        "current": cur_score,
        "by_part": part_pairs
            .iter()
            .map(|(s, c)| json!({"current": s, "new": c}))
            .collect::<Vec<_>>(),
        "current_version": current.2,
        "promotion": promotion,
        "train_report": out.report,
        "seconds": started.elapsed().as_secs_f64(),
    });
    write_json(&args.record, &record)?;
    println!("wrote {}", args.record.display());
    match promotion.outcome {
        "all" | "skipped" => Ok(()),
        "none" => bail!(
            "the rule promoted the new table, but {} of {} balancers refused it, so none serves \
             it{} (see {})",
            promotion.refused.len(),
            args.balancers.len(),
            if promotion.rollbacks.is_empty() {
                ""
            } else {
                ": the ones that had switched were rolled back"
            },
            args.record.display()
        ),
        _ => bail!(
            "the new table reached only some balancers: a switch failed and a rollback failed \
             too (see {})",
            args.record.display()
        ),
    }
}

fn validate(args: &RetrainArgs) -> Result<()> {
    if args.days == 0 {
        bail!("--days must be at least 1");
    }
    args.cache.validate()?;
    if !(args.min_gain.is_finite() && (0.0..1.0).contains(&args.min_gain)) {
        bail!("--min-gain {} is not in [0, 1)", args.min_gain);
    }
    if args.max_flash_rise.is_some() {
        bail!("--max-flash-rise was replaced by --max-miss-rise: the predicted throughput now decides (--min-gain), and the total flash bytes per query may rise by at most --max-miss-rise");
    }
    if !(args.max_miss_rise.is_finite() && args.max_miss_rise >= 0.0) {
        bail!("--max-miss-rise {} must be >= 0", args.max_miss_rise);
    }
    if args.parts == 0 {
        bail!("--parts must be at least 1");
    }
    let serving = &args.serving;
    if !(serving.flash_read_mbps.is_finite() && serving.flash_read_mbps > 0.0) {
        bail!(
            "--flash-read-mbps {} must be a positive number of MB/s",
            serving.flash_read_mbps
        );
    }
    if !(serving.flash_latency_us.is_finite() && serving.flash_latency_us >= 0.0) {
        bail!(
            "--flash-latency-us {} must be >= 0",
            serving.flash_latency_us
        );
    }
    if serving.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if !(1..=100).contains(&args.eval_seeds) {
        bail!("--eval-seeds {} is not in 1..=100", args.eval_seeds);
    }
    if !(args.max_move.is_finite() && (0.0..=1.0).contains(&args.max_move)) {
        bail!("--max-move {} is not in [0, 1]", args.max_move);
    }
    if !(args.min_part_wins.is_finite() && (0.0..=1.0).contains(&args.min_part_wins)) {
        bail!("--min-part-wins {} is not in [0, 1]", args.min_part_wins);
    }
    if args.push_attempts == 0 {
        bail!("--push-attempts must be at least 1");
    }
    if !(args.push_backoff.is_finite() && args.push_backoff >= 0.0) {
        bail!("--push-backoff {} must be >= 0", args.push_backoff);
    }
    if args.current.is_none() && args.balancers.is_empty() {
        bail!("pass --current TABLE.parquet or at least one --balancer to fetch the served table from");
    }
    Ok(())
}

/// The token from `--token-file` or `BALLOT_ADMIN_TOKEN` (None: none configured).
fn admin_token(args: &RetrainArgs) -> Result<Option<String>> {
    match &args.token_file {
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .with_context(|| format!("{}: reading the admin token", p.display()))?;
            Ok(Some(t.trim().to_owned()))
        }
        None => Ok(std::env::var("BALLOT_ADMIN_TOKEN").ok()),
    }
}

/// The newest day of the partitioned log (held out) and the up to `days` days before it
/// that have data, oldest first, as unix ms at midnight UTC.
fn pick_days(dir: &Path, days: usize) -> Result<(Vec<i64>, i64)> {
    if !dir.is_dir() {
        bail!(
            "{}: --log must be a directory of daily partitions (date=YYYY-MM-DD/...)",
            dir.display()
        );
    }
    let mut all: Vec<i64> = list_partitions(dir)?
        .iter()
        .filter_map(|f| f.span().filter(|(s, e)| e - s == DAY_MS).map(|(s, _)| s))
        .collect();
    all.sort_unstable();
    all.dedup();
    let Some((&test, before)) = all.split_last() else {
        bail!(
            "{}: no partition is named by a date (date=YYYY-MM-DD/...)",
            dir.display()
        );
    };
    if before.is_empty() {
        bail!(
            "{}: only one day ({}); retraining needs at least one day to train on before the held-out day",
            dir.display(),
            day_label(test)
        );
    }
    let from = before.len().saturating_sub(days);
    Ok((before[from..].to_vec(), test))
}

/// The part of each of the held-out day's `n` records: its hour (of `parts` equal spans of
/// the day) when every record has a time, else its slice of `parts` equal slices in log
/// order; and which of the two it is, for the record.
fn cut_day(times: &Times, n: usize, day: i64, parts: usize) -> (Vec<u32>, String) {
    if times.complete() && times.len() == n {
        let part_of = (0..n)
            .map(|i| {
                let t = times.get(i).unwrap_or(day).clamp(day, day + DAY_MS - 1);
                ((t - day) as u128 * parts as u128 / DAY_MS as u128) as u32
            })
            .collect();
        (
            part_of,
            format!("time ({} spans of {:.2} h)", parts, 24.0 / parts as f64),
        )
    } else {
        let part_of = (0..n).map(|i| (i * parts / n.max(1)) as u32).collect();
        (part_of, format!("log order ({parts} equal slices)"))
    }
}

/// Reads the partitions of `dir` inside `range` (their records filtered by time when they
/// have times): the queries and their times.
fn read_days(
    dir: &Path,
    opts: &ReadOptions,
    range: &TimeRange,
    what: &str,
) -> Result<(QueryColumn, Times)> {
    let stage = Stage::start(&format!("reading {what}"));
    let mut read = read_partitions_compact(dir, opts, range, &mut |_, _| {}, &mut |f, r| {
        stage.println(&format!("  {}: {} records", f.label(), r.records))
    })?;
    // Records carry times in most logs: keep those inside the range (a partition may hold a
    // few records of its neighbours). Without times the partition decides.
    if read.log.times.complete() {
        read.log
            .retain_in(range)
            .map_err(|i| anyhow::anyhow!("record {} has no time", i + 1))?;
    }
    if read.log.queries.is_empty() {
        bail!("{}: the {what} have no records", dir.display());
    }
    stage.finish(&format!(
        "{} records from {} partitions",
        read.log.queries.len(),
        read.files.len()
    ));
    Ok((read.log.queries, read.log.times))
}

/// The served table: `--current`, or the first balancer's. Returns its source label, the
/// table and the balancer's version (None for a file).
fn load_current(
    args: &RetrainArgs,
    token: Option<&str>,
) -> Result<(String, Arc<VotingTable>, Option<u64>)> {
    let r = u16::try_from(args.replicas).context("--replicas is too large")?;
    if let Some(p) = &args.current {
        let t = VotingTable::read_parquet(p, Some(r)).context("reading --current")?;
        let t = crate::inputs::table_for(t, args.replicas, "--current")?;
        return Ok((p.display().to_string(), Arc::new(t), None));
    }
    let b = &args.balancers[0];
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    let resp = client::call(
        b,
        "GET",
        "/admin/table/parquet",
        &headers,
        &[],
        Duration::from_secs(30),
    )?;
    if resp.status != 200 {
        bail!(
            "http://{b}/admin/table/parquet answered {}: {}",
            resp.status,
            resp.text().trim()
        );
    }
    let version = resp
        .header("x-ballot-table-version")
        .and_then(|v| v.parse().ok());
    let label = format!("http://{b}/admin/table/parquet");
    let t = VotingTable::from_parquet_bytes(resp.body.to_vec(), Path::new(&label), Some(r))
        .with_context(|| format!("{label}: the served table"))?;
    let t = crate::inputs::table_for(t, args.replicas, &label)?;
    Ok((label, Arc::new(t), version))
}

/// The `table` policy with `table` over the trace's test part, watched part by part, once
/// per evaluation seed (`--seed` and the `--eval-seeds` − 1 after it), and its throughput
/// predicted with the same seeds.
fn evaluate(
    trace: &Trace,
    args: &RetrainArgs,
    capacity: u64,
    table: Arc<VotingTable>,
    part_of: &[u32],
    source: String,
) -> Result<Scored> {
    let params = PolicyParams {
        eps: args.eps,
        homes: args.routing.homes,
        evidence: args.routing.cache_evidence,
        term_bytes: Arc::new(trace.term_bytes_map()),
        table: Some(table),
        ..PolicyParams::new(args.replicas)
    };
    let policy = build_policy(PolicyKind::Table, &params)?;
    let load = args.routing.policy_loads()?.of(PolicyKind::Table);
    let seeds = || (0..args.eval_seeds).map(|k| args.seed.wrapping_add(k));
    let runs: Vec<(SimResult, PartFlash)> = seeds()
        .map(|seed| {
            let cfg = SimConfig {
                admission: None,
                replicas: args.replicas,
                capacity_bytes: capacity,
                eviction: args.eviction,
                window: cache_sim::sim::replay::DEFAULT_WINDOW,
                seed,
                load,
            };
            let mut watch = PartObserver::new(trace, part_of, args.parts, args.replicas);
            let result = replay(trace, policy.as_ref(), &cfg, &mut watch);
            (result, watch.parts)
        })
        .collect();
    // One load view per balancer the table would be pushed to, as they run.
    let balancer = BalancerModel {
        load: args.routing.table_load(),
        work_query_bytes: args.routing.work_query_bytes,
        count: args.balancers.len().max(1),
        ..BalancerModel::default()
    };
    let cfg = cluster(
        &args.serving,
        args.replicas,
        capacity,
        args.eviction,
        balancer,
    );
    let predicted = predict(
        trace,
        policy.as_ref(),
        &cfg,
        args.serving.concurrency,
        seeds(),
    )?;
    Ok(Scored::new(source, &runs, predicted))
}
