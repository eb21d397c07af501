//! The layout of a query log: what the user asked for ([`LayoutSpec`], the `--format`,
//! `--columns`, `--query-column`, `--user-column`, `--time-column` and `--time-format`
//! flags, validated once), and what a reader settled on ([`Layout`], printed before any
//! work so that a misread is seen at once).

use std::fmt;
use std::str::FromStr;

use crate::format::{Delimiter, LogFormat, Role};
use crate::time::{format_timestamp, TimeFormat};
use crate::LogRecord;

/// A column named by its header name or by its 1-based position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ColumnRef {
    /// A header name (Parquet column name), matched exactly, then case-insensitively.
    Name(String),
    /// A 0-based index (written 1-based on the command line).
    Index(usize),
}

impl FromStr for ColumnRef {
    type Err = LayoutError;

    /// `3` is the third column; anything else is a name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err(LayoutError("an empty column name".to_owned()));
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            return match t.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(ColumnRef::Index(n - 1)),
                _ => Err(LayoutError(format!(
                    "column {t}: columns are numbered from 1"
                ))),
            };
        }
        Ok(ColumnRef::Name(t.to_owned()))
    }
}

impl fmt::Display for ColumnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnRef::Name(n) => write!(f, "{n:?}"),
            ColumnRef::Index(i) => write!(f, "{}", i + 1),
        }
    }
}

/// A layout request that cannot be honoured (bad flag, or flags that do not go together).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

/// Parses `--columns`: comma-separated roles, e.g. `user,time,query` or `-,query,-`.
pub fn parse_columns(s: &str) -> Result<Vec<Role>, LayoutError> {
    let roles = s
        .split(',')
        .map(|item| item.parse::<Role>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LayoutError(format!("--columns {s:?}: {e}")))?;
    let count = |r: Role| roles.iter().filter(|&&x| x == r).count();
    if count(Role::Query) != 1 {
        return Err(LayoutError(format!(
            "--columns {s:?}: name exactly one query column (found {})",
            count(Role::Query)
        )));
    }
    for r in [Role::User, Role::Time] {
        if count(r) > 1 {
            return Err(LayoutError(format!(
                "--columns {s:?}: more than one {r} column"
            )));
        }
    }
    Ok(roles)
}

/// How the user asked for a log to be read. The default asks for nothing: everything is
/// detected from the content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayoutSpec {
    /// `--format`; None detects it.
    pub format: Option<LogFormat>,
    /// `--columns`: the role of each column of a headerless delimited log.
    pub columns: Option<Vec<Role>>,
    /// `--query-column`.
    pub query_column: Option<ColumnRef>,
    /// `--user-column`.
    pub user_column: Option<ColumnRef>,
    /// `--time-column`.
    pub time_column: Option<ColumnRef>,
    /// `--time-format`.
    pub time_format: Option<TimeFormat>,
}

impl LayoutSpec {
    /// Whether the user asked for anything at all.
    pub fn is_auto(&self) -> bool {
        *self == LayoutSpec::default()
    }

    /// Whether columns are mapped by flags (`--columns` or a `--*-column`).
    pub fn has_mapping(&self) -> bool {
        self.columns.is_some()
            || self.query_column.is_some()
            || self.user_column.is_some()
            || self.time_column.is_some()
    }

    /// The `--*-column` flags given, with their roles.
    pub fn column_refs(&self) -> impl Iterator<Item = (Role, &ColumnRef)> {
        [
            (Role::Query, self.query_column.as_ref()),
            (Role::User, self.user_column.as_ref()),
            (Role::Time, self.time_column.as_ref()),
        ]
        .into_iter()
        .filter_map(|(r, c)| c.map(|c| (r, c)))
    }

