//! Readers of text query logs — one query per line, `Query` column, delimited columns
//! (AOL, Excite, TSV, CSV) and TREC topics — plain or gzip-compressed.
//!
//! One pass over the (decompressed) bytes, line by line into a single reused buffer; `\n`
//! and `\r\n` endings are accepted. A line is never buffered beyond [`MAX_LINE_BYTES`]: a
//! longer one is skipped without being held in memory and counted as malformed, so a
//! multi-gigabyte file without a newline costs one megabyte, not its size.
//!
//! The first [`SAMPLE_LINES`] lines are kept to settle the layout ([`detect`]), then
//! parsed like the rest. Each data line is validated as UTF-8, split into its fields by a
//! reused [`Splitter`] ([`fields`](crate::fields)) and handed to the `Collector`, which
//! drops repeats before allocating anything. A line that does not parse (wrong number of columns, bad time,
//! invalid UTF-8, a broken CSV quote, too long) is counted as malformed with its 1-based
//! line number and skipped. Blank lines are counted as blank; in the column formats a line
//! with its delimiters but an empty query is a valid record (the AOL log has them).
//!
//! Once two records are kept (or the file ends), `on_start` is called with the layout and
//! those records, so a command can show them before the bulk of the work.
//!
//! I/O errors while reading — including a corrupt or truncated gzip stream — abort the read
//! with an error naming the file: a partial log is never returned as if it were whole.

use std::io::{self, BufRead, Read};
use std::path::Path;

use crate::collapse::{Collector, PREVIEW_RECORDS};
use crate::detect::{self, SAMPLE_BYTES, SAMPLE_LINES};
use crate::fields::Splitter;
use crate::format::{Delimiter, PARQUET_MAGIC, UTF8_BOM};
use crate::io::trim_newline;
use crate::layout::{Columns, Layout, Shape};
use crate::time::TimeFormat;
use crate::{LogError, LogRecord, ReadOptions};

/// The longest line read, in bytes (line ending excluded); longer lines are skipped as
/// malformed.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most characters of an offending field quoted in a malformed-line reason.
const QUOTE_CHARS: usize = 40;

/// Called once the layout is settled and the first two records are read (or the file
/// ended with fewer).
pub type OnStart<'a> = &'a mut dyn FnMut(&Layout, &[LogRecord]);

/// What [`next_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Eof,
    Line,
    TooLong,
}

/// Reads one line into `buf` (cleared first), at most [`MAX_LINE_BYTES`] plus its ending;
/// the rest of a longer line is consumed and dropped.
fn next_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Got> {
    buf.clear();
    let limit = MAX_LINE_BYTES as u64 + 2; // room for "\r\n"
    let n = r.by_ref().take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Got::Eof);
    }
    if buf.last() == Some(&b'\n') || (n as u64) < limit {
        return Ok(if trim_newline(buf).len() > MAX_LINE_BYTES {
            Got::TooLong
        } else {
            Got::Line
        });
    }
    buf.clear();
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            break;
        }
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                break;
            }
            None => {
                let n = avail.len();
                r.consume(n);
            }
        }
    }
    Ok(Got::TooLong)
}

