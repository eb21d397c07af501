//! `ballot aggregate`: the distinct queries of a Parquet log (a file, or the partitions of
//! a directory inside `--from/--to`) with their record counts, counted by an engine
//! (embedded DataFusion or a Ballista cluster) and written as Parquet sorted by query.
//! The aggregation `ballot train --engine` runs, on its own, to inspect or compare. Logs
//! in the text formats (and the synthetic default) are read by the local readers, which
//! collapse repeats, and counted by the embedded engine.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::engine::Engine;
use crate::inputs::LogArgs;

/// Arguments of `ballot aggregate`.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// The log (`--log` a Parquet file or a directory of partitions; other formats are read
    /// by the local readers and counted by the embedded engine; none: the synthetic
    /// default).
    #[command(flatten)]
    pub log: LogArgs,
    /// `datafusion` (embedded) or `ballista://HOST:PORT` (a cluster, `ballot cluster`).
    #[arg(long, default_value = "datafusion", value_name = "ENGINE")]
    pub engine: Engine,
    /// Output: Parquet with columns `query` and `records`, sorted by query.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Runs `ballot aggregate`.
#[cfg(feature = "cluster")]
pub fn run(args: &AggregateArgs) -> Result<()> {
    use crate::engine::count::{block_on, count_queries, count_texts, session, write_counts};
    use crate::engine::input;
    use anyhow::Context;
    use querylog::TimeRange;

    let engine = &args.engine;
    let (counts, source) = match args.log.log.as_deref() {
        Some(path) if path.is_dir() || input::is_parquet(path) => {
            let range = TimeRange::parse(args.log.from.as_deref(), args.log.to.as_deref())
                .map_err(anyhow::Error::msg)?;
            let selected = input::select(path, &range, &args.log.layout.spec()?)?;
            let files: Vec<PathBuf> = selected.files.iter().map(|(p, _)| p.clone()).collect();
            let stage = crate::progress::Stage::start(&format!(
                "aggregating {} files on {engine}",
                files.len()
            ));
            let counts = block_on(async {
                let ctx = session(engine).await?;
                count_queries(&ctx, &files, &selected.query_column).await
            })
            .with_context(|| format!("aggregating on {engine}"))?;
            stage.finish("done");
            let source = format!(
                "{} files (query column {:?})",
                files.len(),
                selected.query_column
            );
            (counts, source)
        }
        other => {
            if let Engine::Ballista { .. } = engine {
                let what = other.map_or("the synthetic default log".to_owned(), |p| {
                    p.display().to_string()
                });
                anyhow::bail!(
                    "{what}: Ballista executors read Parquet files; write the log with `ballot ingest` (--partition-by-day for a directory) or `ballot gen -o log.parquet`"
                );
            }
            // Text formats and the synthetic default: read here, counted in-process.
            let dataset = args.log.load_reported()?;
            let q = &dataset.queries;
            let counts = block_on(async {
                let ctx = session(engine).await?;
                count_texts(&ctx, (0..q.len()).map(|i| q.get(i))).await
            })?;
            (counts, dataset.label.clone())
        }
    };
    write_counts(&args.output, &counts)?;
    println!(
        "wrote {}: {} distinct queries, {} records from {source}, engine {engine}",
        args.output.display(),
        counts.counts.len(),
        counts.records(),
    );
    Ok(())
}

/// Runs `ballot aggregate` (this build has no engine: an error saying how to get one).
#[cfg(not(feature = "cluster"))]
pub fn run(args: &AggregateArgs) -> Result<()> {
    Err(crate::engine::not_built().context(format!("ballot aggregate --engine {}", args.engine)))
}
