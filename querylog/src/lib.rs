//! `querylog`: reading query logs, for the batch jobs of `ballot` (the servers never read
//! one, so they build without this crate, its gzip decoder and its calendar).
//!
//! [`read_log`] reads any supported log and says what it found in a [`ReadReport`]:
//!
//! - gzip is transparent, recognised by its magic bytes (not the file name), and Parquet by
//!   its magic `PAR1` ([`parquet`]);
//! - the layout is what [`ReadOptions::layout`] asks for (`--format`, `--columns`, ...;
//!   [`layout`]), and whatever it leaves open is read from the first lines ([`detect`]):
//!   the AOL 2006 header (`AnonID\tQuery\tQueryTime...`), a `Query` header, a TSV or CSV
//!   header naming a query column, or else one query per line — but lines that look like
//!   delimited columns or TREC topics are refused with the flags that read them, never read
//!   silently as queries;
//! - fields are split by `csv-core` ([`fields`]): CSV with RFC 4180 quoting, TSV without;
//! - the layout and the first two records are handed to a callback before the bulk of the
//!   file is read ([`read_log_with`]), so commands can show what they are about to use;
//! - lines that do not parse are counted, the first few kept with their line numbers, and
//!   skipped ([`text`]); blank lines are counted as blank; lines are bounded
//!   ([`text::MAX_LINE_BYTES`]);
//! - consecutive repeats (the AOL log has one row per click) are collapsed unless
//!   [`ReadOptions::keep_repeats`] ([`collapse`]);
//! - a log of tens of millions of rows is held compactly ([`read_log_compact`],
//!   [`compact`]), and a directory of Hive-style partitions is read in path order, selected
//!   by a time range ([`partitions`]).
//!
//! A file that cannot be a query log — missing, empty, not a single valid line, a corrupt
//! gzip stream, a Parquet file with the wrong columns or corrupt pages, a layout that does
//! not fit — is a [`LogError`] naming the file.
//!
//! [`write_log_parquet`] writes the Parquet form `ballot ingest` produces ([`parquet`]).
//! Timestamps are unix milliseconds, UTC ([`time`]). Besides the logs themselves: their
//! headline statistics ([`stats`]), the word-frequency file that prices terms ([`freq`]),
//! and gzip-transparent opening of text files ([`io`]).

pub mod collapse;
pub mod compact;
pub mod detect;
pub mod error;
pub mod fields;
pub mod format;
pub mod freq;
pub mod io;
pub mod layout;
pub mod parquet;
pub mod partitions;
pub mod stats;
pub mod text;
pub mod time;

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

pub use crate::time::format_timestamp;
pub use collapse::collapse_repeats;
use collapse::Collector;
pub use compact::{CompactLog, QueryColumn, Times};
pub use error::LogError;
pub use format::{Delimiter, LogFormat, Role, UnknownFormat};
pub use layout::{parse_columns, ColumnRef, Layout, LayoutError, LayoutSpec, Shape};
pub use parquet::{log_schema, parquet_layout, write_log_parquet};
pub use partitions::{
    list_partitions, read_partitions_compact, PartitionFile, PartitionsRead, TimeRange, DAY_MS,
};
pub use text::{OnStart, MAX_LINE_BYTES};

/// Buffer size of the (decompressed) text reader.
const READ_BUFFER: usize = 1 << 20;
/// Buffer size of the compressed bytes fed to the gzip decoder.
const GZIP_BUFFER: usize = 256 * 1024;

/// One search of a query log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogRecord {
    /// When it was issued, in unix milliseconds (UTC), if the log says.
    pub ts: Option<i64>,
    /// Who issued it (the anonymous user id), if the log says.
    pub user: Option<String>,
    /// The query text as written in the log (may be empty).
    pub query: String,
}

/// How to read a log.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Keep consecutive repeats instead of collapsing them (see [`collapse_repeats`]).
    pub keep_repeats: bool,
    /// The layout asked for; the default detects it from the content.
    pub layout: LayoutSpec,
    /// Hears the rows read so far while a long file is read (default: nobody).
    pub on_rows: RowsHook,
}

/// Rows (lines or Parquet rows) between two calls of a [`RowsHook`].
pub const ROWS_PER_REPORT: u64 = 1 << 20;

/// A progress callback for long reads: called with the rows read so far of the current
/// file, about every [`ROWS_PER_REPORT`] rows.
#[derive(Clone, Default)]
pub struct RowsHook(Option<std::sync::Arc<dyn Fn(u64) + Send + Sync>>);

