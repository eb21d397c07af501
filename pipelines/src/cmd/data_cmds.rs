//! The data-preparation commands: `ingest` (any log format to Parquet), `gen` (the
//! synthetic log and its frequency table), `sizes` (postings-size table for a log) and
//! `stats` (a log's headline statistics, used to calibrate the generator).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use data::sizes::SizeTable;
use data::synth::{generate, write_freq_tsv, SynthConfig};
use data::tokenizer::Tokens;
use querylog::stats::{log_stats, postings_stats};
use querylog::{format_timestamp, read_log_with, write_log_parquet, LogRecord, ReadOptions};
use rustc_hash::FxHashSet;

use crate::inputs::{LayoutArgs, LogArgs, SizeArgs};
use crate::progress::Stage;

/// Arguments of `ballot ingest`.
#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Input log (any supported layout, gzip-transparent; see --format).
    pub input: PathBuf,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Output Parquet log (`ts`, `user`, `query`), or with --partition-by-day a directory.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Keep consecutive repeats.
    #[arg(long)]
    pub keep_repeats: bool,
    /// Write one Hive-style partition per UTC day, `OUTPUT/date=YYYY-MM-DD/part-0.parquet`
    /// (every record needs a time), the layout `--log DIR` and `ballot retrain` read.
    #[arg(long)]
    pub partition_by_day: bool,
}

/// Converts any supported log to the Parquet log schema, keeping its users and times.
pub fn ingest(args: &IngestArgs) -> Result<()> {
    let layout = args.layout.spec()?;
    let stage = Stage::start("reading");
    let log = read_log_with(
        &args.input,
        &ReadOptions {
            keep_repeats: args.keep_repeats,
            layout,
            ..Default::default()
        },
        &mut |layout, first| {
            for line in layout.preview(first) {
                stage.println(&line);
            }
        },
    )?;
    stage.finish(&log.report.summary());
    if args.partition_by_day {
        return write_days(&args.output, &log.records, &args.input);
    }
    write_log_parquet(&args.output, &log.records)?;
    let with = |n: usize, what: &str| {
        if n == log.records.len() {
            format!("all with {what}")
        } else if n == 0 {
            format!("no {what}")
        } else {
            format!("{n} with {what}")
        }
    };
    println!(
        "wrote {} queries ({}, {}) to {}",
        log.records.len(),
        with(
            log.records.iter().filter(|r| r.user.is_some()).count(),
            "user"
        ),
        with(
            log.records.iter().filter(|r| r.ts.is_some()).count(),
            "time"
        ),
        args.output.display()
    );
    Ok(())
}

/// Writes `records` as one partition per UTC day under `dir`, in record order within a day.
fn write_days(dir: &std::path::Path, records: &[LogRecord], input: &std::path::Path) -> Result<()> {
    let mut days: std::collections::BTreeMap<String, Vec<LogRecord>> = Default::default();
    for (i, r) in records.iter().enumerate() {
        let Some(ts) = r.ts else {
            bail!(
                "{}: --partition-by-day needs a time on every record, but record {} has none",
                input.display(),
                i + 1
            );
        };
        let day = format_timestamp(ts)[..10].to_owned();
        days.entry(day).or_default().push(r.clone());
    }
    for (day, part) in &days {
        let folder = dir.join(format!("date={day}"));
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("{}: cannot create", folder.display()))?;
        write_log_parquet(&folder.join("part-0.parquet"), part)?;
    }
    println!(
        "wrote {} queries to {} daily partitions under {} ({} to {})",
        records.len(),
        days.len(),
        dir.display(),
        days.keys().next().map_or("", String::as_str),
        days.keys().next_back().map_or("", String::as_str)
    );
    Ok(())
}

/// Arguments of `ballot gen`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Output Parquet log.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output frequency table (default: next to the log, `<stem>.freq.tsv`).
    #[arg(long)]
    pub freq_out: Option<PathBuf>,
    /// Number of queries.
    #[arg(long, default_value_t = SynthConfig::default().queries)]
    pub queries: usize,
    /// Seed.
    #[arg(long, default_value_t = SynthConfig::default().seed)]
    pub seed: u64,
    /// Override a generator knob, `NAME=VALUE` (repeatable); see the README.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub knobs: Vec<String>,
}

/// Writes the synthetic log and its frequency table.
pub fn gen(args: &GenArgs) -> Result<()> {
    let mut cfg = SynthConfig {
        queries: args.queries,
        seed: args.seed,
        ..SynthConfig::default()
    };
    for kv in &args.knobs {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set {kv:?}: expected NAME=VALUE"))?;
        cfg.set(k.trim(), v.trim())?;
    }
    cfg.validate()?;
    let stage = Stage::start("generating");
    let log = generate(&cfg);
    stage.finish(&format!("{} queries", log.queries.len()));
    let records: Vec<LogRecord> = log
        .queries
        .iter()
        .zip(&log.users)
        .zip(&log.timestamps_ms)
        .map(|((q, u), t)| LogRecord {
            ts: Some(*t),
            user: Some(u.to_string()),
            query: q.clone(),
        })
        .collect();
    write_log_parquet(&args.output, &records)?;
    let freq_path = args.freq_out.clone().unwrap_or_else(|| {
        let stem = args
            .output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "log".into());
        args.output.with_file_name(format!("{stem}.freq.tsv"))
    });
    write_freq_tsv(&freq_path, &log.freq)
        .with_context(|| format!("{}: cannot write", freq_path.display()))?;
    println!(
        "wrote {} queries to {} and {} term frequencies to {}",
        records.len(),
        args.output.display(),
        log.freq.len(),
        freq_path.display()
    );
    Ok(())
}

