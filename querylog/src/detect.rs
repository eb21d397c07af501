//! Settling a text log's [`Layout`] from the flags ([`LayoutSpec`]) and its first lines —
//! and refusing to guess when neither says how to read it.
//!
//! With `--format`, the format is taken as given and only what it leaves open is read from
//! the content: whether the first line is a header, and the format of a time column. Without
//! it, the first line decides when it is a header:
//!
//! | first line | layout |
//! |---|---|
//! | starts with `AnonID` + tab (any case) | [`LogFormat::Aol`] |
//! | exactly `Query` (any case) | [`LogFormat::QueryColumn`] |
//! | tab-separated header names, one of them a query column (`timestamp\tanon_id\tquery`) | [`LogFormat::Tsv`] |
//! | comma-separated header names, one of them a query column | [`LogFormat::Csv`] |
//!
//! and otherwise the lines are one query each ([`LogFormat::Lines`]) — unless they look like
//! something else ([`suspect`]), in which case reading stops with [`LogError::Ambiguous`]:
//! the file, its first line and the flags that read it. The check is deliberately simple:
//! most ([`MOST`]) of the non-blank sampled lines split into the same number (two or more)
//! of tab-separated fields; or of comma-separated fields with a column of numbers, times or
//! hex ids (a comma alone is common in queries: `paris, france`); or start with a `qid:`
//! whose qid holds a digit (TREC topics). It says what the lines look like; it does not try
//! to work out what each column is — that is what `--columns` is for.
//!
//! Column flags without `--format` read delimited columns, tab-separated unless most lines
//! have a comma and not a tab. A header line is recognised by its names ([`header_role`])
//! and skipped, with or without flags. A time column without `--time-format` must read as
//! `iso` (`YYYY-MM-DD HH:MM:SS`, ...), `epoch-s` (9 or 10 digits) or `epoch-ms` (13 digits)
//! in most of its sampled values; any other time (`970916000350`, `01/Mar/2006:...`) is an
//! error asking for `--time-format`, never a guess between look-alikes.

use std::path::Path;

use crate::fields::split_owned;
use crate::format::{header_role, Delimiter, LogFormat, Role};
use crate::layout::{ColumnRef, Columns, Layout, LayoutSpec, Shape};
use crate::time::TimeFormat;
use crate::LogError;

/// Lines sampled for detection.
pub const SAMPLE_LINES: usize = 200;
/// Bytes sampled for detection (the sample stops at the line that crosses it).
pub const SAMPLE_BYTES: usize = 256 * 1024;
/// The share of non-blank sampled lines that must agree for a pattern to count.
pub const MOST: f64 = 0.8;
/// The share of a column's non-empty sampled values that must fit a kind.
const COLUMN: f64 = 0.9;
/// Characters of a line shown in a message.
const SHOW_CHARS: usize = 100;

/// The AOL collection's column names.
const AOL_NAMES: [&str; 5] = ["AnonID", "Query", "QueryTime", "ItemRank", "ClickURL"];

/// The layout of a text log whose first lines (numbered, valid UTF-8, BOM and line ending
/// stripped, blank ones included) are `sample`.
pub(crate) fn resolve(
    path: &Path,
    spec: &LayoutSpec,
    sample: &[(u64, &str)],
) -> Result<Layout, LogError> {
    let r = Resolver {
        path,
        spec,
        sample,
        lines: sample.iter().map(|x| x.1).collect(),
        first: sample.first().filter(|x| x.0 == 1).map(|x| x.1),
    };
    let layout = match spec.format {
        None => r.auto()?,
        Some(LogFormat::Parquet) => {
            return Err(r.err(
                "--format parquet, but the file is not Parquet (it does not start with PAR1)"
                    .to_owned(),
            ))
        }
        Some(f @ (LogFormat::Lines | LogFormat::QueryColumn)) => Layout {
            format: f,
            header: f == LogFormat::QueryColumn,
            detected: false,
            shape: Shape::Lines,
        },
        Some(LogFormat::TrecTopics) => Layout {
            format: LogFormat::TrecTopics,
            header: false,
            detected: false,
            shape: Shape::TrecTopics {
                priority: trec_priority(&r.lines),
            },
        },
        Some(LogFormat::Aol) => r.aol(r.first.is_some_and(is_aol_header), false),
        Some(LogFormat::Excite) => r.excite(),
        Some(f @ (LogFormat::Tsv | LogFormat::Csv)) => {
            let d = f.delimiter().unwrap_or(Delimiter::Tab);
            r.delimited(d, false)?
        }
    };
    Ok(layout)
}