impl RowsHook {
    /// A hook calling `f`.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        RowsHook(Some(std::sync::Arc::new(f)))
    }

    /// Reports `rows` when a multiple of [`ROWS_PER_REPORT`] lies in `(before, rows]`.
    #[inline]
    pub(crate) fn crossed(&self, before: u64, rows: u64) {
        if let Some(f) = &self.0 {
            if rows / ROWS_PER_REPORT > before / ROWS_PER_REPORT {
                f(rows);
            }
        }
    }
}

impl std::fmt::Debug for RowsHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RowsHook(set)"
        } else {
            "RowsHook(none)"
        })
    }
}

/// One malformed line: where it is and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line number in the (decompressed) file, header included; for Parquet, the
    /// 1-based row number.
    pub line: u64,
    /// What is wrong, e.g. "expected 3 tab-separated columns (timestamp, anon_id, query),
    /// found 2".
    pub reason: String,
}

/// What reading a log found. `lines == records + collapsed + malformed + blank`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReport {
    /// The file read.
    pub path: PathBuf,
    /// Its format (detected or asked for).
    pub format: LogFormat,
    /// How it was read: the format and the column mapping.
    pub layout: Layout,
    /// Data lines read (header excluded), or Parquet rows.
    pub lines: u64,
    /// Lines that did not parse and were skipped.
    pub malformed: u64,
    /// The first [`collapse::MAX_EXAMPLES`] malformed lines.
    pub malformed_examples: Vec<Malformed>,
    /// Consecutive repeats removed (0 with [`ReadOptions::keep_repeats`]).
    pub collapsed: u64,
    /// Blank (empty or whitespace-only) lines skipped in the one-column formats.
    pub blank: u64,
    /// Records kept.
    pub records: u64,
}

impl ReadReport {
    /// `line 7: reason; line 9: reason` for the kept examples (`row` for Parquet), with
    /// `; ...` when there were more.
    pub fn malformed_list(&self) -> String {
        let unit = if self.format == LogFormat::Parquet {
            "row"
        } else {
            "line"
        };
        let mut out = self
            .malformed_examples
            .iter()
            .map(|m| format!("{unit} {}: {}", m.line, m.reason))
            .collect::<Vec<_>>()
            .join("; ");
        if self.malformed > self.malformed_examples.len() as u64 {
            out.push_str("; ...");
        }
        out
    }

