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
//! The `PageHeader` reader is written here because the `parquet` crate keeps its own
//! private; it reads only the few fields the checks need and skips the rest.
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

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::Encoding;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;

use super::limits::{Limit, TableLimits};
use super::TableError;

/// `PageType` values (parquet.thrift).
const DATA_PAGE: i32 = 0;
const INDEX_PAGE: i32 = 1;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;
/// `Encoding` values (parquet.thrift) the checks name.
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE_DICTIONARY: i32 = 8;

/// Thrift compact-protocol type ids.
const T_BOOL_TRUE: u8 = 1;
const T_BOOL_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;
/// Deepest struct nesting accepted in a page header (real headers nest 3 deep).
const MAX_DEPTH: u32 = 16;

/// Refuses a field id seen before in one struct: no writer repeats a field, and refusing
/// it means the checks and the Parquet reader can never read one header two ways.
#[derive(Default)]
struct Once(u64);

impl Once {
    fn check(&mut self, id: i16) -> Parse<()> {
        if !(0..64).contains(&id) {
            return Ok(());
        }
        let bit = 1u64 << id;
        if self.0 & bit != 0 {
            return Err(format!("field {id} repeated in a page header"));
        }
        self.0 |= bit;
        Ok(())
    }
}

/// The fields of a `PageHeader` the checks use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PageHeader {
    kind: i32,
    uncompressed: i32,
    compressed: i32,
    /// Values in a data page or entries in a dictionary page.
    num_values: i32,
    /// Encoding of the values (`-1`: not given).
    encoding: i32,
    /// `DataPageHeaderV2` only: nulls, and the bytes of the repetition and definition
    /// levels (stored uncompressed before the values).
    num_nulls: i32,
    levels_bytes: i64,
}

/// A Thrift compact-protocol reader that counts the bytes it consumes.
struct Thrift<R> {
    input: R,
    consumed: u64,
    depth: u32,
}

type Parse<T> = Result<T, String>;

impl<R: Read> Thrift<R> {
    fn byte(&mut self) -> Parse<u8> {
        let mut b = [0u8; 1];
        self.input
            .read_exact(&mut b)
            .map_err(|_| "page header runs past the column chunk".to_owned())?;
        self.consumed += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Parse<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("malformed varint in a page header".into())
    }

    fn zigzag(&mut self) -> Parse<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn i32(&mut self) -> Parse<i32> {
        i32::try_from(self.zigzag()?).map_err(|_| "i32 out of range in a page header".into())
    }

    fn skip_bytes(&mut self, n: u64) -> Parse<()> {
        let copied = std::io::copy(&mut (&mut self.input).take(n), &mut std::io::sink())
            .map_err(|e| e.to_string())?;
        if copied != n {
            return Err("page header runs past the column chunk".into());
        }
        self.consumed += n;
        Ok(())
    }