/// Arguments of `ballot sizes`.
#[derive(Args, Debug)]
pub struct SizesArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// A search engine's terms dump, `term<TAB>document_frequency` (gzip-transparent):
    /// every term in it gets the postings bytes of that many documents, whatever the log
    /// (docs/engines.md, "The size table").
    #[arg(long, conflicts_with_all = ["sizes", "freq"])]
    pub terms: Option<PathBuf>,
    /// A Tantivy index directory: every term of its text field gets its postings bytes
    /// from the term dictionary, summed over segments (needs the `tantivy` feature).
    #[arg(long, conflicts_with_all = ["sizes", "freq", "terms"])]
    pub tantivy: Option<PathBuf>,
    /// With --tantivy: the indexed text field (default: the index's only one).
    #[arg(long, requires = "tantivy")]
    pub tantivy_field: Option<String>,
    /// Count each postings list as the engine's page cache reads it: `L + P - 1` bytes for
    /// a list of `L` bytes read in pages of `P` bytes (the pages it touches on average),
    /// so a one-document list costs at least a page. For engines reading their index through the
    /// kernel's page cache (Tantivy, Lucene's mmap); 0 counts exact bytes, as ballot's
    /// replica reads them (docs/engines.md, "The size table").
    #[arg(long, default_value_t = 0, value_name = "P",
          value_parser = clap::value_parser!(u64).range(0..=1 << 20))]
    pub page_bytes: u64,
    /// Output size table `(term, bytes)`.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Writes the postings size of every term of the log, or of every term of a terms dump.
pub fn sizes(args: &SizesArgs) -> Result<()> {
    if let Some(terms) = &args.terms {
        let table = querylog::freq::read_term_df_tsv(terms)?;
        return write_size_table(&in_pages(table, args.page_bytes), &args.output);
    }
    if let Some(dir) = &args.tantivy {
        let table = tantivy_sizes(dir, args.tantivy_field.as_deref(), args.page_bytes)?;
        return write_size_table(&table, &args.output);
    }
    let dataset = args.log.load()?;
    let sizes = args.sizes.load(&dataset)?;
    let mut tokens = Tokens::new();
    let mut terms: FxHashSet<String> = FxHashSet::default();
    for q in dataset.queries.distinct_texts() {
        tokens.tokenize(q);
        for t in tokens.iter() {
            if !terms.contains(t) {
                terms.insert(t.to_owned());
            }
        }
    }
    let table = sizes.table_for(terms.iter().map(String::as_str));
    write_size_table(&in_pages(table, args.page_bytes), &args.output)
}

/// `table` with each list's page overhead, `page_bytes - 1`, added (`--page-bytes`).
fn in_pages(table: SizeTable, page_bytes: u64) -> SizeTable {
    let overhead = page_bytes.saturating_sub(1);
    if overhead == 0 {
        return table;
    }
    SizeTable::from_pairs(
        table
            .sorted()
            .into_iter()
            .map(|(t, b)| (t.to_owned(), b + overhead)),
    )
}

/// The size table of the Tantivy index in `dir` (`tantivy_engine::sizes`).
#[cfg(feature = "tantivy")]
fn tantivy_sizes(dir: &Path, field: Option<&str>, page_bytes: u64) -> Result<SizeTable> {
    let read = tantivy_engine::sizes::term_sizes(dir, field, page_bytes)?;
    if read.sizes.is_empty() {
        bail!(
            "{}: the field has no term ballot's tokenizer can produce",
            dir.display()
        );
    }
    println!(
        "read {} terms from {} segment(s) of {} ({} skipped: not lowercase alphanumeric)",
        read.sizes.len(),
        read.segments,
        dir.display(),
        read.skipped
    );
    Ok(SizeTable::from_pairs(read.sizes))
}

#[cfg(not(feature = "tantivy"))]
fn tantivy_sizes(dir: &Path, _field: Option<&str>, _page_bytes: u64) -> Result<SizeTable> {
    anyhow::bail!(
        "cannot read the Tantivy index {}: this ballot was built without the `tantivy` \
         feature (cargo build --release -p pipelines --features tantivy)",
        dir.display()
    )
}

fn write_size_table(table: &SizeTable, output: &Path) -> Result<()> {
    table.write_parquet(output)?;
    let total: u64 = table.sorted().iter().map(|(_, b)| b).sum();
    println!(
        "wrote {} terms ({} postings bytes) to {}",
        table.len(),
        total,
        output.display()
    );
    Ok(())
}

/// Arguments of `ballot stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
}

/// Prints a log's headline statistics (and postings statistics when sizes are known).
pub fn stats(args: &StatsArgs) -> Result<()> {
    let dataset = args.log.load()?;
    if let Some(s) = &dataset.read_summary {
        eprintln!("{s}");
    }
    println!("log: {}", dataset.label);
    for line in &dataset.preview {
        println!("{line}");
    }
    let st = log_stats(dataset.queries.iter());
    for (label, value) in st.table_rows() {
        println!("  {label:<48} {value}");
    }
    if let Some(users) = dataset.distinct_users {
        println!(
            "  {:<48} {}",
            "distinct users",
            querylog::stats::thousands(users as u64)
        );
    }
    let times: Vec<i64> = dataset.timestamps.present().collect();
    if let (Some(lo), Some(hi)) = (times.iter().min(), times.iter().max()) {
        println!(
            "  {:<48} {} to {}",
            "time span",
            format_timestamp(*lo),
            format_timestamp(*hi)
        );
    }
    if let Ok(sizes) = args.sizes.load(&dataset) {
        let ps = postings_stats(dataset.queries.iter(), |t| sizes.bytes(t));
        for (label, value) in ps.table_rows() {
            println!("  {label:<48} {value}");
        }
    }
    Ok(())
}
