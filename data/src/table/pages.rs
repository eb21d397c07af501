//! Page-level checks of a voting table, made before the Arrow reader decodes a byte.
//!
//! The Parquet reader trusts each page header: it allocates (and, for Snappy, zero-fills)
//! the uncompressed size the header declares, and a dictionary page lets a few bytes of
//! indices repeat a long value millions of times. So the loader walks every page header of
//! the column chunks it will read ([Parquet format][format]: a page is a Thrift
//! compact-protocol `PageHeader` followed by `compressed_page_size` bytes), checks each
//! page's declared sizes against [`TableLimits`], and then decodes each `term` dictionary
//! page (now of bounded size) to check that no entry is longer than a term may be.
//!
//! The walk itself (the Thrift `PageHeader` reader, sizes not negative, every page inside
//! its chunk) is [`crate::parquet_guard`]'s, shared with the query-log reader; the checks
//! here are the table's own, made on the headers it yields.
//!
//! Data pages must be PLAIN or dictionary-encoded (what ballot's writer and the defaults
//! of arrow-rs and pyarrow produce). The delta encodings are refused: DELTA_BYTE_ARRAY lets
//! each value repeat the previous one's bytes, so, like a dictionary, a small page can
//! expand far beyond its size, and the DELTA_BINARY_PACKED decoder of `parquet` 60 divides
//! by zero on a header with a zero block size. Two more panics of that reader, found by
//! fuzzing, are turned into errors naming the page: a page (dictionary pages too) declaring
//! no values but holding bytes (the PLAIN byte-array decoder divides by zero), and a
//! dictionary-encoded data page in a chunk without a dictionary page.
//!
//! [format]: https://parquet.apache.org/docs/file-format/data-pages/

use std::path::Path;
use std::sync::Arc;

use parquet::basic::Encoding;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;

use super::limits::{Limit, TableLimits};
use super::TableError;
use crate::parquet_guard::page_type::{DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE, INDEX_PAGE};
use crate::parquet_guard::{self, PageHeader, PageWalkError};

/// `Encoding` values (parquet.thrift) the checks name.
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE_DICTIONARY: i32 = 8;

type Parse<T> = Result<T, String>;

/// What the page walk of one column chunk found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ChunkPages {
    /// Uncompressed bytes of all its pages.
    pub uncompressed: u64,
    /// Whether its first page is a dictionary page.
    pub has_dictionary: bool,
}

/// Walks the page headers of `chunk` (from a file of `file_len` bytes) with
/// [`parquet_guard::pages`], checking each page's declared sizes against `limits` and its
/// data pages with [`check_data_page`].
pub(super) fn walk_chunk<R: ChunkReader>(
    reader: &R,
    file_len: u64,
    chunk: &ColumnChunkMetaData,
    path: &Path,
    limits: &TableLimits,
) -> Result<ChunkPages, TableError> {
    let column = chunk.column_path().string();
    let corrupt = |detail: String| TableError::Corrupt {
        path: path.to_owned(),
        detail: format!("column chunk `{column}`: {detail}"),
    };
    let (start, len) = parquet_guard::chunk_range(chunk, file_len).map_err(corrupt)?;
    let mut out = ChunkPages::default();
    for page in parquet_guard::pages(reader, start, len) {
        let page = page.map_err(|e| match e {
            PageWalkError::Read { source, .. } => TableError::Parquet {
                path: path.to_owned(),
                source,
            },
            e @ PageWalkError::Corrupt { .. } => corrupt(e.to_string()),
        })?;
        let index = page.index;
        if page.uncompressed > limits.max_page_bytes {
            return Err(Limit::PageBytes.error(
                path,
                limits,
                format!(
                    "column `{column}` has a page of {} bytes uncompressed",
                    page.uncompressed
                ),
            ));
        }
        let h = &page.header;
        match h.kind {
            DICTIONARY_PAGE if index == 0 => {
                check_count(h).map_err(|e| corrupt(format!("page {index} {e}")))?;
                out.has_dictionary = true;
            }
            DICTIONARY_PAGE => {
                return Err(corrupt(format!(
                    "page {index} is a dictionary page (only the first page may be)"
                )))
            }
            DATA_PAGE | DATA_PAGE_V2 => check_data_page(h, out.has_dictionary)
                .map_err(|e| corrupt(format!("page {index} {e}")))?,
            INDEX_PAGE => {}
            other => return Err(corrupt(format!("page {index} has unknown type {other}"))),
        }
        out.uncompressed = out.uncompressed.saturating_add(page.uncompressed);
    }
    Ok(out)
}