    /// Skips one value of compact type `ty`. A bool inside a list, set or map is one byte.
    fn skip(&mut self, ty: u8, in_container: bool) -> Parse<()> {
        match ty {
            T_BOOL_TRUE | T_BOOL_FALSE if in_container => self.byte().map(drop),
            T_BOOL_TRUE | T_BOOL_FALSE => Ok(()),
            T_BYTE => self.byte().map(drop),
            T_I16 | T_I32 | T_I64 => self.varint().map(drop),
            T_DOUBLE => self.skip_bytes(8),
            T_BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            T_LIST | T_SET => {
                let head = self.byte()?;
                let size = match head >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let elem = head & 0x0f;
                // Every element takes at least one byte, so a lying size ends at the chunk.
                for _ in 0..size {
                    self.nested(|t| t.skip(elem, true))?;
                }
                Ok(())
            }
            T_MAP => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                for _ in 0..size {
                    self.nested(|t| {
                        t.skip(kinds >> 4, true)?;
                        t.skip(kinds & 0x0f, true)
                    })?;
                }
                Ok(())
            }
            T_STRUCT => self.nested(|t| {
                t.fields(|t, _, ty| t.skip(ty, false))?;
                Ok(())
            }),
            other => Err(format!("unknown Thrift type {other} in a page header")),
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Parse<()>) -> Parse<()> {
        if self.depth >= MAX_DEPTH {
            return Err("page header nests too deep".into());
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// Reads a struct's fields up to its stop byte, handing each `(id, type)` to `field`,
    /// which must consume the value.
    fn fields(&mut self, mut field: impl FnMut(&mut Self, i16, u8) -> Parse<()>) -> Parse<()> {
        let mut last = 0i16;
        loop {
            let head = self.byte()?;
            if head == 0 {
                return Ok(());
            }
            let ty = head & 0x0f;
            let id = match head >> 4 {
                0 => i16::try_from(self.zigzag()?)
                    .map_err(|_| "field id out of range in a page header".to_owned())?,
                delta => last
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| "field id out of range in a page header".to_owned())?,
            };
            last = id;
            field(self, id, ty)?;
        }
    }

    /// An i32 field, or an error if the field has another type.
    fn i32_field(&mut self, ty: u8) -> Parse<i32> {
        if ty != T_I32 {
            return Err(format!(
                "page header field of type {ty} where an i32 belongs"
            ));
        }
        self.i32()
    }

    /// Reads a `PageHeader`.
    fn page_header(&mut self) -> Parse<PageHeader> {
        let mut h = PageHeader {
            kind: -1,
            uncompressed: -1,
            compressed: -1,
            num_values: 0,
            encoding: -1,
            num_nulls: 0,
            levels_bytes: 0,
        };
        let mut seen = [false; 3];
        let mut once = Once::default();
        self.fields(|t, id, ty| {
            once.check(id)?;
            match (id, ty) {
                (1, _) => {
                    h.kind = t.i32_field(ty)?;
                    seen[0] = true;
                }
                (2, _) => {
                    h.uncompressed = t.i32_field(ty)?;
                    seen[1] = true;
                }
                (3, _) => {
                    h.compressed = t.i32_field(ty)?;
                    seen[2] = true;
                }
                // DataPageHeader, DictionaryPageHeader, DataPageHeaderV2: num_values is field
                // 1 of each; the encoding is field 2 of the first two and 4 of the third,
                // whose fields 2, 5 and 6 are its nulls and level lengths.
                (5 | 7 | 8, T_STRUCT) => {
                    let v2 = id == 8;
                    let encoding_field = if v2 { 4 } else { 2 };
                    let mut once = Once::default();
                    t.nested(|t| {
                        t.fields(|t, sub, ty| {
                            once.check(sub)?;
                            match (sub, v2) {
                                (1, _) => h.num_values = t.i32_field(ty)?,
                                (s, _) if s == encoding_field => h.encoding = t.i32_field(ty)?,
                                (2, true) => h.num_nulls = t.i32_field(ty)?,
                                (5 | 6, true) => h.levels_bytes += i64::from(t.i32_field(ty)?),
                                _ => t.skip(ty, false)?,
                            }
                            Ok(())
                        })
                    })?;
                }
                _ => t.skip(ty, false)?,
            }
            Ok(())
        })?;
        if seen != [true; 3] {
            return Err("page header lacks its type or sizes".into());
        }
        Ok(h)
    }
}

/// What the page walk of one column chunk found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ChunkPages {
    /// Uncompressed bytes of all its pages.
    pub uncompressed: u64,
    /// Whether its first page is a dictionary page.
    pub has_dictionary: bool,
}