/// Reads a text log from `reader` (already decompressed if `gzip`), returning its layout
/// and the collected records and counters.
pub(crate) fn read_text<R: BufRead>(
    path: &Path,
    mut reader: R,
    gzip: bool,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
    collector: Collector,
) -> Result<(Layout, Collector), LogError> {
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
    if gzip {
        let head = reader.fill_buf().map_err(|e| read_error(e, 0))?;
        if head.starts_with(&PARQUET_MAGIC) {
            return Err(LogError::GzippedParquet {
                path: path.to_owned(),
            });
        }
    }

    // The sample: the first lines, kept to settle the layout (None: too long).
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut sample: Vec<Option<Vec<u8>>> = Vec::new();
    let mut sampled_bytes = 0;
    while sample.len() < SAMPLE_LINES && sampled_bytes < SAMPLE_BYTES {
        match next_line(&mut reader, &mut buf).map_err(|e| read_error(e, sample.len() as u64))? {
            Got::Eof => break,
            Got::Line => {
                sampled_bytes += buf.len();
                sample.push(Some(buf.clone()));
            }
            Got::TooLong => {
                sampled_bytes += MAX_LINE_BYTES;
                sample.push(None);
            }
        }
    }
    if sample.is_empty() {
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
    let content = |i: usize, bytes: &[u8]| -> Vec<u8> {
        let line = trim_newline(bytes);
        if i == 0 {
            line.strip_prefix(&UTF8_BOM[..]).unwrap_or(line).to_vec()
        } else {
            line.to_vec()
        }
    };
    let sample: Vec<Option<Vec<u8>>> = sample
        .iter()
        .enumerate()
        .map(|(i, l)| l.as_ref().map(|b| content(i, b)))
        .collect();
    let texts: Vec<(u64, &str)> = sample
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let s = std::str::from_utf8(l.as_deref()?).ok()?;
            Some((i as u64 + 1, s))
        })
        .collect();
    let layout = detect::resolve(path, &opts.layout, &texts)?;
    drop(texts);

    let delimiter = match &layout.shape {
        Shape::Delimited(cols) => cols.delimiter,
        _ => Delimiter::Tab,
    };
    let mut parser = LineParser {
        layout: &layout,
        split: Splitter::new(delimiter),
    };
    let mut c = collector;
    let mut announced = false;
    let mut announce = |c: &Collector| {
        if !announced && c.records.len() >= PREVIEW_RECORDS {
            on_start(&layout, &c.records[..PREVIEW_RECORDS]);
            announced = true;
        }
    };
    let mut line_no: u64 = 0;
    for line in &sample {
        line_no += 1;
        if line_no == 1 && layout.header {
            continue;
        }
        match line {
            Some(bytes) => parser.parse(bytes, line_no, &mut c),
            None => parser.too_long(line_no, &mut c),
        }
        announce(&c);
    }
    drop(sample);
    loop {
        let got = next_line(&mut reader, &mut buf).map_err(|e| read_error(e, line_no))?;
        if got == Got::Eof {
            break;
        }
        line_no += 1;
        opts.on_rows.crossed(line_no - 1, line_no);
        if got == Got::TooLong {
            parser.too_long(line_no, &mut c);
        } else {
            parser.parse(trim_newline(&buf), line_no, &mut c);
        }
        announce(&c);
    }
    if !announced {
        on_start(&layout, &c.records);
    }
    Ok((layout, c))
}

/// Parses data lines of one layout.
struct LineParser<'l> {
    layout: &'l Layout,
    split: Splitter,
}

impl LineParser<'_> {
    fn too_long(&mut self, line_no: u64, c: &mut Collector) {
        c.lines += 1;
        c.malformed(
            line_no,
            format!("line longer than {MAX_LINE_BYTES} bytes (skipped unread)"),
        );
    }

    /// Parses one data line (line ending already stripped) into the collector.
    #[inline]
    fn parse(&mut self, bytes: &[u8], line_no: u64, c: &mut Collector) {
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
        match &self.layout.shape {
            Shape::Lines => {
                if line.trim().is_empty() {
                    c.blank += 1;
                } else {
                    c.push(None, None, line);
                }
            }
            Shape::TrecTopics { priority } => trec_topic(line, *priority, line_no, c),
            Shape::Delimited(cols) => self.delimited(cols, line, line_no, c),
            // Parquet files never reach the text reader.
            Shape::Parquet(_) => c.malformed(line_no, "unexpected Parquet data in a text log"),
        }
    }

    #[inline]
    fn delimited(&mut self, cols: &Columns, line: &str, line_no: u64, c: &mut Collector) {
        let n = match self.split.split(line.as_bytes()) {
            Ok(n) => n,
            Err(reason) => {
                c.malformed(line_no, reason);
                return;
            }
        };
        if n == 1 && line.trim().is_empty() {
            c.blank += 1;
            return;
        }
        if n < cols.min_fields() || n > cols.width() {
            c.malformed(line_no, cols.wrong_count(n));
            return;
        }
        let ts = match cols.time {
            Some(t) => {
                let value = self.split.field(t).unwrap_or_default();
                match cols.time_format.parse_ms(value) {
                    Some(ms) => Some(ms),
                    None => {
                        c.malformed(line_no, bad_time(cols.name(t), value, &cols.time_format));
                        return;
                    }
                }
            }
            None => None,
        };
        let user = cols
            .user
            .and_then(|u| self.split.field(u))
            .filter(|u| !u.is_empty());
        let query = self.split.field(cols.query).unwrap_or_default();
        c.push(ts, user, query);
    }
}