    /// Checks that the flags go together (before any file is opened).
    pub fn validate(&self) -> Result<(), LayoutError> {
        let err = |m: String| Err(LayoutError(m));
        let refs: Vec<(Role, &ColumnRef)> = self.column_refs().collect();
        if let Some(cols) = &self.columns {
            if !refs.is_empty() {
                return err(
                    "--columns maps every column already: drop --query-column, --user-column \
                     and --time-column, or drop --columns"
                        .to_owned(),
                );
            }
            if cols.iter().filter(|&&r| r == Role::Query).count() != 1 {
                return err("--columns must name exactly one query column".to_owned());
            }
        }
        for (i, (ra, a)) in refs.iter().enumerate() {
            if let Some((rb, _)) = refs[i + 1..].iter().find(|(_, b)| b == a) {
                return err(format!(
                    "--{ra}-column and --{rb}-column both name column {a}"
                ));
            }
        }
        if let Some(f) = self.format {
            match f {
                LogFormat::Lines | LogFormat::QueryColumn | LogFormat::TrecTopics => {
                    if self.has_mapping() || self.time_format.is_some() {
                        return err(format!(
                            "--format {f} has a single query field: --columns, --*-column and \
                             --time-format do not apply (use --format tsv or csv to map columns)"
                        ));
                    }
                }
                LogFormat::Aol | LogFormat::Excite => {
                    if self.has_mapping() {
                        return err(format!(
                            "--format {f} fixes its columns; to map columns yourself use \
                             --format tsv with --columns"
                        ));
                    }
                }
                LogFormat::Parquet => {
                    if self.columns.is_some() {
                        return err(
                            "--columns is for headerless text logs; a Parquet log's columns \
                             are named: use --query-column, --user-column and --time-column"
                                .to_owned(),
                        );
                    }
                    if let Some(tf) = &self.time_format {
                        if !matches!(tf, TimeFormat::EpochS | TimeFormat::EpochMs) {
                            return err(format!(
                                "--time-format {tf}: a Parquet time column is a Timestamp, or \
                                 an integer read as epoch-ms (default) or epoch-s"
                            ));
                        }
                    }
                }
                LogFormat::Tsv | LogFormat::Csv => {}
            }
        }
        Ok(())
    }
}

/// The columns of a delimited text log, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Columns {
    /// The separator.
    pub delimiter: Delimiter,
    /// One name per column: the header's names, or the roles of `--columns`.
    pub names: Vec<String>,
    /// 0-based index of the query column.
    pub query: usize,
    /// 0-based index of the user column, if any.
    pub user: Option<usize>,
    /// 0-based index of the time column, if any.
    pub time: Option<usize>,
    /// How the time column is written.
    pub time_format: TimeFormat,
}

impl Columns {
    /// The most fields a data line may have.
    pub fn width(&self) -> usize {
        self.names.len()
    }

    /// The fewest fields a data line may have: up to the last mapped column (trailing
    /// unmapped columns may be absent, as the AOL log's click columns are).
    pub fn min_fields(&self) -> usize {
        1 + self
            .query
            .max(self.user.unwrap_or(0))
            .max(self.time.unwrap_or(0))
    }

    /// The name of column `i` for messages (its header name, or its role).
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or("?")
    }

    /// `expected 3 tab-separated columns (timestamp, anon_id, query), found 2`, or with a
    /// range, `expected 3 to 5 ... (AnonID, Query, QueryTime[, ItemRank, ClickURL])`.
    pub fn wrong_count(&self, found: usize) -> String {
        let (min, width) = (self.min_fields(), self.width());
        let required = self.names[..min].join(", ");
        if min == width {
            format!(
                "expected {width} {} columns ({required}), found {found}",
                self.delimiter.adjective()
            )
        } else {
            format!(
                "expected {min} to {width} {} columns ({required}[, {}]), found {found}",
                self.delimiter.adjective(),
                self.names[min..].join(", ")
            )
        }
    }

    fn describe_column(&self, label: &str, i: usize) -> String {
        let name = self.name(i);
        if name == label {
            format!("{label} = column {}", i + 1)
        } else {
            format!("{label} = column {} {name:?}", i + 1)
        }
    }
}

/// The columns a Parquet log is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParquetColumns {
    /// The query column's name.
    pub query: String,
    /// The user column's name and Arrow type, if any.
    pub user: Option<(String, String)>,
    /// The time column's name and Arrow type, if any.
    pub time: Option<(String, String)>,
    /// How an integer time column is read (epoch-ms unless `--time-format epoch-s`).
    pub int_time: TimeFormat,
}

