//! What `ballot train --engine` reads: the fit part of a partitioned log aggregated by an
//! engine (DataFusion here or a Ballista cluster) into distinct queries with counts, and,
//! read by this process, only the newest day (the validation part) and the most recent fit
//! days the refinement replays. Memory grows with the distinct queries and the replayed
//! sample, not with the log's rows.

use std::path::Path;

use anyhow::{bail, Context, Result};
use querylog::{
    read_partitions_compact, LayoutSpec, LogError, QueryColumn, ReadOptions, TimeRange, DAY_MS,
};

use super::count::{block_on, count_queries, session, QueryCounts};
use super::{input, Engine};
use crate::inputs::day_label;
use crate::progress::Stage;

/// How to read the log.
pub struct FitSpec<'a> {
    /// The directory of daily partitions.
    pub dir: &'a Path,
    /// `--from` / `--to`.
    pub range: TimeRange,
    /// The layout flags.
    pub layout: LayoutSpec,
    /// `--keep-repeats`.
    pub keep_repeats: bool,
    /// The fit records to read for the replay (`--refine-sample`; 0: every fit day).
    pub refine_sample: usize,
}

/// The inputs of a counted training run.
pub struct FitInputs {
    /// The fit part's distinct queries with their counts.
    pub counts: QueryCounts,
    /// The days of the fit part, oldest first (at least one).
    pub fit_days: usize,
    /// The most recent fit records, oldest first, for the replay.
    pub replay: Vec<QueryColumn>,
    /// The validation day's records.
    pub validation: QueryColumn,
}

/// Aggregates the fit part on `engine` and reads the validation day and the replayed fit
/// days.
pub fn read_fit(spec: FitSpec<'_>, engine: &Engine) -> Result<FitInputs> {
    let dir = spec.dir;
    let selected = input::select(dir, &spec.range, &spec.layout)?;
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
        keep_repeats: spec.keep_repeats,
        layout: spec.layout,
        on_rows: Default::default(),
    };
    let validation = read_day(dir, &opts, validation_day, "the validation day")?
        .with_context(|| format!("{}: the validation day has no records", dir.display()))?;
    // The refinement replays the most recent fit records: read fit days newest first
    // until the sample is full (every fit day with --refine-sample 0).
    let mut replay: Vec<QueryColumn> = Vec::new();
    let mut replay_len = 0usize;
    for &day in fit_days.iter().rev() {
        if spec.refine_sample > 0 && replay_len >= spec.refine_sample {
            break;
        }
        // A day without records (the engine counted none either) adds nothing.
        if let Some(q) = read_day(dir, &opts, day, "a replayed fit day")? {
            replay_len += q.len();
            replay.push(q);
        }
    }
    replay.reverse();
    Ok(FitInputs {
        counts,
        fit_days: fit_days.len(),
        replay,
        validation,
    })
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