/// Checks a data page's header: an accepted encoding, a dictionary to go with dictionary
/// encoding, a value count that fits, and (v2) nulls and level lengths that fit.
fn check_data_page(h: &PageHeader, has_dictionary: bool) -> Parse<()> {
    match h.encoding {
        PLAIN => {}
        PLAIN_DICTIONARY | RLE_DICTIONARY if has_dictionary => {}
        PLAIN_DICTIONARY | RLE_DICTIONARY => {
            return Err("is dictionary-encoded but the chunk has no dictionary page".into())
        }
        other => {
            return Err(format!(
                "has encoding {other}; voting tables accept PLAIN and dictionary pages \
                 (0, 2 and 8)"
            ))
        }
    }
    check_count(h)?;
    if h.kind == DATA_PAGE_V2 {
        let values = i64::from(h.num_values) - i64::from(h.num_nulls);
        let value_bytes = i64::from(h.uncompressed) - h.levels_bytes;
        if h.num_nulls < 0 || values < 0 || h.levels_bytes < 0 || value_bytes < 0 {
            return Err("has inconsistent null counts or level lengths".into());
        }
        if values == 0 && value_bytes > 0 {
            return Err("holds value bytes but declares only nulls".into());
        }
    }
    Ok(())
}

/// Checks a page's value count: not negative, and not 0 with bytes to decode (on which the
/// PLAIN byte-array decoder of `parquet` 60 divides by zero, dictionary pages included).
fn check_count(h: &PageHeader) -> Parse<()> {
    if h.num_values < 0 || (h.num_values == 0 && h.uncompressed > 0) {
        return Err(format!(
            "declares {} values in {} bytes",
            h.num_values, h.uncompressed
        ));
    }
    Ok(())
}

/// Decodes the dictionary page of the `term` column chunk `chunk` (its size already checked
/// by [`walk_chunk`]) and checks every entry: at most `max_term_bytes` long, at most
/// `max_terms` entries.
pub(super) fn check_term_dictionary<R: ChunkReader + 'static>(
    reader: &Arc<R>,
    chunk: &ColumnChunkMetaData,
    rows: usize,
    path: &Path,
    limits: &TableLimits,
) -> Result<(), TableError> {
    let pq = |source| TableError::Parquet {
        path: path.to_owned(),
        source,
    };
    let corrupt = |detail: &str| TableError::Corrupt {
        path: path.to_owned(),
        detail: format!("`term` dictionary: {detail}"),
    };
    let mut pages = SerializedPageReader::new(Arc::clone(reader), chunk, rows, None).map_err(pq)?;
    let Some(Page::DictionaryPage {
        buf,
        num_values,
        encoding,
        ..
    }) = pages.get_next_page().map_err(pq)?
    else {
        return Err(corrupt("the first page is not the dictionary"));
    };
    if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
        return Err(corrupt(&format!("encoding {encoding} (expected PLAIN)")));
    }
    if u64::from(num_values) > limits.max_terms {
        return Err(Limit::Terms.error(
            path,
            limits,
            format!("a `term` dictionary holds {num_values} entries"),
        ));
    }
    // PLAIN byte arrays: a 4-byte little-endian length, then the bytes.
    let mut rest: &[u8] = &buf;
    for entry in 0..num_values {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(corrupt(&format!("entry {entry} is cut off")));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > limits.max_term_bytes {
            return Err(Limit::TermBytes.error(
                path,
                limits,
                format!("`term` dictionary entry {entry} is {len} bytes"),
            ));
        }
        let Some(tail) = tail.get(len..) else {
            return Err(corrupt(&format!("entry {entry} is cut off")));
        };
        rest = tail;
    }
    Ok(())
}
