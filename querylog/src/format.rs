//! The names of query-log layouts: the formats and presets users pick with `--format`, the
//! column delimiters, the column roles of `--columns`, the header names recognised in a
//! first line, and the magic bytes that are checked before anything else.
//!
//! Gzip (magic `1f 8b`) is transparent and Parquet (magic `PAR1`) is recognised by its
//! magic, never by the file name. How a text log's layout is decided from its content is
//! [`detect`](crate::detect)'s job; how a line is split into fields is
//! [`fields`](crate::fields)'.
//!
//! Header names are matched case-insensitively with `_`, `-`, `.` and spaces ignored
//! ([`header_role`]): `Query`, `query`, `query_string`, `AnonID`, `anon_id`, `user`,
//! `QueryTime`, `timestamp`, `ts`, ... The AOL 2006 collection's `ItemRank` and `ClickURL`
//! are known columns without a role.

use std::fmt;
use std::str::FromStr;

/// The gzip magic bytes.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The Parquet magic bytes (at the start and the end of every Parquet file).
pub const PARQUET_MAGIC: [u8; 4] = *b"PAR1";
/// The UTF-8 byte-order mark, stripped from the first line of text logs.
pub const UTF8_BOM: [u8; 3] = [0xef, 0xbb, 0xbf];

/// The query-log layouts [`read_log`](crate::read_log) understands, by the name used on
/// the command line (`--format`) and in reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    /// The AOL 2006 collection: tab-separated `AnonID Query QueryTime [ItemRank ClickURL]`,
    /// 3 to 5 columns, header `AnonID\tQuery\tQueryTime\tItemRank\tClickURL` (skipped when
    /// present), times `YYYY-MM-DD HH:MM:SS`.
    Aol,
    /// A header `Query` (any case), then one query per line.
    QueryColumn,
    /// Tab-separated columns, mapped by a header line or by `--columns`.
    Tsv,
    /// Comma-separated columns (RFC 4180 quoting), mapped by a header line or `--columns`.
    Csv,
    /// No header, no columns: every non-blank line is one query.
    Lines,
    /// The Excite 1997 log: tab-separated `user time query`, no header, times
    /// `YYMMDDhhmmss` (`%y%m%d%H%M%S`).
    Excite,
    /// TREC topics: `qid:query` per line (or `qid:priority:query`, as in the Million Query
    /// track); the qid is dropped.
    TrecTopics,
    /// Parquet with a query string column and optional time and user columns.
    Parquet,
}

impl LogFormat {
    /// Every format, in the order they are listed in messages.
    pub const ALL: [LogFormat; 8] = [
        LogFormat::Lines,
        LogFormat::Tsv,
        LogFormat::Csv,
        LogFormat::Parquet,
        LogFormat::Aol,
        LogFormat::Excite,
        LogFormat::TrecTopics,
        LogFormat::QueryColumn,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Aol => "aol",
            LogFormat::QueryColumn => "query-column",
            LogFormat::Tsv => "tsv",
            LogFormat::Csv => "csv",
            LogFormat::Lines => "lines",
            LogFormat::Excite => "excite",
            LogFormat::TrecTopics => "trec-topics",
            LogFormat::Parquet => "parquet",
        }
    }

    /// The delimiter of the column formats (None for the others).
    pub fn delimiter(self) -> Option<Delimiter> {
        match self {
            LogFormat::Aol | LogFormat::Tsv | LogFormat::Excite => Some(Delimiter::Tab),
            LogFormat::Csv => Some(Delimiter::Comma),
            _ => None,
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LogFormat {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LogFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// A format name that is not one of [`LogFormat::ALL`].
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown query-log format `{0}` (expected lines, tsv, csv, parquet, aol, excite, \
     trec-topics or query-column)"
)]
pub struct UnknownFormat(pub String);

/// The separator of a delimited text log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delimiter {
    /// `\t`, no quoting (the AOL, Excite and most research logs).
    Tab,
    /// `,`, with RFC 4180 double-quote quoting.
    Comma,
}

impl Delimiter {
    /// The separator byte.
    pub fn byte(self) -> u8 {
        match self {
            Delimiter::Tab => b'\t',
            Delimiter::Comma => b',',
        }
    }

    /// `tab-separated` or `comma-separated`.
    pub fn adjective(self) -> &'static str {
        match self {
            Delimiter::Tab => "tab-separated",
            Delimiter::Comma => "comma-separated",
        }
    }

    /// The plain format reading this delimiter: `tsv` or `csv`.
    pub fn format(self) -> LogFormat {
        match self {
            Delimiter::Tab => LogFormat::Tsv,
            Delimiter::Comma => LogFormat::Csv,
        }
    }
}

