//! Logs laid out as a data lake writes them: a directory of Hive-style partitions,
//! `logs/date=2006-03-01/part-0.parquet`, `logs/date=2006-03-02/part-0.parquet`, ...
//!
//! [`list_partitions`] finds the data files under a directory (hidden and `_`-prefixed
//! files such as `_SUCCESS` are skipped) with the `key=value` pairs of their folders, in
//! path order, which for zero-padded dates is time order. A [`TimeRange`] selects the
//! partitions whose date (or time) value overlaps it without opening the others, and
//! [`read_partitions_compact`] reads the selected files, each with the ordinary readers
//! (any format, plain or gzip), into one [`CompactLog`] in path order.

use std::path::{Path, PathBuf};

use crate::collapse::{Collector, MAX_EXAMPLES};
use crate::compact::{CompactBuilder, CompactLog};
use crate::text::OnStart;
use crate::time::parse_datetime_ms;
use crate::{read_into, Layout, LogError, LogRecord, Malformed, ReadOptions, ReadReport};

/// Milliseconds in a day (a `date=` partition spans one).
pub const DAY_MS: i64 = 86_400_000;

/// A half-open span of time `[from_ms, to_ms)`, either end open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeRange {
    /// First instant inside (unix ms), if bounded.
    pub from_ms: Option<i64>,
    /// First instant after (unix ms), if bounded.
    pub to_ms: Option<i64>,
}

impl TimeRange {
    /// `--from` and `--to` as a user writes them: ISO dates or times (UTC). `from` is
    /// inclusive; `to` is inclusive of its whole day when it is a bare date
    /// (`2006-03-07`), exclusive when it is a time (`2006-03-07T12:00:00`).
    pub fn parse(from: Option<&str>, to: Option<&str>) -> Result<TimeRange, String> {
        let at = |flag: &str, s: &str| {
            parse_datetime_ms(s).ok_or_else(|| {
                format!("{flag} {s:?} is not a date or time like 2006-03-01 or 2006-03-01T06:00:00")
            })
        };
        let from_ms = from.map(|s| at("--from", s)).transpose()?;
        let to_ms = to
            .map(|s| at("--to", s).map(|t| if is_bare_date(s) { t + DAY_MS } else { t }))
            .transpose()?;
        if let (Some(f), Some(t)) = (from_ms, to_ms) {
            if f >= t {
                return Err(format!(
                    "--from {} is not before --to {}",
                    from.unwrap_or_default(),
                    to.unwrap_or_default()
                ));
            }
        }
        Ok(TimeRange { from_ms, to_ms })
    }

    /// True when neither end is bounded.
    pub fn is_all(&self) -> bool {
        self.from_ms.is_none() && self.to_ms.is_none()
    }

    /// Whether instant `t` is inside.
    pub fn contains(&self, t: i64) -> bool {
        self.from_ms.is_none_or(|f| t >= f) && self.to_ms.is_none_or(|e| t < e)
    }

    /// Whether `[start, end)` overlaps the range (`start == end`: the instant is inside).
    pub fn overlaps(&self, start: i64, end: i64) -> bool {
        if start == end {
            return self.contains(start);
        }
        self.from_ms.is_none_or(|f| end > f) && self.to_ms.is_none_or(|e| start < e)
    }
}

fn is_bare_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10 && b[4] == b'-' && b[7] == b'-'
}

/// A data file of a partitioned log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFile {
    /// The file.
    pub path: PathBuf,
    /// The `key=value` pairs of its folders, outermost first.
    pub values: Vec<(String, String)>,
}

impl PartitionFile {
    /// The span of time its partition values name: the first value that is an ISO date
    /// (a whole day) or time (an instant). None when no value is a time.
    pub fn span(&self) -> Option<(i64, i64)> {
        self.values.iter().find_map(|(_, v)| {
            let t = parse_datetime_ms(v)?;
            Some(if is_bare_date(v) {
                (t, t + DAY_MS)
            } else {
                (t, t)
            })
        })
    }