/// Walks the page headers of `chunk` (from a file of `file_len` bytes), checking each page's
/// declared sizes against `limits` and its data pages with [`check_data_page`].
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
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset());
    let (start, len) = match (u64::try_from(start), u64::try_from(chunk.compressed_size())) {
        (Ok(s), Ok(l)) if s.checked_add(l).is_some_and(|end| end <= file_len) => (s, l),
        _ => {
            return Err(corrupt(format!(
                "it claims bytes {start}..+{} of a {file_len}-byte file",
                chunk.compressed_size()
            )))
        }
    };
    let end = start + len;
    let mut pos = start;
    let mut out = ChunkPages::default();
    let mut index = 0u64;
    while pos < end {
        let input = reader
            .get_read(pos)
            .map_err(|source| TableError::Parquet {
                path: path.to_owned(),
                source,
            })?
            .take(end - pos);
        let mut thrift = Thrift {
            input,
            consumed: 0,
            depth: 0,
        };
        let h = thrift
            .page_header()
            .map_err(|e| corrupt(format!("page {index}: {e}")))?;
        let (Ok(uncompressed), Ok(compressed)) =
            (u64::try_from(h.uncompressed), u64::try_from(h.compressed))
        else {
            return Err(corrupt(format!("page {index} has a negative size")));
        };
        pos = pos
            .saturating_add(thrift.consumed)
            .saturating_add(compressed);
        if pos > end {
            return Err(corrupt(format!("page {index} runs past the column chunk")));
        }
        if uncompressed > limits.max_page_bytes {
            return Err(Limit::PageBytes.error(
                path,
                limits,
                format!("column `{column}` has a page of {uncompressed} bytes uncompressed"),
            ));
        }
        match h.kind {
            DICTIONARY_PAGE if index == 0 => {
                check_count(&h).map_err(|e| corrupt(format!("page {index} {e}")))?;
                out.has_dictionary = true;
            }
            DICTIONARY_PAGE => {
                return Err(corrupt(format!(
                    "page {index} is a dictionary page (only the first page may be)"
                )))
            }
            DATA_PAGE | DATA_PAGE_V2 => check_data_page(&h, out.has_dictionary)
                .map_err(|e| corrupt(format!("page {index} {e}")))?,
            INDEX_PAGE => {}
            other => return Err(corrupt(format!("page {index} has unknown type {other}"))),
        }
        out.uncompressed = out.uncompressed.saturating_add(uncompressed);
        index += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn zigzag(v: i64, out: &mut Vec<u8>) {
        varint(((v << 1) ^ (v >> 63)) as u64, out);
    }

    fn parse(bytes: &[u8]) -> Parse<(PageHeader, u64)> {
        let mut t = Thrift {
            input: bytes,
            consumed: 0,
            depth: 0,
        };
        let h = t.page_header()?;
        Ok((h, t.consumed))
    }

    /// A dictionary page header: type, sizes, a crc, then DictionaryPageHeader{1, 2, 3}.
    fn dictionary_header(uncompressed: i64, entries: i64) -> Vec<u8> {
        let mut b = vec![0x15];
        zigzag(DICTIONARY_PAGE.into(), &mut b);
        b.push(0x15);
        zigzag(uncompressed, &mut b);
        b.push(0x15);
        zigzag(10, &mut b);
        b.push(0x15); // crc, skipped
        zigzag(-7, &mut b);
        b.push(0x3c); // field 7 (delta 3), struct
        b.push(0x15);
        zigzag(entries, &mut b);
        b.push(0x15);
        zigzag(0, &mut b);
        b.push(0x11); // is_sorted = true
        b.push(0);
        b.push(0);
        b
    }

    #[test]
    fn reads_the_fields_it_needs_and_skips_the_rest() {
        let bytes = dictionary_header(30_000, 1);
        let (h, used) = parse(&bytes).expect("header");
        assert_eq!(used, bytes.len() as u64);
        assert_eq!(
            h,
            PageHeader {
                kind: DICTIONARY_PAGE,
                uncompressed: 30_000,
                compressed: 10,
                num_values: 1,
                encoding: PLAIN,
                num_nulls: 0,
                levels_bytes: 0,
            }
        );
    }

    #[test]
    fn refuses_truncated_and_nested_headers() {
        let bytes = dictionary_header(1 << 30, 1);
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A struct nested 10,000 deep in a field the checks skip (4: the crc's id).
        let mut deep = vec![0x4c];
        deep.extend(vec![0x1c; 9_999]);
        deep.extend(vec![0; 10_000]);
        let err = parse(&deep).unwrap_err();
        assert!(err.contains("too deep"), "{err}");
        // A list claiming 2^60 elements ends with the input.
        let mut list = vec![0x49, 0xf5];
        varint(1 << 60, &mut list);
        assert!(parse(&list).is_err());
    }
}
