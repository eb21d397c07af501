//! Which kind of query log a file is, decided from its content, never from its name.
//!
//! Gzip is recognised by its magic bytes `1f 8b` and is transparent: the format is decided
//! from the decompressed content. Parquet is recognised by its magic `PAR1`. Text logs are
//! told apart by their first line:
//!
//! | first line | format |
//! |---|---|
//! | starts with `AnonID` + tab (`AnonID\tQuery\tQueryTime\tItemRank\tClickURL`) | [`LogFormat::Aol`] |
//! | exactly `Query` | [`LogFormat::QueryColumn`] |
//! | exactly `timestamp\tanon_id\tquery` | [`LogFormat::Tsv`] |
//! | anything else | [`LogFormat::Lines`] (the first line is a query too) |
//!
//! A UTF-8 byte-order mark and a `\r` line ending are ignored when matching headers.

use std::fmt;

/// The gzip magic bytes.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The Parquet magic bytes (at the start and the end of every Parquet file).
pub const PARQUET_MAGIC: [u8; 4] = *b"PAR1";
/// The UTF-8 byte-order mark, stripped from the first line of text logs.
pub const UTF8_BOM: [u8; 3] = [0xef, 0xbb, 0xbf];

/// The query-log formats [`read_log`](super::read_log) understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    /// The original AOL 2006 collection: header `AnonID\tQuery\tQueryTime\tItemRank\tClickURL`,
    /// rows of 3 to 5 tab-separated columns (item rank and click URL empty or absent).
    Aol,
    /// A single column with header `Query`, one query per line.
    QueryColumn,
    /// Header `timestamp\tanon_id\tquery`, rows of exactly those three columns.
    Tsv,
    /// No header: every non-blank line is a query.
    Lines,
    /// Parquet with a `query` string column and optional `ts` and `user` columns.
    Parquet,
}

impl LogFormat {
    /// Every format, in the order detection tries them (Lines is the fallback).
    pub const ALL: [LogFormat; 5] = [
        LogFormat::Parquet,
        LogFormat::Aol,
        LogFormat::QueryColumn,
        LogFormat::Tsv,
        LogFormat::Lines,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Aol => "aol",
            LogFormat::QueryColumn => "query-column",
            LogFormat::Tsv => "tsv",
            LogFormat::Lines => "lines",
            LogFormat::Parquet => "parquet",
        }
    }

    /// Whether the format has a user column (repeats are then collapsed per user).
    pub fn has_user(self) -> bool {
        matches!(self, LogFormat::Aol | LogFormat::Tsv | LogFormat::Parquet)
    }

    /// Whether the first line of a file in this format is a header, not data.
    pub fn has_header(self) -> bool {
        matches!(
            self,
            LogFormat::Aol | LogFormat::QueryColumn | LogFormat::Tsv
        )
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LogFormat {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LogFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// A format name that is not one of [`LogFormat::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown query-log format `{0}` (expected aol, query-column, tsv, lines or parquet)")]
pub struct UnknownFormat(pub String);

/// The text format announced by the first line of a (decompressed) text log. `first_line`
/// may still carry its line ending and a byte-order mark.
pub fn detect_text(first_line: &[u8]) -> LogFormat {
    let line = crate::io::trim_newline(first_line);
    let line = line.strip_prefix(&UTF8_BOM[..]).unwrap_or(line);
    if line.starts_with(b"AnonID\t") {
        LogFormat::Aol
    } else if line == b"Query" {
        LogFormat::QueryColumn
    } else if line == b"timestamp\tanon_id\tquery" {
        LogFormat::Tsv
    } else {
        LogFormat::Lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        assert_eq!(
            detect_text(b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"),
            LogFormat::Aol
        );
        assert_eq!(
            detect_text(b"\xef\xbb\xbfQuery\r\n"),
            LogFormat::QueryColumn
        );
        assert_eq!(detect_text(b"Query"), LogFormat::QueryColumn);
        assert_eq!(detect_text(b"Query \n"), LogFormat::Lines);
        assert_eq!(detect_text(b"query\n"), LogFormat::Lines);
        assert_eq!(detect_text(b"timestamp\tanon_id\tquery\n"), LogFormat::Tsv);
        assert_eq!(detect_text(b"AnonID is a word\n"), LogFormat::Lines);
        assert_eq!(detect_text(b""), LogFormat::Lines);
    }

    #[test]
    fn names() {
        let names: Vec<String> = LogFormat::ALL.iter().map(|f| f.to_string()).collect();
        assert_eq!(names, ["parquet", "aol", "query-column", "tsv", "lines"]);
        for f in LogFormat::ALL {
            assert_eq!(f.name().parse::<LogFormat>().unwrap(), f);
        }
        assert!("csv".parse::<LogFormat>().is_err());
    }
}
