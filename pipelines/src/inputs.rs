//! Inputs shared by the batch commands: the query log (a file, or the embedded synthetic
//! default) and its layout flags, postings sizes (`--sizes` table or `--freq` model) and the
//! train/test split. Every loader here returns an error that names the offending file, and
//! every command that reads a log prints the layout it used and the first two queries
//! before any work.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use data::sizes::{FreqTable, SizeModel, SizeTable, Sizes};
use data::split::{Split, SplitOrder};
use data::synth::{generate, SynthConfig};
use querylog::time::parse_datetime_ms;
use querylog::{
    parse_columns, read_log_compact, read_partitions_compact, LayoutSpec, QueryColumn, ReadOptions,
    RowsHook, TimeRange, Times,
};

/// `2006-03-01` for a day's midnight in unix ms (UTC).
pub fn day_label(ms: i64) -> String {
    querylog::format_timestamp(ms)[..10].to_owned()
}

/// A voting table for `replicas` replicas, as the balancer serves it: a plain table must
/// have been trained for that count; a table over virtual homes is mapped onto them
/// (`balancer::virtual_homes`). `label` names the table in errors.
pub fn table_for(
    table: data::table::VotingTable,
    replicas: usize,
    label: &str,
) -> Result<data::table::VotingTable> {
    Ok(balancer::virtual_homes::for_replicas(&table, replicas)
        .with_context(|| format!("{label}: serving it on {replicas} replicas"))?
        .unwrap_or(table))
}

/// Reads the voting table at `path` for `replicas` replicas ([`table_for`]).
pub fn read_table(path: &std::path::Path, replicas: usize) -> Result<data::table::VotingTable> {
    let r = u16::try_from(replicas).context("--replicas is too large")?;
    let table = data::table::VotingTable::read_parquet(path, Some(r))?;
    table_for(table, replicas, &path.display().to_string())
}

/// Fails unless `value` (of the flag `flag`, e.g. `--cache-frac`) is in (0, 1].
pub fn check_fraction(flag: &str, value: f64) -> Result<()> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        bail!("{flag} {value} is not in (0, 1]")
    }
}

/// The replicas' cache size in a simulation: a share of the distinct postings bytes read,
/// or their real size in bytes.
#[derive(Args, Clone, Debug)]
pub struct CacheSizeArgs {
    /// Per-replica cache size as a fraction of the distinct postings bytes of the queries
    /// read.
    #[arg(long, default_value_t = 0.05)]
    pub cache_frac: f64,
    /// The replicas' cache size in bytes, simulated in place of --cache-frac: what the
    /// serving replicas really hold (`replica --cache-bytes`), whatever the queries read.
    /// With --cache-frac the simulated cache grows with the distinct terms read, so
    /// `retrain --days 60` simulates larger caches than `--days 14`.
    #[arg(long)]
    pub cache_bytes: Option<u64>,
}

impl CacheSizeArgs {
    /// Fails on a fraction outside (0, 1] or a size of 0 bytes.
    pub fn validate(&self) -> Result<()> {
        check_fraction("--cache-frac", self.cache_frac)?;
        if self.cache_bytes == Some(0) {
            bail!("--cache-bytes must be at least 1");
        }
        Ok(())
    }

    /// Each replica's cache in bytes for the queries of `trace`.
    pub fn capacity(&self, trace: &cache_sim::sim::Trace) -> u64 {
        self.cache_bytes
            .unwrap_or_else(|| trace.capacity_for(self.cache_frac))
    }
}

