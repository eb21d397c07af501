//! [`LogError`]: everything that stops a query log from being read or written.
//!
//! Every variant carries the path of the file and prints it first, so a message read in a
//! terminal or a CI log says which file to look at. Malformed lines that leave some good
//! records behind are not errors: they go into the [`ReadReport`](crate::ReadReport).

use std::io;
use std::path::PathBuf;

/// Why a query log could not be read or written. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file does not exist.
    #[error("{}: query log not found", path.display())]
    NotFound {
        /// The path that was asked for.
        path: PathBuf,
    },
    /// Opening, reading or creating the file failed.
    #[error("{}: I/O error: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file starts with the gzip magic but its stream is corrupt or cut short.
    #[error(
        "{}: corrupt or truncated gzip data (after {line} complete lines): {source}",
        path.display()
    )]
    Gzip {
        /// The file.
        path: PathBuf,
        /// How many lines (header included) had been read before the error.
        line: u64,
        /// The decoder's error.
        #[source]
        source: io::Error,
    },
    /// The file holds no data rows: it is empty, has only a header, or only blank lines.
    #[error("{}: no data rows: {detail}", path.display())]
    NoData {
        /// The file.
        path: PathBuf,
        /// What was found instead (e.g. "the file is empty").
        detail: String,
    },
    /// Every data line (or row) was malformed, so not a single record could be read.
    #[error(
        "{}: not a single valid record, {count} malformed ({examples})",
        path.display()
    )]
    AllMalformed {
        /// The file.
        path: PathBuf,
        /// How many lines were malformed.
        count: u64,
        /// The first few, as `line N: reason; ...`.
        examples: String,
    },
    /// Content detection will not guess: the lines look like columns or TREC topics, not
    /// one query per line. The detail shows the first lines, the columns seen and the
    /// `--format`/`--columns` to use.
    #[error("{}: {detail}", path.display())]
    Ambiguous {
        /// The file.
        path: PathBuf,
        /// What the lines look like and the flags that read them.
        detail: String,
    },
    /// The layout asked for (`--format`, column flags) does not fit the file.
    #[error("{}: {detail}", path.display())]
    Layout {
        /// The file.
        path: PathBuf,
        /// What does not fit, and what would.
        detail: String,
    },
    /// A gzip-compressed Parquet file: Parquet needs random access, so decompress it first.
    #[error(
        "{}: gzip-compressed Parquet is not supported (Parquet needs random access); \
         decompress it first",
        path.display()
    )]
    GzippedParquet {
        /// The file.
        path: PathBuf,
    },
    /// A Parquet file whose columns are not a query log.
    #[error("{}: not a query-log Parquet schema: expected {expected}; found {found}", path.display())]
    ParquetSchema {
        /// The file.
        path: PathBuf,
        /// What a query log needs.
        expected: String,
        /// The columns the file has, with their types.
        found: String,
    },
    /// The Parquet file could not be opened or decoded.
    #[error("{}: unreadable Parquet: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet reader's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The Parquet file is corrupt in a way its reader does not report as an error: its
    /// metadata points outside the file, or decoding it failed an internal check.
    #[error("{}: corrupt Parquet: {detail}", path.display())]
    ParquetCorrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A record batch of the Parquet file could not be decoded.
    #[error("{}: unreadable Parquet data: {source}", path.display())]
    ParquetBatch {
        /// The file.
        path: PathBuf,
        /// The Arrow error.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// Writing a Parquet query log failed.
    #[error("{}: cannot write Parquet query log: {detail}", path.display())]
    ParquetWrite {
        /// The file being written.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
}
