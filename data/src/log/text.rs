//! Readers of the text query logs: AOL, `Query` column, `timestamp anon_id query` TSV and
//! plain one-query-per-line files, plain or gzip-compressed.
//!
//! One pass over the (decompressed) bytes with `read_until(b'\n')` into a single reused
//! buffer; `\n` and `\r\n` endings are accepted. The first line picks the format
//! ([`detect_text`]). Each data line is validated as UTF-8, split into its columns and handed
//! to the `Collector`, which drops repeats before allocating anything. A line that does not
//! parse (wrong number of columns, bad timestamp, invalid UTF-8) is counted as malformed with
//! its 1-based line number and skipped. In the single-column formats (`Query` column, lines)
//! a blank or whitespace-only line is skipped and counted as blank; in the tabular formats an
//! empty query column is a valid record (the AOL log has them).
//!
//! I/O errors while reading — including a corrupt or truncated gzip stream — abort the read
//! with an error naming the file: a partial log is never returned as if it were whole.

use std::io::{self, BufRead};
use std::path::Path;

use super::collapse::Collector;
use super::format::{detect_text, LogFormat, PARQUET_MAGIC, UTF8_BOM};
use super::LogError;
use crate::io::trim_newline;
use crate::time::parse_datetime_ms;

/// The most characters of an offending field quoted in a malformed-line reason.
const QUOTE_CHARS: usize = 40;

/// Reads a text log from `reader` (already decompressed if `gzip`), returning its format and
/// the collected records and counters.
pub(crate) fn read_text<R: BufRead>(
    path: &Path,
    mut reader: R,
    gzip: bool,
    keep_repeats: bool,
) -> Result<(LogFormat, Collector), LogError> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut line_no: u64 = 0;
    let read_error = |source: io::Error, line: u64| {
        if gzip {
            LogError::Gzip {
                path: path.to_owned(),
                line,
                source,
            }
        } else {
            LogError::Io {
                path: path.to_owned(),
                source,
            }
        }
    };

    let n = reader
        .read_until(b'\n', &mut buf)
        .map_err(|e| read_error(e, line_no))?;
    if n == 0 {
        let detail = if gzip {
            "the gzip stream decompresses to nothing"
        } else {
            "the file is empty"
        };
        return Err(LogError::NoData {
            path: path.to_owned(),
            detail: detail.to_owned(),
        });
    }
    if gzip && buf.starts_with(&PARQUET_MAGIC) {
        return Err(LogError::GzippedParquet {
            path: path.to_owned(),
        });
    }
    line_no = 1;
    let format = detect_text(&buf);
    let mut c = Collector::new(keep_repeats);
    if !format.has_header() {
        let first = trim_newline(&buf);
        let first = first.strip_prefix(&UTF8_BOM[..]).unwrap_or(first);
        parse_line(format, first, line_no, &mut c);
    }
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| read_error(e, line_no))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        parse_line(format, trim_newline(&buf), line_no, &mut c);
    }
    Ok((format, c))
}

/// Parses one data line (line ending already stripped) into the collector.
#[inline]
fn parse_line(format: LogFormat, bytes: &[u8], line_no: u64, c: &mut Collector) {
    c.lines += 1;
    let line = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            c.malformed(
                line_no,
                format!("invalid UTF-8 at byte offset {}", e.valid_up_to()),
            );
            return;
        }
    };
    match format {
        LogFormat::Lines | LogFormat::QueryColumn => {
            if line.trim().is_empty() {
                c.blank += 1;
            } else {
                c.push(None, None, line);
            }
        }
        LogFormat::Aol => {
            let (cols, n) = split_tabs::<5>(line);
            if !(3..=5).contains(&n) {
                c.malformed(
                    line_no,
                    format!(
                        "expected 3 to 5 tab-separated columns \
                         (AnonID, Query, QueryTime[, ItemRank, ClickURL]), found {n}"
                    ),
                );
                return;
            }
            let Some(ts) = parse_datetime_ms(cols[2]) else {
                c.malformed(line_no, bad_time("QueryTime", cols[2]));
                return;
            };
            c.push(Some(ts), non_empty(cols[0]), cols[1]);
        }
        LogFormat::Tsv => {
            let (cols, n) = split_tabs::<3>(line);
            if n != 3 {
                c.malformed(
                    line_no,
                    format!(
                        "expected 3 tab-separated columns (timestamp, anon_id, query), found {n}"
                    ),
                );
                return;
            }
            let Some(ts) = parse_datetime_ms(cols[0]) else {
                c.malformed(line_no, bad_time("timestamp", cols[0]));
                return;
            };
            c.push(Some(ts), non_empty(cols[1]), cols[2]);
        }
        // Parquet files never reach the text reader.
        LogFormat::Parquet => c.malformed(line_no, "unexpected Parquet data in a text log"),
    }
}

/// The first `N` tab-separated fields of `line` and the total number of fields.
#[inline]
fn split_tabs<const N: usize>(line: &str) -> ([&str; N], usize) {
    let mut cols = [""; N];
    let mut n = 0;
    for (i, field) in line.split('\t').enumerate() {
        if let Some(slot) = cols.get_mut(i) {
            *slot = field;
        }
        n = i + 1;
    }
    (cols, n)
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// The reason for an unparsable time field, quoting (at most [`QUOTE_CHARS`] of) it.
fn bad_time(column: &str, value: &str) -> String {
    format!(
        "bad {column} {:?}: expected YYYY-MM-DD HH:MM:SS",
        quote(value)
    )
}

fn quote(s: &str) -> String {
    if s.chars().count() <= QUOTE_CHARS {
        s.to_owned()
    } else {
        let mut q: String = s.chars().take(QUOTE_CHARS).collect();
        q.push('…');
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split() {
        assert_eq!(split_tabs::<3>("a\tb\tc"), (["a", "b", "c"], 3));
        assert_eq!(split_tabs::<3>("a\tb"), (["a", "b", ""], 2));
        assert_eq!(split_tabs::<3>("a\tb\tc\td"), (["a", "b", "c"], 4));
        assert_eq!(split_tabs::<3>(""), (["", "", ""], 1));
    }

    #[test]
    fn quoting_is_bounded() {
        let long = "é".repeat(100);
        assert_eq!(quote(&long).chars().count(), QUOTE_CHARS + 1);
        assert_eq!(quote("short"), "short");
    }
}