    /// `date=2006-03-01` (the folders' pairs), or the file name when it has none.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        self.values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The data files under `dir`, in path order, with their partition values. Hidden files
/// and folders (`.name`) and `_`-prefixed ones (`_SUCCESS`, `_temporary`) are skipped, and
/// so are links to directories.
pub fn list_partitions(dir: &Path) -> Result<Vec<PartitionFile>, LogError> {
    let mut out = Vec::new();
    walk(dir, &mut Vec::new(), &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    if out.is_empty() {
        return Err(LogError::NoData {
            path: dir.to_owned(),
            detail: "the directory has no data files".to_owned(),
        });
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    values: &mut Vec<(String, String)>,
    out: &mut Vec<PartitionFile>,
) -> Result<(), LogError> {
    let io_err = |source| LogError::Io {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(io_err)?;
        // A link to a file is read like the file; a link to a directory is not followed
        // (it could lead back up the tree).
        let meta = std::fs::metadata(&path).map_err(|source| LogError::Io {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() && kind.is_symlink() {
            continue;
        }
        if meta.is_dir() {
            let pair = name
                .split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()));
            let pushed = pair.is_some();
            if let Some(p) = pair {
                values.push(p);
            }
            walk(&path, values, out)?;
            if pushed {
                values.pop();
            }
        } else if meta.is_file() {
            out.push(PartitionFile {
                path,
                values: values.clone(),
            });
        }
    }
    Ok(())
}

/// What reading a partitioned log found.
#[derive(Clone, Debug)]
pub struct PartitionsRead {
    /// The log, all selected files in path order.
    pub log: CompactLog,
    /// Each file read, with its report.
    pub files: Vec<(PartitionFile, ReadReport)>,
    /// Files whose partition lies outside the range, not opened.
    pub skipped: usize,
}

/// Reads the files of `dir` whose partition overlaps `range` into one log. Files without a
/// time-valued partition are always read; filtering their records by time is the
/// caller's (the records keep their times). `on_start` hears the first file's layout and
/// first records, `on_file` each file after it is read.
pub fn read_partitions_compact(
    dir: &Path,
    opts: &ReadOptions,
    range: &TimeRange,
    on_start: OnStart<'_>,
    on_file: &mut dyn FnMut(&PartitionFile, &ReadReport),
) -> Result<PartitionsRead, LogError> {
    let all = list_partitions(dir)?;
    let total = all.len();
    let selected: Vec<PartitionFile> = all
        .into_iter()
        .filter(|f| f.span().is_none_or(|(s, e)| range.overlaps(s, e)))
        .collect();
    if selected.is_empty() {
        return Err(LogError::NoData {
            path: dir.to_owned(),
            detail: format!("none of its {total} partitions is inside --from/--to"),
        });
    }
    let skipped = total - selected.len();
    let mut builder = CompactBuilder::default();
    let mut files = Vec::new();
    let mut started = false;
    for f in selected {
        let mut first = |layout: &Layout, records: &[LogRecord]| {
            if !started {
                on_start(layout, records);
            }
        };
        let collector = Collector::compact_into(opts.keep_repeats, builder);
        let (report, mut collector) = read_into(&f.path, opts, &mut first, collector)?;
        started = true;
        builder = collector.compact.take().unwrap_or_default();
        on_file(&f, &report);
        files.push((f, report));
    }
    if builder.queries.is_empty() {
        return Err(LogError::NoData {
            path: dir.to_owned(),
            detail: format!("the {} selected partitions have no records", files.len()),
        });
    }
    Ok(PartitionsRead {
        log: CompactLog {
            distinct_users: builder.users.len(),
            queries: builder.queries.finish(),
            times: builder.times,
            report: combined_report(dir, &files),
        },
        files,
        skipped,
    })
}

/// One report for all files: counts summed, the first malformed examples of any file
/// (their reasons name the partition).
fn combined_report(dir: &Path, files: &[(PartitionFile, ReadReport)]) -> ReadReport {
    let first = &files[0].1;
    let mut r = ReadReport {
        path: dir.to_owned(),
        format: first.format,
        layout: first.layout.clone(),
        lines: 0,
        malformed: 0,
        malformed_examples: Vec::new(),
        collapsed: 0,
        blank: 0,
        records: 0,
    };
    for (f, one) in files {
        r.lines += one.lines;
        r.malformed += one.malformed;
        r.collapsed += one.collapsed;
        r.blank += one.blank;
        r.records += one.records;
        for m in &one.malformed_examples {
            if r.malformed_examples.len() < MAX_EXAMPLES {
                r.malformed_examples.push(Malformed {
                    line: m.line,
                    reason: format!("{}: {}", f.label(), m.reason),
                });
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_partition_files_in_path_order_and_skips_markers_and_loops() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for day in ["date=2006-03-02", "date=2006-03-01"] {
            std::fs::create_dir_all(d.join(day).join("_temporary")).unwrap();
            std::fs::write(d.join(day).join("part-0.tsv"), "q\n").unwrap();
            std::fs::write(d.join(day).join("_temporary").join("x"), "q\n").unwrap();
        }
        std::fs::write(d.join("_SUCCESS"), "").unwrap();
        std::fs::write(d.join(".hidden"), "").unwrap();
        std::os::unix::fs::symlink(d, d.join("date=2006-03-01").join("loop")).unwrap();
        let files = list_partitions(d).unwrap();
        let labels: Vec<String> = files.iter().map(PartitionFile::label).collect();
        assert_eq!(labels, ["date=2006-03-01", "date=2006-03-02"]);
        let day = files[0].span().unwrap();
        assert_eq!(day.1 - day.0, DAY_MS);
        let range = TimeRange::parse(Some("2006-03-02"), None).unwrap();
        assert!(!range.overlaps(day.0, day.1));
        assert!(range.overlaps(files[1].span().unwrap().0, files[1].span().unwrap().1));
    }

    #[test]
    fn ranges_parse_dates_inclusively_and_times_exactly() {
        let r = TimeRange::parse(Some("2006-03-01"), Some("2006-03-01")).unwrap();
        assert_eq!(r.to_ms.unwrap() - r.from_ms.unwrap(), DAY_MS);
        let t = TimeRange::parse(None, Some("2006-03-01T12:00:00")).unwrap();
        assert!(t.contains(r.from_ms.unwrap()));
        assert!(!t.contains(r.from_ms.unwrap() + DAY_MS / 2));
        assert!(TimeRange::parse(Some("2006-03-02"), Some("2006-03-01")).is_err());
        assert!(TimeRange::parse(Some("tomorrow"), None)
            .unwrap_err()
            .contains("--from \"tomorrow\""));
        assert!(TimeRange::default().is_all());
    }
}