fn is_aol_header(line: &str) -> bool {
    line.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("AnonID\t"))
}

/// Whether `fields` read as header names: every field empty or a name (a letter, at most
/// 64 characters, not a time), and at least one a known column name.
fn header_like(fields: &[String]) -> bool {
    fields.iter().all(|f| {
        let t = f.trim();
        t.is_empty()
            || (t.chars().count() <= 64
                && t.chars().any(char::is_alphabetic)
                && TimeFormat::Iso.parse_ms(t).is_none())
    }) && fields.iter().any(|f| header_role(f).is_some())
}

/// Why content detection will not read the sample as one query per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Suspicion {
    /// Most lines split into the same columns.
    Delimited {
        /// The separator.
        delimiter: Delimiter,
        /// The number of fields most lines have.
        width: usize,
        /// Non-blank lines with that many fields.
        agree: usize,
        /// Non-blank lines sampled.
        total: usize,
    },
    /// Most lines start with `qid:`.
    TrecTopics {
        /// Lines that do.
        agree: usize,
        /// Non-blank lines sampled.
        total: usize,
        /// The first qid.
        qid: String,
    },
}

fn non_blank<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn most(n: usize, of: usize) -> bool {
    of > 0 && n as f64 >= MOST * of as f64
}

/// The non-blank lines split on `d` (lines that cannot be split, a CSV quote left open, are
/// left out), the most common number of fields (ties go to the wider) and how many lines
/// have it.
fn split_sample(lines: &[&str], d: Delimiter) -> (Vec<Vec<String>>, usize, usize) {
    let rows: Vec<Vec<String>> = lines.iter().filter_map(|l| split_owned(l, d)).collect();
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for r in &rows {
        match counts.iter_mut().find(|(w, _)| *w == r.len()) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.len(), 1)),
        }
    }
    let (width, agree) = counts
        .iter()
        .copied()
        .max_by_key(|&(w, n)| (n, w))
        .unwrap_or((0, 0));
    (rows, width, agree)
}

/// A value that is a number, a time or an id rather than words: digits and time
/// punctuation with at least one digit, or 6 to 40 hex digits with at least one digit.
fn structured(value: &str) -> bool {
    let v = value.trim();
    let digit = v.bytes().any(|b| b.is_ascii_digit());
    let numeric = v
        .bytes()
        .all(|b| b.is_ascii_digit() || b"-:./ TZ+".contains(&b));
    let hex = (6..=40).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit());
    digit && (numeric || hex)
}

/// Whether column `i` of the rows of `width` fields holds mostly [`structured`] values.
fn structured_column(rows: &[Vec<String>], width: usize, i: usize) -> bool {
    let values: Vec<&str> = rows
        .iter()
        .filter(|r| r.len() == width)
        .map(|r| r[i].trim())
        .filter(|v| !v.is_empty())
        .collect();
    !values.is_empty()
        && values.iter().filter(|v| structured(v)).count() as f64 >= COLUMN * values.len() as f64
}

/// The qid of a `qid:query` line: before the first `:`, 1 to 32 characters of letters,
/// digits, `_ - .`, at least one digit.
fn qid(line: &str) -> Option<(&str, &str)> {
    let (q, rest) = line.split_once(':')?;
    let ok = (1..=32).contains(&q.len())
        && q.bytes().any(|b| b.is_ascii_digit())
        && q.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    ok.then_some((q, rest))
}

