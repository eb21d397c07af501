//! How big a voting table may be, and the checks the Parquet footer allows before anything is
//! decoded.
//!
//! A table is uploaded to a running balancer, so its file is untrusted: a few kilobytes of
//! dictionary-encoded Parquet can describe gigabytes of rows. [`TableLimits`] bounds what a
//! file may make the loader allocate; the loader checks each limit as early as the file lets
//! it (the footer's row counts and column-chunk sizes, then every page header, then each
//! dictionary, then each record batch before its rows are materialized), so rejecting a
//! hostile table costs about as much memory as loading a valid one of the same limits.

use std::fmt;
use std::path::Path;

use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;

use super::TableError;

/// Limits on a voting table. The defaults fit real tables with a wide margin: a table
/// learned from the AOL log holds 50k–150k terms, each voting for at most a few of up to 64
/// replicas, with terms of about 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLimits {
    /// Most rows (votes). Default 16 Mi: 256k terms voting for all of 64 replicas.
    pub max_rows: u64,
    /// Most distinct terms. Default 4 Mi.
    pub max_terms: u64,
    /// Longest term, in bytes. Default [`crate::tokenizer::MAX_TERM_BYTES`]: the tokenizer
    /// never produces a longer term, so a longer one can never be routed.
    pub max_term_bytes: usize,
    /// Most term bytes summed over all rows (what the loaded rows hold). Default 256 MiB.
    pub max_total_term_bytes: u64,
    /// Most bytes of uncompressed pages over the columns read (dictionaries included), as the
    /// footer declares them and as the page headers do. Default 1 GiB.
    pub max_decoded_bytes: u64,
    /// Largest uncompressed page, dictionary pages included. Default 64 MiB.
    pub max_page_bytes: u64,
    /// Largest Parquet footer (file metadata). Default 16 MiB.
    pub max_metadata_bytes: u64,
}

impl Default for TableLimits {
    fn default() -> Self {
        TableLimits {
            max_rows: 16 << 20,
            max_terms: 4 << 20,
            max_term_bytes: crate::tokenizer::MAX_TERM_BYTES,
            max_total_term_bytes: 256 << 20,
            max_decoded_bytes: 1 << 30,
            max_page_bytes: 64 << 20,
            max_metadata_bytes: 16 << 20,
        }
    }
}

/// Which limit a table broke (named after its [`TableLimits`] field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// [`TableLimits::max_rows`].
    Rows,
    /// [`TableLimits::max_terms`].
    Terms,
    /// [`TableLimits::max_term_bytes`].
    TermBytes,
    /// [`TableLimits::max_total_term_bytes`].
    TotalTermBytes,
    /// [`TableLimits::max_decoded_bytes`].
    DecodedBytes,
    /// [`TableLimits::max_page_bytes`].
    PageBytes,
    /// [`TableLimits::max_metadata_bytes`].
    MetadataBytes,
}

impl Limit {
    /// The [`TableLimits`] field this limit is.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Rows => "max_rows",
            Limit::Terms => "max_terms",
            Limit::TermBytes => "max_term_bytes",
            Limit::TotalTermBytes => "max_total_term_bytes",
            Limit::DecodedBytes => "max_decoded_bytes",
            Limit::PageBytes => "max_page_bytes",
            Limit::MetadataBytes => "max_metadata_bytes",
        }
    }

    /// The value of this limit in `limits`.
    pub fn value(self, limits: &TableLimits) -> u64 {
        match self {
            Limit::Rows => limits.max_rows,
            Limit::Terms => limits.max_terms,
            Limit::TermBytes => limits.max_term_bytes as u64,
            Limit::TotalTermBytes => limits.max_total_term_bytes,
            Limit::DecodedBytes => limits.max_decoded_bytes,
            Limit::PageBytes => limits.max_page_bytes,
            Limit::MetadataBytes => limits.max_metadata_bytes,
        }
    }

    /// The error for a table at `path` that broke this limit; `detail` says how.
    pub(super) fn error(self, path: &Path, limits: &TableLimits, detail: String) -> TableError {
        TableError::Limit {
            path: path.to_owned(),
            limit: self,
            max: self.value(limits),
            detail,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks the footer's length (the last 8 bytes of the file) before the footer is parsed.
/// A file too short to hold a footer is left to the Parquet reader, which names the problem.
pub(super) fn check_footer_len<R: ChunkReader>(
    reader: &R,
    path: &Path,
    limits: &TableLimits,
) -> Result<(), TableError> {
    let len = reader.len();
    if len < 8 {
        return Ok(());
    }
    let tail = reader
        .get_bytes(len - 8, 8)
        .map_err(|source| TableError::Parquet {
            path: path.to_owned(),
            source,
        })?;
    let Some(footer) = tail.get(..4) else {
        return Ok(());
    };
    let footer = u64::from(u32::from_le_bytes([
        footer[0], footer[1], footer[2], footer[3],
    ]));
    if footer > limits.max_metadata_bytes {
        return Err(Limit::MetadataBytes.error(
            path,
            limits,
            format!("the Parquet footer is {footer} bytes"),
        ));
    }
    Ok(())
}

/// Checks what the parsed footer declares: row counts and the uncompressed sizes of the
/// column chunks in `leaves` (the columns that will be read).
pub(super) fn check_metadata(
    meta: &ParquetMetaData,
    leaves: &[usize],
    path: &Path,
    limits: &TableLimits,
) -> Result<(), TableError> {
    let corrupt = |detail: String| TableError::Corrupt {
        path: path.to_owned(),
        detail: format!("footer: {detail}"),
    };
    let mut rows = 0u64;
    let mut decoded = 0u64;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let n = u64::try_from(group.num_rows())
            .map_err(|_| corrupt(format!("row group {g} has {} rows", group.num_rows())))?;
        rows = rows.saturating_add(n);
        for &leaf in leaves {
            let chunk = group.column(leaf);
            let size = u64::try_from(chunk.uncompressed_size()).map_err(|_| {
                corrupt(format!(
                    "row group {g}, column {}: uncompressed size {}",
                    chunk.column_path().string(),
                    chunk.uncompressed_size()
                ))
            })?;
            decoded = decoded.saturating_add(size);
        }
    }
    if rows > limits.max_rows {
        return Err(Limit::Rows.error(path, limits, format!("the footer declares {rows} rows")));
    }
    if decoded > limits.max_decoded_bytes {
        return Err(Limit::DecodedBytes.error(
            path,
            limits,
            format!("the footer declares {decoded} uncompressed bytes in the columns read"),
        ));
    }
    Ok(())
}