/// What a column of a delimited log holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The query text.
    Query,
    /// The (anonymous) user or session id.
    User,
    /// When the query was issued.
    Time,
    /// Anything else (ignored).
    Skip,
}

impl Role {
    /// `query`, `user`, `time` or `-`, as written in `--columns`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Query => "query",
            Role::User => "user",
            Role::Time => "time",
            Role::Skip => "-",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = String;

    /// One item of `--columns`: `query`, `user`, `time` (or a header alias of them, such as
    /// `ts` or `anon_id`), or `-`/`skip`/`_` for a column to ignore.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if matches!(t, "-" | "_" | "") || t.eq_ignore_ascii_case("skip") {
            return Ok(Role::Skip);
        }
        match header_role(t) {
            Some(r) if r != Role::Skip => Ok(r),
            _ => Err(format!(
                "unknown column role `{t}` (expected query, user, time, or - to skip)"
            )),
        }
    }
}

/// Header names announcing the query column (normalised: lowercase, no `_ - .` or spaces).
const QUERY_NAMES: &[&str] = &[
    "query",
    "querystring",
    "querytext",
    "qtext",
    "search",
    "searchquery",
    "searchstring",
    "searchterm",
    "searchterms",
    "keywords",
];
/// Header names announcing the user column (normalised).
const USER_NAMES: &[&str] = &[
    "user",
    "userid",
    "username",
    "anonid",
    "anonymousid",
    "uid",
    "client",
    "clientid",
    "session",
    "sessionid",
    "visitorid",
    "cookieid",
    "machineid",
];
/// Header names announcing the time column (normalised).
const TIME_NAMES: &[&str] = &[
    "time",
    "timestamp",
    "ts",
    "querytime",
    "datetime",
    "date",
    "epoch",
    "eventtime",
    "searchtime",
    "createdat",
    "unixtime",
];
/// Known header names of columns without a role (the AOL collection's click columns).
const SKIP_NAMES: &[&str] = &["itemrank", "clickurl", "rank", "url", "clickedurl"];

/// The role a header name announces, matched case-insensitively with `_`, `-`, `.` and
/// spaces ignored (`AnonID`, `anon_id` and `Anon ID` are all the user column); `Skip` for a
/// known column without a role (`ItemRank`, `ClickURL`); None for an unknown name.
pub fn header_role(name: &str) -> Option<Role> {
    let norm: String = name
        .trim()
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    if QUERY_NAMES.contains(&norm.as_str()) {
        Some(Role::Query)
    } else if USER_NAMES.contains(&norm.as_str()) {
        Some(Role::User)
    } else if TIME_NAMES.contains(&norm.as_str()) {
        Some(Role::Time)
    } else if SKIP_NAMES.contains(&norm.as_str()) {
        Some(Role::Skip)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let names: Vec<String> = LogFormat::ALL.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            names,
            [
                "lines",
                "tsv",
                "csv",
                "parquet",
                "aol",
                "excite",
                "trec-topics",
                "query-column"
            ]
        );
        for f in LogFormat::ALL {
            assert_eq!(f.name().parse::<LogFormat>().unwrap(), f);
        }
        assert_eq!("TSV".parse::<LogFormat>().unwrap(), LogFormat::Tsv);
        let e = "json".parse::<LogFormat>().unwrap_err().to_string();
        assert!(e.contains("`json`") && e.contains("trec-topics"), "{e}");
    }

    #[test]
    fn header_names_are_case_insensitive() {
        for (name, role) in [
            ("Query", Role::Query),
            ("QUERY", Role::Query),
            ("query_string", Role::Query),
            ("AnonID", Role::User),
            ("anon_id", Role::User),
            ("Anon ID", Role::User),
            ("user", Role::User),
            ("QueryTime", Role::Time),
            ("timestamp", Role::Time),
            ("ts", Role::Time),
            ("TS", Role::Time),
            ("ItemRank", Role::Skip),
            ("ClickURL", Role::Skip),
        ] {
            assert_eq!(header_role(name), Some(role), "{name}");
        }
        assert_eq!(header_role("kon min run"), None);
        assert_eq!(header_role("2006-03-01 00:01:44"), None);
    }

    #[test]
    fn roles_of_columns() {
        let parse = |s: &str| s.parse::<Role>();
        assert_eq!(parse("query"), Ok(Role::Query));
        assert_eq!(parse("ts"), Ok(Role::Time));
        assert_eq!(parse("anon_id"), Ok(Role::User));
        assert_eq!(parse("-"), Ok(Role::Skip));
        assert_eq!(parse("skip"), Ok(Role::Skip));
        assert!(
            parse("clickurl").is_err(),
            "a known name without a role is no role"
        );
        assert!(parse("qid").unwrap_err().contains("`qid`"));
    }
}