/// How the records of a log are laid out, once settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One query per line.
    Lines,
    /// `qid:query` per line, or `qid:priority:query` with `priority`.
    TrecTopics {
        /// Lines are `qid:priority:query`.
        priority: bool,
    },
    /// Delimited columns.
    Delimited(Columns),
    /// A Parquet file.
    Parquet(ParquetColumns),
}

/// The layout a reader used: printed before any work, kept in the
/// [`ReadReport`](crate::ReadReport).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The format (or preset) name.
    pub format: LogFormat,
    /// The first line is a header and was skipped.
    pub header: bool,
    /// Whether it was detected from the content (`false`: the flags said so).
    pub detected: bool,
    /// How records are laid out.
    pub shape: Shape,
}

impl Layout {
    /// The time format, when the log has a time column.
    pub fn time_format(&self) -> Option<&TimeFormat> {
        match &self.shape {
            Shape::Delimited(c) if c.time.is_some() => Some(&c.time_format),
            Shape::Parquet(p) if p.time.is_some() => Some(&p.int_time),
            _ => None,
        }
    }

    /// One line: the format, whether detected, and the column mapping, e.g.
    /// `excite (from --format): tab-separated, no header, 3 columns; user = column 1,
    /// time = column 2 as %y%m%d%H%M%S, query = column 3`.
    pub fn describe(&self) -> String {
        let how = if self.detected {
            "detected"
        } else {
            "from --format"
        };
        let body = match &self.shape {
            Shape::Lines if self.header => "a header line, then one query per line".to_owned(),
            Shape::Lines => "one query per line, no header".to_owned(),
            Shape::TrecTopics { priority: false } => {
                "qid:query per line; query = the text after the first ':' (qid dropped)".to_owned()
            }
            Shape::TrecTopics { priority: true } => {
                "qid:priority:query per line; query = the text after the second ':' \
                 (qid and priority dropped)"
                    .to_owned()
            }
            Shape::Delimited(c) => {
                let (min, width) = (c.min_fields(), c.width());
                let count = if min == width {
                    format!("{width} columns")
                } else {
                    format!("{min} to {width} columns")
                };
                let header = if self.header {
                    "header line skipped"
                } else {
                    "no header"
                };
                let mut roles = vec![c.describe_column("query", c.query)];
                if let Some(u) = c.user {
                    roles.push(c.describe_column("user", u));
                }
                match c.time {
                    Some(t) => roles.push(format!(
                        "{} as {}",
                        c.describe_column("time", t),
                        describe_time_format(&c.time_format)
                    )),
                    None => roles.push("no time".to_owned()),
                }
                if c.user.is_none() {
                    roles.push("no user".to_owned());
                }
                format!(
                    "{}, {header}, {count}; {}",
                    c.delimiter.adjective(),
                    roles.join(", ")
                )
            }
            Shape::Parquet(p) => {
                let mut roles = vec![format!("query = column {:?}", p.query)];
                match &p.user {
                    Some((n, t)) => roles.push(format!("user = column {n:?} ({t})")),
                    None => roles.push("no user".to_owned()),
                }
                match &p.time {
                    Some((n, t)) if t.starts_with("Timestamp") => {
                        roles.push(format!("time = column {n:?} ({t})"))
                    }
                    Some((n, t)) => {
                        roles.push(format!("time = column {n:?} ({t}, {})", p.int_time))
                    }
                    None => roles.push("no time".to_owned()),
                }
                roles.join(", ")
            }
        };
        format!("{} ({how}): {body}", self.format)
    }
}

/// Characters of a query shown in a preview.
const PREVIEW_CHARS: usize = 80;