/// How a log is laid out: every command that reads a log takes these flags. Without them
/// the layout is detected from the content, and lines that look like columns are refused
/// with the flags that read them.
#[derive(Args, Clone, Debug, Default)]
pub struct LayoutArgs {
    /// Layout of the log: lines, tsv, csv, parquet, or a preset: aol, excite (`user time
    /// query`, times YYMMDDhhmmss, no header), trec-topics (`qid:query`), query-column.
    /// Default: detected from the content.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Role of each column of a delimited log, in order, e.g. `user,time,query`; `-` or
    /// `skip` ignores a column. A header line, if any, is recognised and skipped.
    #[arg(long, value_name = "ROLES")]
    pub columns: Option<String>,
    /// The query column: a header name (any case) or a 1-based number.
    #[arg(long, value_name = "NAME|N")]
    pub query_column: Option<String>,
    /// The time column: a header name (any case) or a 1-based number.
    #[arg(long, value_name = "NAME|N")]
    pub time_column: Option<String>,
    /// The user column: a header name (any case) or a 1-based number.
    #[arg(long, value_name = "NAME|N")]
    pub user_column: Option<String>,
    /// How times are written: iso (YYYY-MM-DD HH:MM:SS), epoch-s, epoch-ms, or a strftime
    /// pattern such as '%d/%b/%Y:%H:%M:%S %z'. Default: the presets set their own; else
    /// iso, epoch-s (9-10 digits) or epoch-ms (13 digits) when the first values are, and
    /// any other time is an error asking for this flag.
    #[arg(long, value_name = "FORMAT")]
    pub time_format: Option<String>,
}

impl LayoutArgs {
    /// The layout these flags ask for, validated.
    pub fn spec(&self) -> Result<LayoutSpec> {
        let spec = LayoutSpec {
            format: self
                .format
                .as_deref()
                .map(str::parse)
                .transpose()
                .context("--format")?,
            columns: self.columns.as_deref().map(parse_columns).transpose()?,
            query_column: parse_ref(&self.query_column, "--query-column")?,
            user_column: parse_ref(&self.user_column, "--user-column")?,
            time_column: parse_ref(&self.time_column, "--time-column")?,
            time_format: self
                .time_format
                .as_deref()
                .map(str::parse)
                .transpose()
                .context("--time-format")?,
        };
        spec.validate()?;
        Ok(spec)
    }
}

fn parse_ref(value: &Option<String>, flag: &str) -> Result<Option<querylog::ColumnRef>> {
    value
        .as_deref()
        .map(str::parse)
        .transpose()
        .with_context(|| format!("{flag} {:?}", value.as_deref().unwrap_or_default()))
}

/// Where the queries come from.
#[derive(Args, Clone, Debug)]
pub struct LogArgs {
    /// Query log, plain or gzip: one query per line, TSV/CSV, AOL, Excite, TREC topics or
    /// Parquet (see --format); or a directory of Hive-style partitions
    /// (`date=2006-03-01/part-0.parquet`, ...) read in path order. Omit it to use the
    /// embedded synthetic default.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Only records from this date or time on (UTC, `2006-03-01` or
    /// `2006-03-01T06:00:00`): partitions of a directory that end before it are not read,
    /// and records are filtered by their time.
    #[arg(long, value_name = "DATE")]
    pub from: Option<String>,
    /// Only records up to this date (its whole day) or before this time (UTC).
    #[arg(long, value_name = "DATE")]
    pub to: Option<String>,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Keep consecutive repeats (by default AOL's one-row-per-click repeats are collapsed).
    #[arg(long)]
    pub keep_repeats: bool,
    /// Queries in the embedded synthetic default log.
    #[arg(long, default_value_t = SynthConfig::default().queries)]
    pub synth_queries: usize,
    /// Seed of the embedded synthetic default log.
    #[arg(long, default_value_t = SynthConfig::default().seed)]
    pub synth_seed: u64,
}

/// Where postings sizes come from.
#[derive(Args, Clone, Debug)]
pub struct SizeArgs {
    /// Size table `(term, bytes)` from `ballot sizes` or `ballot build-index`.
    #[arg(long, conflicts_with = "freq")]
    pub sizes: Option<PathBuf>,
    /// Word-frequency TSV (`word<TAB>frequency_per_token`); sizes then come from the model.
    #[arg(long)]
    pub freq: Option<PathBuf>,
    /// Documents in the index (model N).
    #[arg(long, default_value_t = SizeModel::default().docs)]
    pub docs: u64,
    /// Tokens per document (model L).
    #[arg(long, default_value_t = SizeModel::default().doc_len)]
    pub doc_len: f64,
}

/// How to split the log into train and test.
#[derive(Args, Clone, Debug)]
pub struct SplitArgs {
    /// Fraction of the shuffled log used for training (warm-up); the rest is the test part.
    #[arg(long, default_value_t = 0.8)]
    pub split: f64,
    /// Seed of the shuffle.
    #[arg(long, default_value_t = 1)]
    pub shuffle_seed: u64,
    /// Split by time instead: train before this instant (UTC, `2006-05-01T00:00:00`), test
    /// from it on, in log order.
    #[arg(long)]
    pub split_time: Option<String>,
}

/// A loaded query stream.
pub struct Dataset {
    /// Human label: the file path, or "synthetic default (N queries, seed S)".
    pub label: String,
    /// The queries, in log order, repeats collapsed unless asked otherwise; each distinct
    /// text is stored once, so a 10-million-row log costs its distinct queries.
    pub queries: QueryColumn,
    /// Each query's time (unix ms), when the log has one.
    pub timestamps: Times,
    /// The synthetic log's matching frequency table (None for a file).
    pub synth_freq: Option<FreqTable>,
    /// One-line reading report (malformed lines, collapsed repeats), for files.
    pub read_summary: Option<String>,
    /// The layout used and the first two queries, as printed before any work (files).
    pub preview: Vec<String>,
    /// Distinct users, when the log has a user column.
    pub distinct_users: Option<usize>,
}

impl LogArgs {
    /// [`LogArgs::load`] as a reported stage: a spinner while reading, then one line with
    /// the query count and, for files, the reading report (malformed lines, repeats).
    pub fn load_reported(&self) -> Result<Dataset> {
        let stage = crate::progress::Stage::start("reading log");
        let dataset = self.load_printing(&|line| stage.println(line), stage.rows_hook())?;
        stage.finish(&format!(
            "{} queries ({} distinct texts, {:.0} MB in memory) from {}",
            dataset.queries.len(),
            dataset.queries.distinct_len(),
            (dataset.queries.heap_bytes() + dataset.timestamps.heap_bytes()) as f64 / 1e6,
            dataset.label
        ));
        if let Some(s) = &dataset.read_summary {
            eprintln!("{s}");
        }
        Ok(dataset)
    }