/// `qid:query` or `qid:priority:query`.
fn trec_topic(line: &str, priority: bool, line_no: u64, c: &mut Collector) {
    if line.trim().is_empty() {
        c.blank += 1;
        return;
    }
    let Some((qid, rest)) = line.split_once(':') else {
        c.malformed(line_no, "expected qid:query, found no ':'");
        return;
    };
    if qid.trim().is_empty() {
        c.malformed(line_no, "expected qid:query, found an empty qid");
        return;
    }
    let query = if priority {
        match rest.split_once(':') {
            Some((p, q))
                if !p.trim().is_empty() && p.trim().bytes().all(|b| b.is_ascii_digit()) =>
            {
                q
            }
            _ => {
                c.malformed(line_no, "expected qid:priority:query");
                return;
            }
        }
    } else {
        rest
    };
    let query = query.trim();
    if query.is_empty() {
        c.blank += 1;
    } else {
        c.push(None, None, query);
    }
}

/// The reason for an unparsable time field, quoting (at most [`QUOTE_CHARS`] of) it.
fn bad_time(column: &str, value: &str, format: &TimeFormat) -> String {
    format!(
        "bad {column} {:?}: expected {}",
        quote(value),
        format.expected()
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
    fn quoting_is_bounded() {
        let long = "é".repeat(100);
        assert_eq!(quote(&long).chars().count(), QUOTE_CHARS + 1);
        assert_eq!(quote("short"), "short");
    }

    #[test]
    fn lines_are_bounded() {
        let mut input = b"short\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        input.extend(b"\nexact");
        input.extend(std::iter::repeat_n(b'y', MAX_LINE_BYTES - 5));
        input.extend(b"\r\nlast");
        let mut r = io::BufReader::with_capacity(4096, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(next_line(&mut r, &mut buf).unwrap(), Got::Line);
        assert_eq!(buf, b"short\r\n");
        assert_eq!(next_line(&mut r, &mut buf).unwrap(), Got::TooLong);
        assert!(buf.capacity() <= 2 * MAX_LINE_BYTES + 64);
        assert_eq!(next_line(&mut r, &mut buf).unwrap(), Got::Line);
        assert_eq!(trim_newline(&buf).len(), MAX_LINE_BYTES);
        assert_eq!(next_line(&mut r, &mut buf).unwrap(), Got::Line);
        assert_eq!(buf, b"last");
        assert_eq!(next_line(&mut r, &mut buf).unwrap(), Got::Eof);
    }

    #[test]
    fn trec_topics() {
        let mut c = Collector::new(true);
        for (i, l) in [
            "301:international organized crime",
            "302: spaced ",
            "no colon",
            ":x",
            "303:",
        ]
        .iter()
        .enumerate()
        {
            c.lines += 1;
            trec_topic(l, false, i as u64 + 1, &mut c);
        }
        let q: Vec<&str> = c.records.iter().map(|r| r.query.as_str()).collect();
        assert_eq!(q, ["international organized crime", "spaced"]);
        assert_eq!((c.malformed, c.blank), (2, 1));
        let mut c = Collector::new(true);
        trec_topic("20001:1:obama family tree", true, 1, &mut c);
        trec_topic("20002:x:y", true, 2, &mut c);
        assert_eq!(c.records[0].query, "obama family tree");
        assert_eq!(c.malformed, 1);
    }
}