/// Whether most lines are `qid:priority:query` (the Million Query track's topics).
fn trec_priority(lines: &[&str]) -> bool {
    let lines = non_blank(lines);
    let n = lines
        .iter()
        .filter(|l| {
            qid(l)
                .and_then(|(_, rest)| rest.split_once(':'))
                .is_some_and(|(p, _)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    most(n, lines.len())
}

/// Why the sampled lines must not be read as one query per line, if they must not (see the
/// module docs).
pub fn suspect(lines: &[&str]) -> Option<Suspicion> {
    let lines = non_blank(lines);
    let total = lines.len();
    for delimiter in [Delimiter::Tab, Delimiter::Comma] {
        let (rows, width, agree) = split_sample(&lines, delimiter);
        if width < 2 || !most(agree, total) {
            continue;
        }
        if delimiter == Delimiter::Tab || (0..width).any(|i| structured_column(&rows, width, i)) {
            return Some(Suspicion::Delimited {
                delimiter,
                width,
                agree,
                total,
            });
        }
    }
    let qids: Vec<&str> = lines.iter().filter_map(|l| qid(l).map(|q| q.0)).collect();
    if most(qids.len(), total) {
        return Some(Suspicion::TrecTopics {
            agree: qids.len(),
            total,
            qid: qids[0].to_owned(),
        });
    }
    None
}

/// A line as shown in a message: tabs as `\t`, at most [`SHOW_CHARS`] characters.
fn show(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == SHOW_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// `  first line: ...` (the first non-blank sampled line, with its number if not 1).
fn show_first(sample: &[(u64, &str)]) -> String {
    match sample.iter().find(|(_, l)| !l.trim().is_empty()) {
        Some((1, line)) => format!("  first line: {}\n", show(line)),
        Some((no, line)) => format!("  first line (line {no}): {}\n", show(line)),
        None => "  (no non-blank line in the first lines)\n".to_owned(),
    }
}

/// `--format tsv --columns ROLE,ROLE,ROLE  (...)`: the plain way to map `width` columns.
fn columns_flag(d: Delimiter, width: usize) -> String {
    format!(
        "--format {} --columns {}  (one ROLE per column: query, user, time, or - to skip)",
        d.format(),
        vec!["ROLE"; width.max(1)].join(",")
    )
}

/// The flags that read `width` columns of `d`, the plain one first, then the presets of
/// that shape.
fn read_with(d: Delimiter, width: usize) -> Vec<String> {
    let mut out = vec![columns_flag(d, width)];
    if d == Delimiter::Tab && width == 3 {
        out.push(format!(
            "--format {}  (user, time as YYMMDDhhmmss, query: the Excite log)",
            LogFormat::Excite
        ));
    }
    if d == Delimiter::Tab && (3..=5).contains(&width) {
        out.push(format!(
            "--format {}  (AnonID, Query, QueryTime[, ItemRank, ClickURL]: the AOL log)",
            LogFormat::Aol
        ));
    }
    out
}

/// `  read it with: ...` lines, then the `--format lines` way out.
fn show_flags(flags: &[String], lines_too: bool) -> String {
    let mut s = String::new();
    for (i, flag) in flags.iter().enumerate() {
        let lead = if i == 0 {
            "  read it with:"
        } else {
            "            or:"
        };
        s.push_str(&format!("{lead} {flag}\n"));
    }
    if lines_too {
        s.push_str(&format!(
            "  or, if every line really is one whole query: --format {}\n",
            LogFormat::Lines
        ));
    }
    s
}

impl Suspicion {
    /// The refusal: what the lines look like, the first line and the flags to use.
    pub fn message(&self, sample: &[(u64, &str)]) -> String {
        let (what, flags) = match self {
            Suspicion::Delimited {
                delimiter,
                width,
                agree,
                total,
            } => (
                format!(
                    "{agree} of {total} sampled lines split into {width} {} columns",
                    delimiter.adjective()
                ),
                read_with(*delimiter, *width),
            ),
            Suspicion::TrecTopics { agree, total, qid } => (
                format!(
                    "{agree} of {total} sampled lines start with a query id and a colon \
                     (`{qid}:`), like TREC topics"
                ),
                vec![format!("--format {}", LogFormat::TrecTopics)],
            ),
        };
        let mut s = format!(
            "refusing to guess the layout: {what}, not one query per line\n{}{}",
            show_first(sample),
            show_flags(&flags, true)
        );
        s.truncate(s.trim_end().len());
        s
    }
}

/// The time format most of `values` are written in, among the ones detected (`iso`,
/// `epoch-s` with 9 or 10 digits, `epoch-ms` with 13): `Ok(None)` without a value,
/// `Err(example)` when none fits.
fn detect_time_format(values: &[&str]) -> Result<Option<TimeFormat>, String> {
    let vals: Vec<&str> = values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .collect();
    let Some(example) = vals.first() else {
        return Ok(None);
    };
    let digits = |v: &str| v.len() - v.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let fits = |f: &TimeFormat, v: &str| {
        let shape = match f {
            TimeFormat::EpochS => (9..=10).contains(&digits(v)),
            TimeFormat::EpochMs => v.len() == 13 && digits(v) == 13,
            _ => true,
        };
        shape && f.parse_ms(v).is_some()
    };
    [TimeFormat::Iso, TimeFormat::EpochS, TimeFormat::EpochMs]
        .into_iter()
        .find(|f| vals.iter().filter(|v| fits(f, v)).count() as f64 >= COLUMN * vals.len() as f64)
        .map(Some)
        .ok_or_else(|| (*example).to_owned())
}

struct Resolver<'a> {
    path: &'a Path,
    spec: &'a LayoutSpec,
    sample: &'a [(u64, &'a str)],
    lines: Vec<&'a str>,
    first: Option<&'a str>,
}

impl Resolver<'_> {
    fn err(&self, detail: String) -> LogError {
        LogError::Layout {
            path: self.path.to_owned(),
            detail,
        }
    }

    /// Content detection (no `--format`).
    fn auto(&self) -> Result<Layout, LogError> {
        if self.spec.has_mapping() {
            return self.delimited(self.guess_delimiter(), true);
        }
        if let Some(first) = self.first {
            if is_aol_header(first) {
                return Ok(self.aol(true, true));
            }
            if first.trim().eq_ignore_ascii_case("query") {
                self.no_time_format(LogFormat::QueryColumn)?;
                return Ok(Layout {
                    format: LogFormat::QueryColumn,
                    header: true,
                    detected: true,
                    shape: Shape::Lines,
                });
            }
            for d in [Delimiter::Tab, Delimiter::Comma] {
                if let Some(fields) = split_owned(first, d) {
                    if fields.len() >= 2
                        && header_like(&fields)
                        && fields.iter().any(|f| header_role(f) == Some(Role::Query))
                    {
                        return self.with_header(d, &fields, true);
                    }
                }
            }
        }
        if let Some(s) = suspect(&self.lines) {
            return Err(LogError::Ambiguous {
                path: self.path.to_owned(),
                detail: s.message(self.sample),
            });
        }
        self.no_time_format(LogFormat::Lines)?;
        Ok(Layout {
            format: LogFormat::Lines,
            header: false,
            detected: true,
            shape: Shape::Lines,
        })
    }

    fn no_time_format(&self, f: LogFormat) -> Result<(), LogError> {
        match &self.spec.time_format {
            Some(tf) => Err(self.err(format!(
                "--time-format {tf} was given, but the log reads as {f}, which has no time \
                 column; give --format and the columns too"
            ))),
            None => Ok(()),
        }
    }

    /// Tab-separated unless most lines have a comma and most do not have a tab.
    fn guess_delimiter(&self) -> Delimiter {
        let lines = non_blank(&self.lines);
        let with = |c: char| lines.iter().filter(|l| l.contains(c)).count();
        if !most(with('\t'), lines.len()) && most(with(','), lines.len()) {
            Delimiter::Comma
        } else {
            Delimiter::Tab
        }
    }

    fn aol(&self, header: bool, detected: bool) -> Layout {
        Layout {
            format: LogFormat::Aol,
            header,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: Delimiter::Tab,
                names: AOL_NAMES.map(String::from).to_vec(),
                query: 1,
                user: Some(0),
                time: Some(2),
                time_format: self.spec.time_format.clone().unwrap_or(TimeFormat::Iso),
            }),
        }
    }

    fn excite(&self) -> Layout {
        let header = self
            .first
            .and_then(|f| split_owned(f, Delimiter::Tab))
            .is_some_and(|f| header_like(&f));
        Layout {
            format: LogFormat::Excite,
            header,
            detected: false,
            shape: Shape::Delimited(Columns {
                delimiter: Delimiter::Tab,
                names: ["user", "time", "query"].map(String::from).to_vec(),
                query: 2,
                user: Some(0),
                time: Some(1),
                time_format: self
                    .spec
                    .time_format
                    .clone()
                    .unwrap_or_else(TimeFormat::excite),
            }),
        }
    }

    /// `--time-format`, or the format detected in the sampled values of column `t`
    /// (`iso` when the sample has none), or an error asking for the flag.
    fn time_format(
        &self,
        d: Delimiter,
        t: Option<usize>,
        name: &str,
        header: bool,
    ) -> Result<TimeFormat, LogError> {
        if let Some(tf) = &self.spec.time_format {
            return Ok(tf.clone());
        }
        let Some(t) = t else {
            return Ok(TimeFormat::Iso);
        };
        let values: Vec<String> = self
            .sample
            .iter()
            .filter(|(no, _)| !(header && *no == 1))
            .filter_map(|(_, l)| split_owned(l, d).and_then(|f| f.into_iter().nth(t)))
            .collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        match detect_time_format(&refs) {
            Ok(tf) => Ok(tf.unwrap_or(TimeFormat::Iso)),
            Err(example) => Err(self.err(format!(
                "the time column (column {} {name:?}) holds {:?}, which is not an iso, \
                 epoch-s or epoch-ms time; say how times are written with --time-format, \
                 e.g. --time-format '%y%m%d%H%M%S' for YYMMDDhhmmss (or --format excite for \
                 the Excite log)",
                t + 1,
                show(&example)
            ))),
        }
    }

    /// The error of a delimited format without a header or mapping: `lead`, the first
    /// line and the `--columns` to use.
    fn needs_mapping(&self, lead: String, d: Delimiter) -> LogError {
        let (_, width, _) = split_sample(&non_blank(&self.lines), d);
        let mut s = format!("{lead}\n{}", show_first(self.sample));
        s.push_str(&show_flags(&read_with(d, width), false));
        s.truncate(s.trim_end().len());
        self.err(s)
    }

    /// A delimited log read by `--format tsv|csv` or by column flags.
    fn delimited(&self, d: Delimiter, detected: bool) -> Result<Layout, LogError> {
        let first_fields = self.first.and_then(|f| split_owned(f, d));
        let names_a_field = |fields: &[String]| {
            self.spec.column_refs().any(|(_, c)| match c {
                ColumnRef::Name(n) => fields.iter().any(|f| f.trim().eq_ignore_ascii_case(n)),
                ColumnRef::Index(_) => false,
            })
        };
        let header = first_fields.filter(|f| header_like(f) || names_a_field(f));
        if let Some(roles) = &self.spec.columns {
            let at = |r: Role| roles.iter().position(|&x| x == r);
            let Some(query) = at(Role::Query) else {
                return Err(self.err("--columns names no query column".to_owned()));
            };
            let time = at(Role::Time);
            return Ok(Layout {
                format: d.format(),
                header: header.is_some(),
                detected,
                shape: Shape::Delimited(Columns {
                    delimiter: d,
                    names: roles.iter().map(|r| r.name().to_owned()).collect(),
                    query,
                    user: at(Role::User),
                    time,
                    time_format: self.time_format(d, time, "time", header.is_some())?,
                }),
            });
        }
        if let Some(fields) = header {
            return self.with_header(d, &fields, detected);
        }
        // No header: positions only.
        if let Some((role, ColumnRef::Name(n))) = self
            .spec
            .column_refs()
            .find(|(_, c)| matches!(c, ColumnRef::Name(_)))
        {
            return Err(self.needs_mapping(
                format!(
                    "--{role}-column {n:?} names a header column, but the first line is not \
                     a header naming it; give columns by number (--{role}-column 2) or \
                     --columns"
                ),
                d,
            ));
        }
        let index = |c: Option<&ColumnRef>| match c {
            Some(ColumnRef::Index(i)) => Some(*i),
            _ => None,
        };
        let Some(query) = index(self.spec.query_column.as_ref()) else {
            return Err(self.needs_mapping(
                format!(
                    "--format {} needs to know which column holds the queries: the first line \
                     is not a header naming it; give --columns (or --query-column N)",
                    d.format()
                ),
                d,
            ));
        };
        let user = index(self.spec.user_column.as_ref());
        let time = index(self.spec.time_column.as_ref());
        let (_, sampled, _) = split_sample(&non_blank(&self.lines), d);
        let width = sampled.max(1 + query.max(user.unwrap_or(0)).max(time.unwrap_or(0)));
        let mut names = vec!["-".to_owned(); width];
        for (i, r) in [
            (Some(query), Role::Query),
            (user, Role::User),
            (time, Role::Time),
        ] {
            if let Some(i) = i {
                names[i] = r.name().to_owned();
            }
        }
        Ok(Layout {
            format: d.format(),
            header: false,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: d,
                names,
                query,
                user,
                time,
                time_format: self.time_format(d, time, "time", false)?,
            }),
        })
    }

    /// A delimited log with the header line `fields`: roles from the flags, else from the
    /// header names.
    fn with_header(
        &self,
        d: Delimiter,
        fields: &[String],
        detected: bool,
    ) -> Result<Layout, LogError> {
        let listing = || {
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| format!("{} {:?}", i + 1, f.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let find = |role: Role, given: Option<&ColumnRef>| -> Result<Option<usize>, LogError> {
            match given {
                Some(ColumnRef::Index(i)) if *i < fields.len() => Ok(Some(*i)),
                Some(ColumnRef::Index(i)) => Err(self.err(format!(
                    "--{role}-column {}: the header has only {} columns ({})",
                    i + 1,
                    fields.len(),
                    listing()
                ))),
                Some(ColumnRef::Name(n)) => fields
                    .iter()
                    .position(|f| f.trim() == n)
                    .or_else(|| fields.iter().position(|f| f.trim().eq_ignore_ascii_case(n)))
                    .map(Some)
                    .ok_or_else(|| {
                        self.err(format!(
                            "--{role}-column {n:?}: no such column in the header ({})",
                            listing()
                        ))
                    }),
                None => Ok(fields.iter().position(|f| header_role(f) == Some(role))),
            }
        };
        let query = find(Role::Query, self.spec.query_column.as_ref())?.ok_or_else(|| {
            self.err(format!(
                "the header line names no query column ({}); pass --query-column NAME or N",
                listing()
            ))
        })?;
        let user = find(Role::User, self.spec.user_column.as_ref())?;
        let time = find(Role::Time, self.spec.time_column.as_ref())?;
        if user == Some(query) || time == Some(query) || (user.is_some() && user == time) {
            return Err(self.err(format!(
                "one column cannot hold two roles (query = column {}, user = {}, time = {})",
                query + 1,
                user.map_or("none".to_owned(), |u| (u + 1).to_string()),
                time.map_or("none".to_owned(), |t| (t + 1).to_string()),
            )));
        }
        let names: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let t = f.trim();
                if t.is_empty() {
                    format!("column {}", i + 1)
                } else {
                    t.to_owned()
                }
            })
            .collect();
        let time_name = time.map_or("", |t| names[t].as_str());
        let time_format = self.time_format(d, time, time_name, true)?;
        Ok(Layout {
            format: d.format(),
            header: true,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: d,
                names,
                query,
                user,
                time,
                time_format,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered<'a>(lines: &[&'a str]) -> Vec<(u64, &'a str)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, *l))
            .collect()
    }

    fn auto(lines: &[&str]) -> Result<Layout, LogError> {
        resolve(Path::new("t.log"), &LayoutSpec::default(), &numbered(lines))
    }

    fn columns(l: &Layout) -> &Columns {
        match &l.shape {
            Shape::Delimited(c) => c,
            other => panic!("not delimited: {other:?}"),
        }
    }

    const EXCITE: &[&str] = &[
        "2A9EABFB35F5B954\t970916105432\t+mirun miten +milon",
        "BED75271605EBD0C\t970916001949\truten rulon",
        "BED75271605EBD0C\t970916001954\truten rulon",
        "824F413FA37520BF\t970916184809\tnen tin",
    ];

    #[test]
    fn headers_decide() {
        let l = auto(&[
            "AnonID\tQuery\tQueryTime\tItemRank\tClickURL",
            "1\ta\t2006-03-01",
        ])
        .unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Aol, true));
        let l = auto(&["query", "a"]).unwrap();
        assert_eq!((l.format, l.header), (LogFormat::QueryColumn, true));
        let l = auto(&["timestamp\tanon_id\tquery", "2006-03-01 00:01:44\t1\ta"]).unwrap();
        assert_eq!(l.format, LogFormat::Tsv);
        let c = columns(&l);
        assert_eq!((c.query, c.user, c.time), (2, Some(1), Some(0)));
        let l = auto(&["TS,User,Query", "1141171304,1,a"]).unwrap();
        assert_eq!(l.format, LogFormat::Csv);
        let c = columns(&l);
        assert_eq!((c.query, c.user, c.time), (2, Some(1), Some(0)));
        assert_eq!(
            c.time_format,
            TimeFormat::EpochS,
            "detected from the values"
        );
        let l = auto(&["kon min run", "free tickets"]).unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Lines, false));
    }

    #[test]
    fn delimited_without_header_is_refused() {
        let e = auto(&["1\t2006-03-01 00:01:44\ta", "2\t2006-03-01 00:01:45\tb"]).unwrap_err();
        assert!(matches!(e, LogError::Ambiguous { .. }), "{e}");
        let m = e.to_string();
        assert!(m.starts_with("t.log: refusing to guess"), "{m}");
        assert!(
            m.contains("2 of 2 sampled lines split into 3 tab-separated"),
            "{m}"
        );
        assert!(m.contains("first line: 1\\t2006-03-01 00:01:44\\ta"), "{m}");
        assert!(m.contains("--format tsv --columns ROLE,ROLE,ROLE"), "{m}");
        assert!(m.ends_with("--format lines"), "{m}");
    }

    #[test]
    fn excite_lines_are_suspect_and_the_presets_of_their_shape_suggested() {
        let s = suspect(EXCITE).expect("excite lines are suspect");
        assert_eq!(
            s,
            Suspicion::Delimited {
                delimiter: Delimiter::Tab,
                width: 3,
                agree: 4,
                total: 4
            }
        );
        let m = s.message(&numbered(EXCITE));
        assert!(
            m.contains("first line: 2A9EABFB35F5B954\\t970916105432\\t+mirun miten +milon"),
            "{m}"
        );
        assert!(
            m.contains("read it with: --format tsv --columns ROLE,ROLE,ROLE"),
            "{m}"
        );
        assert!(m.contains("or: --format excite"), "{m}");
        assert!(m.contains("or: --format aol"), "{m}");
        assert_eq!(m.lines().count(), 6, "{m}");
    }

    #[test]
    fn ordinary_queries_are_not_suspect() {
        let lines = [
            "kon min run",
            "koten kokon kolon kosan koven kodin",
            "third\tcolumn",
            "http://www.google.com",
            "paris, france",
            "c++: a tutorial",
            "",
        ];
        assert_eq!(suspect(&lines), None);
        assert_eq!(suspect(&[]), None);
        assert_eq!(suspect(&["", "  "]), None);
        // Some tabs, not most lines: queries.
        assert_eq!(suspect(&["a\tb", "c", "d", "e", "f"]), None);
    }

    #[test]
    fn trec_topics_are_suspect() {
        let lines = [
            "301:international organized crime",
            "302:poliomyelitis and post-polio",
        ];
        let s = suspect(&lines).expect("suspect");
        assert!(matches!(
            s,
            Suspicion::TrecTopics {
                agree: 2,
                total: 2,
                ..
            }
        ));
        let m = s.message(&numbered(&lines));
        assert!(m.contains("(`301:`), like TREC topics"), "{m}");
        assert!(m.contains("read it with: --format trec-topics"), "{m}");
        assert!(!trec_priority(&lines));
        assert!(trec_priority(&[
            "20001:1:obama family tree",
            "20002:3:lymes disease"
        ]));
    }

    #[test]
    fn csv_needs_a_structured_column() {
        let plain = ["red, green", "blue, yellow", "black, white"];
        assert_eq!(suspect(&plain), None);
        for lines in [
            ["2006-03-01 00:01:44,a b", "2006-03-01 00:01:45,b c"],
            ["1141171304,a b", "1141171305,b"],
            ["2A9EABFB35F5B954,a b", "BED75271605EBD0C,c"],
        ] {
            let Some(Suspicion::Delimited {
                delimiter, width, ..
            }) = suspect(&lines)
            else {
                panic!("{lines:?} are suspect");
            };
            assert_eq!((delimiter, width), (Delimiter::Comma, 2));
        }
        // Hex-looking words without a digit are words.
        assert_eq!(suspect(&["facade,cab", "decade,bead"]), None);
        // A line with a quote left open does not split; the others still count.
        assert!(suspect(&["\"open,1", "a,2", "b,3", "c,4", "d,5"]).is_some());
    }

    #[test]
    fn lines_that_do_not_split_are_left_out() {
        // Found by the fuzz tests: a CSV line whose quote is never closed (in the old
        // splitter: text after a closing quote) made a column view without columns.
        let (rows, width, agree) = split_sample(&["\"open ,:aaaa"], Delimiter::Comma);
        assert_eq!((rows.len(), width, agree), (0, 0, 0));
        assert_eq!(suspect(&["\"open ,:aaaa"]), None);
        let (_, width, agree) = split_sample(&["\"open", "a,b", "c,d"], Delimiter::Comma);
        assert_eq!((width, agree), (2, 2));
        let spec = LayoutSpec {
            format: Some(LogFormat::Csv),
            ..LayoutSpec::default()
        };
        let e = resolve(Path::new("t"), &spec, &numbered(&["\"open ,:aaaa"])).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("first line: \"open ,:aaaa"), "{m}");
        assert!(m.contains("--format csv --columns ROLE "), "{m}");
    }

    #[test]
    fn columns_flag_with_or_without_header() {
        let spec = LayoutSpec {
            columns: Some(vec![Role::Time, Role::User, Role::Query]),
            ..LayoutSpec::default()
        };
        let l = resolve(
            Path::new("t"),
            &spec,
            &numbered(&["1141171304\t7\ta", "1141171305\t7\tb"]),
        )
        .unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Tsv, false));
        assert_eq!(columns(&l).time_format, TimeFormat::EpochS);
        let l = resolve(
            Path::new("t"),
            &spec,
            &numbered(&["ts\tuser\tquery", "1141171304\t7\ta"]),
        )
        .unwrap();
        assert!(l.header, "a header line is skipped");
        let l = resolve(
            Path::new("t"),
            &spec,
            &numbered(&["1141171304123,7,a", "1141171305000,7,b"]),
        )
        .unwrap();
        assert_eq!(columns(&l).delimiter, Delimiter::Comma);
        assert_eq!(columns(&l).time_format, TimeFormat::EpochMs);
    }

    #[test]
    fn time_formats_are_detected_only_when_unambiguous() {
        let f = |v: &[&str]| detect_time_format(v);
        assert_eq!(f(&["2006-03-01 00:01:44"]), Ok(Some(TimeFormat::Iso)));
        assert_eq!(f(&["2006-03-01T00:01:44Z"]), Ok(Some(TimeFormat::Iso)));
        assert_eq!(
            f(&["1141171304", "1141171305.5"]),
            Ok(Some(TimeFormat::EpochS))
        );
        assert_eq!(f(&["1141171304123"]), Ok(Some(TimeFormat::EpochMs)));
        assert_eq!(f(&["", " "]), Ok(None));
        // Twelve digits: YYMMDDhhmmss, or epoch-ms of 1973-2001? Not guessed.
        assert_eq!(f(&["970916105432"]), Err("970916105432".to_owned()));
        assert_eq!(f(&["4100001"]), Err("4100001".to_owned()));
        assert_eq!(f(&["yesterday"]), Err("yesterday".to_owned()));
        // One bad value in ten is tolerated (a malformed line), two are not.
        let mut v = vec!["1141171304"; 9];
        v.push("x");
        assert_eq!(f(&v), Ok(Some(TimeFormat::EpochS)));
        v[0] = "y";
        assert!(f(&v).is_err());
    }

    #[test]
    fn an_undetected_time_column_asks_for_the_flag() {
        let spec = LayoutSpec {
            format: Some(LogFormat::Tsv),
            columns: Some(vec![Role::User, Role::Time, Role::Query]),
            ..LayoutSpec::default()
        };
        let e = resolve(Path::new("t"), &spec, &numbered(EXCITE)).unwrap_err();
        assert!(matches!(e, LogError::Layout { .. }), "{e}");
        let m = e.to_string();
        assert!(
            m.contains("the time column (column 2 \"time\") holds \"970916105432\""),
            "{m}"
        );
        assert!(m.contains("--time-format '%y%m%d%H%M%S'"), "{m}");
        let spec = LayoutSpec {
            time_format: Some(TimeFormat::excite()),
            ..spec
        };
        assert!(resolve(Path::new("t"), &spec, &numbered(EXCITE)).is_ok());
    }

    #[test]
    fn tsv_without_mapping_says_how() {
        let spec = LayoutSpec {
            format: Some(LogFormat::Tsv),
            ..LayoutSpec::default()
        };
        let e = resolve(Path::new("t"), &spec, &numbered(EXCITE)).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("which column holds the queries"), "{m}");
        assert!(m.contains("first line: 2A9EABFB35F5B954\\t"), "{m}");
        assert!(m.contains("--format tsv --columns ROLE,ROLE,ROLE"), "{m}");
        assert!(m.contains("or: --format excite"), "{m}");
        assert!(!m.contains("--format lines"), "{m}");
    }

    #[test]
    fn header_names_by_flag() {
        let spec = LayoutSpec {
            format: Some(LogFormat::Csv),
            query_column: Some(ColumnRef::Name("TEXT".into())),
            ..LayoutSpec::default()
        };
        let l = resolve(Path::new("t"), &spec, &numbered(&["id,text", "1,a"])).unwrap();
        assert_eq!(columns(&l).query, 1);
        let spec = LayoutSpec {
            format: Some(LogFormat::Csv),
            query_column: Some(ColumnRef::Name("nope".into())),
            ..LayoutSpec::default()
        };
        let e = resolve(Path::new("t"), &spec, &numbered(&["id,query", "1,a"])).unwrap_err();
        assert!(e.to_string().contains("no such column"), "{e}");
    }

    #[test]
    fn messages_show_lines_safely() {
        assert_eq!(show("a\tb\u{1}"), "a\\tb\\u{1}");
        assert_eq!(show(&"é".repeat(200)).chars().count(), SHOW_CHARS + 1);
        assert_eq!(
            show_first(&[(1, ""), (2, "x")]),
            "  first line (line 2): x\n"
        );
    }
}