    /// Reads the log file, or generates the embedded default; prints the layout and the
    /// first two queries to stderr as soon as they are known.
    pub fn load(&self) -> Result<Dataset> {
        let rows = querylog::RowsHook::new(|n| eprintln!("reading log: {n} rows read"));
        self.load_printing(&|line| eprintln!("{line}"), rows)
    }

    /// [`LogArgs::load`], printing the layout preview with `print` and the rows read so far
    /// of a long file with `on_rows`.
    pub fn load_printing(&self, print: &dyn Fn(&str), on_rows: RowsHook) -> Result<Dataset> {
        let spec = self.layout.spec()?;
        match &self.log {
            Some(path) => {
                let mut preview = Vec::new();
                let range = TimeRange::parse(self.from.as_deref(), self.to.as_deref())
                    .map_err(anyhow::Error::msg)?;
                let opts = ReadOptions {
                    keep_repeats: self.keep_repeats,
                    layout: spec,
                    on_rows,
                };
                let mut on_start = |layout: &querylog::Layout, first: &[querylog::LogRecord]| {
                    preview = layout.preview(first);
                    for line in &preview {
                        print(line);
                    }
                };
                let mut partitions_note = None;
                let mut log = if path.is_dir() {
                    let mut done = 0usize;
                    let read = read_partitions_compact(
                        path,
                        &opts,
                        &range,
                        &mut on_start,
                        &mut |f, r| {
                            done += 1;
                            print(&format!(
                                "  partition {done}: {} ({} records)",
                                f.label(),
                                r.records
                            ));
                        },
                    )?;
                    partitions_note = Some(format!(
                        "{} partitions read, {} outside --from/--to skipped",
                        read.files.len(),
                        read.skipped
                    ));
                    read.log
                } else {
                    read_log_compact(path, &opts, &mut on_start)?
                };
                let dropped = match log.retain_in(&range) {
                    Ok(n) => n,
                    // A partitioned log without times was selected by its partitions.
                    Err(_) if path.is_dir() && log.times.present().next().is_none() => 0,
                    Err(i) => bail!(
                        "{}: --from/--to filter records by time, but record {} has none",
                        path.display(),
                        i + 1
                    ),
                };
                if log.queries.is_empty() {
                    bail!("{}: no record is inside --from/--to", path.display());
                }
                let mut read_summary = log.report.summary();
                if let Some(note) = partitions_note {
                    read_summary.push_str(&format!("; {note}"));
                }
                if dropped > 0 {
                    read_summary
                        .push_str(&format!("; {dropped} records outside --from/--to dropped"));
                }
                let read_summary = Some(read_summary);
                let distinct_users = (log.distinct_users > 0).then_some(log.distinct_users);
                let (queries, timestamps) = (log.queries, log.times);
                Ok(Dataset {
                    label: path.display().to_string(),
                    queries,
                    timestamps,
                    synth_freq: None,
                    read_summary,
                    preview,
                    distinct_users,
                })
            }
            None => {
                if !spec.is_auto() {
                    bail!("--format, --columns, --*-column and --time-format describe a --log file; pass --log");
                }
                if self.from.is_some() || self.to.is_some() {
                    bail!(
                        "--from and --to select records of a --log file or directory; pass --log"
                    );
                }
                let cfg = SynthConfig {
                    queries: self.synth_queries,
                    seed: self.synth_seed,
                    ..SynthConfig::default()
                };
                cfg.validate()?;
                let log = generate(&cfg);
                Ok(Dataset {
                    label: format!(
                        "synthetic default ({} queries, seed {})",
                        cfg.queries, cfg.seed
                    ),
                    timestamps: log.timestamps_ms.iter().map(|&t| Some(t)).collect(),
                    queries: log.queries.iter().map(String::as_str).collect(),
                    synth_freq: Some(FreqTable::from_pairs(log.freq)),
                    read_summary: None,
                    preview: Vec::new(),
                    distinct_users: None,
                })
            }
        }
    }
}

impl SizeArgs {
    /// Loads the sizes; without `--sizes`/`--freq`, falls back to the synthetic log's own
    /// frequency table, and errors for a real log (its sizes cannot be guessed).
    pub fn load(&self, dataset: &Dataset) -> Result<Sizes> {
        self.load_or(&dataset.label, dataset.synth_freq.as_ref())
    }

