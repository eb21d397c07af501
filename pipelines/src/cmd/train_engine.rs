//! `ballot train --engine`: the fit part of a partitioned log is aggregated by an engine
//! (DataFusion here or a Ballista cluster) into distinct queries with counts; this process
//! reads only the newest day (the validation part) and the most recent fit days it
//! replays, then trains from the counts (`learner::train::train_counted`). Memory grows
//! with the distinct queries and the replayed sample, not with the log's rows.

use std::path::Path;

use anyhow::{bail, Context, Result};
use cache_sim::sim::{capacity_of, distinct_bytes_of};
use data::log::{read_partitions_compact, LogError, QueryColumn, ReadOptions, TimeRange, DAY_MS};
use learner::train::{train_counted, CountedLog};

use super::retrain::day_label;
use super::train::{reported, train_config, write_outputs, TrainArgs};
use crate::engine::count::{block_on, count_queries, session};
use crate::engine::{input, Engine};
use crate::progress::Stage;

/// Runs `ballot train --engine`.
pub fn run(args: &TrainArgs, engine: &Engine) -> Result<()> {
    let Some(dir) = args.log.log.as_deref().filter(|p| p.is_dir()) else {
        bail!("--engine trains on a directory of daily Parquet partitions (--log DIR, date=YYYY-MM-DD/...)");
    };
    let range = TimeRange::parse(args.log.from.as_deref(), args.log.to.as_deref())
        .map_err(anyhow::Error::msg)?;
    let spec = args.log.layout.spec()?;
    let selected = input::select(dir, &range, &spec)?;
    let mut days: Vec<i64> = Vec::new();
    for (path, day) in &selected.files {
        match day {
            Some(d) => days.push(*d),
            None => bail!(
                "{}: not in a daily partition (date=YYYY-MM-DD/...); --engine splits the log by day",
                path.display()
            ),
        }
    }
    days.sort_unstable();
    days.dedup();
    let Some((&validation_day, fit_days)) = days.split_last().filter(|(_, b)| !b.is_empty()) else {
        bail!(
            "{}: --engine needs at least two days: the days before the newest one are the fit part, the newest one validates",
            dir.display()
        );
    };
    let fit_files: Vec<_> = selected
        .files
        .iter()
        .filter(|(_, d)| *d != Some(validation_day))
        .map(|(p, _)| p.clone())
        .collect();

    let stage = Stage::start(&format!(
        "aggregating {} fit partitions ({} days) on {engine}",
        fit_files.len(),
        fit_days.len()
    ));
    let counts = block_on(async {
        let ctx = session(engine).await?;
        count_queries(&ctx, &fit_files, &selected.query_column).await
    })
    .with_context(|| format!("aggregating on {engine}"))?;
    stage.finish(&format!(
        "{} records, {} distinct queries",
        counts.records(),
        counts.counts.len()
    ));

    let opts = ReadOptions {
        keep_repeats: args.log.keep_repeats,
        layout: spec,
        on_rows: Default::default(),
    };
    let validation = read_day(dir, &opts, validation_day, "the validation day")?
        .with_context(|| format!("{}: the validation day has no records", dir.display()))?;
    // The refinement replays the most recent fit records: read fit days newest first
    // until the sample is full (every fit day with --refine-sample 0).
    let mut replay_days: Vec<QueryColumn> = Vec::new();
    let mut replay_len = 0usize;
    for &day in fit_days.iter().rev() {
        if args.refine_sample > 0 && replay_len >= args.refine_sample {
            break;
        }
        // A day without records (the engine counted none either) adds nothing.
        if let Some(q) = read_day(dir, &opts, day, "a replayed fit day")? {
            replay_len += q.len();
            replay_days.push(q);
        }
    }
    replay_days.reverse();
    let replay: Vec<&str> = replay_days
        .iter()
        .flat_map(|q| (0..q.len()).map(move |i| q.get(i)))
        .collect();
    let validation: Vec<&str> = (0..validation.len()).map(|i| validation.get(i)).collect();

    let sizes = args.sizes.load_for(&dir.display().to_string())?;
    let fit_counts = counts.as_refs();
    // The capacity as `ballot eval` defines it, over the distinct texts this run sees.
    let capacity = capacity_of(
        distinct_bytes_of(
            fit_counts
                .iter()
                .map(|&(q, _)| q)
                .chain(validation.iter().copied()),
            &sizes,
        ),
        args.cache_frac,
    );
    let cfg = train_config(args, capacity)?;
    eprintln!(
        "training on {} fit records ({} distinct, the newest {} read for the replay) and {} validation records: R = {}, capacity {} bytes per replica",
        counts.records(),
        fit_counts.len(),
        replay.len(),
        validation.len(),
        args.replicas,
        capacity
    );
    let log = CountedLog {
        fit_counts: &fit_counts,
        replay: &replay,
        validation: &validation,
    };
    let out =
        reported(|on_stage, on_progress| train_counted(&log, &sizes, &cfg, on_stage, on_progress))?;
    write_outputs(args, &out)
}

/// The records of one day's partitions, read here (not by the engine); None when the day's
/// files hold no record.
fn read_day(dir: &Path, opts: &ReadOptions, day: i64, what: &str) -> Result<Option<QueryColumn>> {
    let range = TimeRange {
        from_ms: Some(day),
        to_ms: Some(day + DAY_MS),
    };
    let stage = Stage::start(&format!("reading {what} {}", day_label(day)));
    match read_partitions_compact(dir, opts, &range, &mut |_, _| {}, &mut |_, _| {}) {
        Ok(read) => {
            stage.finish(&format!("{} records", read.log.queries.len()));
            Ok(Some(read.log.queries))
        }
        Err(LogError::NoData { .. }) => {
            stage.finish("no records");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}