impl Layout {
    /// What a command prints before any work: `layout: <describe>`, then one line per
    /// record, `query 1: "kon min run" (user 4100001, 2006-03-01 00:01:44)`.
    pub fn preview(&self, first: &[LogRecord]) -> Vec<String> {
        let mut out = vec![format!("layout: {}", self.describe())];
        if first.is_empty() {
            out.push("  no query could be read with this layout".to_owned());
        }
        for (i, r) in first.iter().enumerate() {
            let mut q: String = r.query.chars().take(PREVIEW_CHARS).collect();
            if r.query.chars().count() > PREVIEW_CHARS {
                q.push('…');
            }
            let mut extra = Vec::new();
            if let Some(u) = &r.user {
                extra.push(format!("user {u}"));
            }
            if let Some(t) = r.ts {
                extra.push(format_timestamp(t));
            }
            let extra = if extra.is_empty() {
                String::new()
            } else {
                format!(" ({})", extra.join(", "))
            };
            out.push(format!("  query {}: {q:?}{extra}", i + 1));
        }
        out
    }
}

/// `iso (YYYY-MM-DD HH:MM:SS)`, `epoch-s`, `%y%m%d%H%M%S`.
fn describe_time_format(f: &TimeFormat) -> String {
    match f {
        TimeFormat::Iso => "iso (YYYY-MM-DD HH:MM:SS)".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_refs() {
        assert_eq!("3".parse::<ColumnRef>(), Ok(ColumnRef::Index(2)));
        assert_eq!(
            "Query".parse::<ColumnRef>(),
            Ok(ColumnRef::Name("Query".into()))
        );
        assert!("0".parse::<ColumnRef>().is_err());
        assert!(" ".parse::<ColumnRef>().is_err());
    }

    #[test]
    fn columns_flag() {
        assert_eq!(
            parse_columns("user,time,query").unwrap(),
            [Role::User, Role::Time, Role::Query]
        );
        assert_eq!(
            parse_columns("-,query,skip").unwrap(),
            [Role::Skip, Role::Query, Role::Skip]
        );
        for bad in [
            "user,time",
            "query,query",
            "user,user,query",
            "query,colour",
        ] {
            let e = parse_columns(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn flags_that_do_not_go_together() {
        let spec = |f: &str| LayoutSpec {
            format: Some(f.parse().unwrap()),
            ..LayoutSpec::default()
        };
        let with_cols = |mut s: LayoutSpec| {
            s.columns = Some(vec![Role::Query]);
            s
        };
        assert!(with_cols(spec("tsv")).validate().is_ok());
        assert!(with_cols(spec("lines")).validate().is_err());
        assert!(with_cols(spec("excite")).validate().is_err());
        assert!(with_cols(spec("parquet")).validate().is_err());
        let mut s = spec("excite");
        s.time_format = Some(TimeFormat::Iso);
        assert!(s.validate().is_ok());
        let mut s = spec("parquet");
        s.time_format = Some(TimeFormat::Iso);
        assert!(s.validate().is_err());
        let s = LayoutSpec {
            query_column: Some(ColumnRef::Index(1)),
            user_column: Some(ColumnRef::Index(1)),
            ..LayoutSpec::default()
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("both name column 2"), "{e}");
        assert!(LayoutSpec::default().is_auto());
    }

    #[test]
    fn wrong_count_messages() {
        let aol = Columns {
            delimiter: Delimiter::Tab,
            names: ["AnonID", "Query", "QueryTime", "ItemRank", "ClickURL"]
                .map(String::from)
                .to_vec(),
            query: 1,
            user: Some(0),
            time: Some(2),
            time_format: TimeFormat::Iso,
        };
        assert_eq!(
            aol.wrong_count(2),
            "expected 3 to 5 tab-separated columns \
             (AnonID, Query, QueryTime[, ItemRank, ClickURL]), found 2"
        );
        let layout = Layout {
            format: LogFormat::Aol,
            header: true,
            detected: true,
            shape: Shape::Delimited(aol),
        };
        assert_eq!(
            layout.describe(),
            "aol (detected): tab-separated, header line skipped, 3 to 5 columns; \
             query = column 2 \"Query\", user = column 1 \"AnonID\", \
             time = column 3 \"QueryTime\" as iso (YYYY-MM-DD HH:MM:SS)"
        );
    }
}