    /// The sizes for a log file or directory named `label`: `--sizes` or `--freq` is needed.
    pub fn load_for(&self, label: &str) -> Result<Sizes> {
        self.load_or(label, None)
    }

    fn load_or(&self, label: &str, synth_freq: Option<&FreqTable>) -> Result<Sizes> {
        let model = SizeModel {
            docs: self.docs,
            doc_len: self.doc_len,
        };
        if self.docs == 0 || self.doc_len.is_nan() || self.doc_len <= 0.0 {
            bail!("--docs and --doc-len must be positive");
        }
        match (&self.sizes, &self.freq, synth_freq) {
            (Some(path), _, _) => Ok(Sizes::Table(
                SizeTable::read_parquet(path).context("loading --sizes")?,
            )),
            (None, Some(path), _) => Ok(Sizes::Model {
                freq: querylog::freq::read_freq_tsv(path).context("loading --freq")?,
                model,
            }),
            (None, None, Some(freq)) => Ok(Sizes::Model {
                freq: freq.clone(),
                model,
            }),
            (None, None, None) => bail!(
                "{label}: postings sizes are needed: pass --sizes SIZES.parquet or --freq WORDFREQ.tsv"
            ),
        }
    }
}

impl SplitArgs {
    /// The split these arguments describe.
    pub fn split(&self) -> Result<Split> {
        match &self.split_time {
            Some(t) => {
                let at_ms = parse_datetime_ms(t).with_context(|| {
                    format!("--split-time {t:?} is not a time like 2006-05-01T00:00:00")
                })?;
                Ok(Split::Time { at_ms })
            }
            None => Ok(Split::Shuffle {
                train_frac: self.split,
                seed: self.shuffle_seed,
            }),
        }
    }

    /// Splits `dataset`.
    pub fn apply(&self, dataset: &Dataset) -> Result<SplitOrder> {
        if dataset.queries.is_empty() {
            bail!("{}: the log has no queries", dataset.label);
        }
        self.split()?
            .apply(dataset.queries.len(), |i| dataset.timestamps.get(i))
            .with_context(|| format!("{}: cannot split", dataset.label))
    }
}

impl Dataset {
    /// The queries in split order (train first).
    pub fn ordered<'a>(&'a self, order: &'a SplitOrder) -> impl Iterator<Item = &'a str> + 'a {
        order.order.iter().map(|&i| self.queries.get(i as usize))
    }
}