    /// One human line, e.g. `log.tsv: aol, 10 lines, 6 records, 1 repeat collapsed,
    /// 3 malformed lines (line 7: expected ..., found 2; line 9: ...)`.
    pub fn summary(&self) -> String {
        let unit = if self.format == LogFormat::Parquet {
            "row"
        } else {
            "line"
        };
        let plural = |n: u64, word: &str| {
            if n == 1 {
                format!("{n} {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        let mut s = format!(
            "{}: {}, {}, {}, {} collapsed",
            self.path.display(),
            self.format,
            plural(self.lines, unit),
            plural(self.records, "record"),
            plural(self.collapsed, "repeat"),
        );
        if self.blank > 0 {
            s.push_str(&format!(", {} skipped", plural(self.blank, "blank line")));
        }
        if self.malformed > 0 {
            s.push_str(&format!(
                ", {} ({})",
                plural(self.malformed, &format!("malformed {unit}")),
                self.malformed_list()
            ));
        }
        s
    }
}

/// A log in memory: its records in file order, and how reading went.
#[derive(Clone, Debug)]
pub struct QueryLog {
    /// The kept records.
    pub records: Vec<LogRecord>,
    /// What reading found.
    pub report: ReadReport,
}

impl QueryLog {
    /// The query strings, in order.
    pub fn queries(&self) -> impl Iterator<Item = &str> {
        self.records.iter().map(|r| r.query.as_str())
    }

    /// Whether every record has a timestamp (and there is at least one record), so that
    /// time-based splits are possible.
    pub fn has_timestamps(&self) -> bool {
        !self.records.is_empty() && self.records.iter().all(|r| r.ts.is_some())
    }
}

/// Reads a query log of any supported format, plain or gzip-compressed (see the module docs).
pub fn read_log(path: &Path, opts: &ReadOptions) -> Result<QueryLog, LogError> {
    read_log_with(path, opts, &mut |_, _| {})
}

/// [`read_log`], calling `on_start` with the layout and the first two records (fewer if the
/// log has fewer) as soon as they are read, before the rest of the file.
pub fn read_log_with(
    path: &Path,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
) -> Result<QueryLog, LogError> {
    let (report, collector) =
        read_collected(path, opts, on_start, Collector::new(opts.keep_repeats))?;
    Ok(QueryLog {
        records: collector.records,
        report,
    })
}

/// [`read_log_with`] into a [`CompactLog`]: each distinct query text is stored once and
/// nothing is allocated per record, so memory follows the distinct queries, not the rows.
pub fn read_log_compact(
    path: &Path,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
) -> Result<CompactLog, LogError> {
    let (report, collector) =
        read_collected(path, opts, on_start, Collector::compact(opts.keep_repeats))?;
    let compact = collector.compact.unwrap_or_default();
    Ok(CompactLog {
        queries: compact.queries.finish(),
        times: compact.times,
        distinct_users: compact.users.len(),
        report,
    })
}

/// Reads `path` into `collector` and returns it with the report; an empty log is an error.
fn read_collected(
    path: &Path,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
    collector: Collector,
) -> Result<(ReadReport, Collector), LogError> {
    let (report, collector) = read_into(path, opts, on_start, collector)?;
    if collector.kept == 0 {
        return Err(if report.malformed > 0 {
            LogError::AllMalformed {
                path: path.to_owned(),
                count: report.malformed,
                examples: report.malformed_list(),
            }
        } else {
            LogError::NoData {
                path: path.to_owned(),
                detail: no_data_detail(&report),
            }
        });
    }
    Ok((report, collector))
}

/// Reads `path` into `collector` (which may already hold records) and returns it with
/// the report of this file; a file without records is not an error here.
pub(crate) fn read_into(
    path: &Path,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
    collector: Collector,
) -> Result<(ReadReport, Collector), LogError> {
    opts.layout.validate().map_err(|e| LogError::Layout {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    let io_err = |source: std::io::Error| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            LogError::NotFound {
                path: path.to_owned(),
            }
        } else {
            io_err(source)
        }
    })?;
    let mut magic = Vec::with_capacity(4);
    (&mut file)
        .take(4)
        .read_to_end(&mut magic)
        .map_err(io_err)?;

    let is_parquet = magic.starts_with(&format::PARQUET_MAGIC);
    if let Some(f) = opts
        .layout
        .format
        .filter(|f| is_parquet && *f != LogFormat::Parquet)
    {
        return Err(LogError::Layout {
            path: path.to_owned(),
            detail: format!(
                "--format {f}, but the file is Parquet (it starts with PAR1); use --format \
                 parquet or leave --format out"
            ),
        });
    }
    if is_parquet {
        let parquet_spec = LayoutSpec {
            format: Some(LogFormat::Parquet),
            ..opts.layout.clone()
        };
        parquet_spec.validate().map_err(|e| LogError::Layout {
            path: path.to_owned(),
            detail: format!("the file is Parquet: {e}"),
        })?;
    }
    let (layout, mut collector) = if is_parquet {
        parquet::read_parquet(path, file, opts, on_start, collector)?
    } else {
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        if magic.starts_with(&format::GZIP_MAGIC) {
            let compressed = BufReader::with_capacity(GZIP_BUFFER, file);
            let decoder = flate2::bufread::MultiGzDecoder::new(compressed);
            let reader = BufReader::with_capacity(READ_BUFFER, decoder);
            text::read_text(path, reader, true, opts, on_start, collector)?
        } else {
            let reader = BufReader::with_capacity(READ_BUFFER, file);
            text::read_text(path, reader, false, opts, on_start, collector)?
        }
    };

    let report = ReadReport {
        path: path.to_owned(),
        format: layout.format,
        layout,
        lines: collector.lines,
        malformed: collector.malformed,
        malformed_examples: std::mem::take(&mut collector.examples),
        collapsed: collector.collapsed,
        blank: collector.blank,
        records: collector.kept,
    };
    Ok((report, collector))
}

/// Why a log without malformed lines has no records.
fn no_data_detail(report: &ReadReport) -> String {
    match (report.format, report.blank) {
        (LogFormat::Parquet, _) => "the Parquet file has 0 rows".to_owned(),
        (_, 0) if report.layout.header => {
            format!("only a header line ({} format)", report.format)
        }
        (_, 0) => format!("no data lines ({} format)", report.format),
        (_, n) => format!("only {n} blank lines"),
    }
}
