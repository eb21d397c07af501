//! One guard for reading untrusted Parquet, shared by the voting-table loader
//! ([`crate::table`]) and the query-log reader (the `querylog` crate): a walk over the page
//! headers of a column chunk made before the `parquet` crate decodes a byte of it, and a
//! wrapper that turns a panic of the decoder into an error.
//!
//! **Page walk.** The `parquet` crate trusts each page header: it reserves (and, for
//! Snappy, zero-fills) the uncompressed size a header announces, an `i32` of up to 2 GiB,
//! and the fuzz tests found that one mutated varint is enough. [`pages`] reads each
//! `PageHeader` of a chunk ([Parquet format][format]: a Thrift compact-protocol struct,
//! Apache Thrift's `TCompactProtocol` specification, followed by `compressed_page_size`
//! bytes) and yields the fields the checks need ([`PageHeader`]), skipping everything else
//! and seeking over page bodies. It refuses a header that is cut off, nests deeper than
//! [`MAX_DEPTH`], repeats a field, lacks its type or sizes, has a size of the wrong Thrift
//! type or a negative one, or a page that does not end inside its chunk. Every length it
//! meets is bounded by the bytes left in the chunk, so it allocates nothing in proportion
//! to what the file claims. What a page may announce is the caller's limit: the table
//! loader adds its own stricter checks (encodings, value counts, dictionary entries) on the
//! headers this walk yields, the log reader a bound on the page size. The `PageHeader`
//! reader is written here because the `parquet` crate keeps its own private.
//!
//! **Decoder panics.** The `parquet` and `arrow` decoders assert some invariants of the
//! data instead of returning errors (an over-long varint in RLE-encoded levels, offsets out
//! of bounds, a dictionary page missing: found by fuzzing), which no header check can see.
//! [`catch_decoder_panic`] runs a read and returns such a panic's message as an error;
//! everything the read allocated is dropped by the unwind. (With `panic = "abort"` such a
//! file would abort the process instead.) The panic still reaches the process's panic
//! hook, which prints it to stderr; a library never replaces that hook, but a binary may
//! opt in to silence the caught ones with [`quiet_decoder_panics`] (process-wide).
//!
//! [format]: https://parquet.apache.org/docs/file-format/data-pages/

use std::cell::Cell;
use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;

/// `PageType` values (parquet.thrift).
pub mod page_type {
    /// A data page (v1).
    pub const DATA_PAGE: i32 = 0;
    /// An index page.
    pub const INDEX_PAGE: i32 = 1;
    /// A dictionary page.
    pub const DICTIONARY_PAGE: i32 = 2;
    /// A data page (v2).
    pub const DATA_PAGE_V2: i32 = 3;
}

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

/// Deepest struct and container nesting accepted in a page header (real headers nest 3
/// deep).
pub const MAX_DEPTH: u32 = 16;

/// The fields of a Parquet `PageHeader` the guards check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageHeader {
    /// The page type ([`page_type`]).
    pub kind: i32,
    /// `uncompressed_page_size`.
    pub uncompressed: i32,
    /// `compressed_page_size`: the bytes of the page after its header.
    pub compressed: i32,
    /// Values in a data page or entries in a dictionary page (0 when not given).
    pub num_values: i32,
    /// Encoding of the values (`-1`: not given).
    pub encoding: i32,
    /// `DataPageHeaderV2` only: nulls.
    pub num_nulls: i32,
    /// `DataPageHeaderV2` only: the bytes of the repetition and definition levels (stored
    /// uncompressed before the values).
    pub levels_bytes: i64,
}

type Parse<T> = Result<T, String>;

/// Refuses a field id seen before in one struct: no writer repeats a field, and refusing
/// it means the checks and the Parquet reader can never read one header two ways.
#[derive(Default)]
struct Seen(u64);

impl Seen {
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

/// A Thrift compact-protocol reader over at most `limit` bytes that counts the bytes it
/// consumes.
struct Thrift<R> {
    input: R,
    consumed: u64,
    limit: u64,
    depth: u32,
}

impl<R: Read> Thrift<R> {
    fn left(&self) -> u64 {
        self.limit.saturating_sub(self.consumed)
    }

    fn byte(&mut self) -> Parse<u8> {
        if self.left() == 0 {
            return Err("page header runs past the end of its column chunk".into());
        }
        let mut b = [0u8; 1];
        self.input
            .read_exact(&mut b)
            .map_err(|_| "the file ends inside a page header".to_owned())?;
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
        Err("a varint in a page header is longer than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Parse<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// Skips `n` bytes, which must lie inside the limit.
    fn skip_bytes(&mut self, n: u64) -> Parse<()> {
        if n > self.left() {
            return Err("a field of a page header runs past its column chunk".into());
        }
        let copied = std::io::copy(&mut (&mut self.input).take(n), &mut std::io::sink())
            .map_err(|e| format!("cannot read a page header: {e}"))?;
        if copied != n {
            return Err("the file ends inside a page header".into());
        }
        self.consumed += n;
        Ok(())
    }

    /// A count of container elements, each at least one byte, so at most the bytes left.
    fn count(&mut self, n: u64) -> Parse<u64> {
        if n > self.left() {
            return Err(format!(
                "a page header announces {n} elements in fewer bytes"
            ));
        }
        Ok(n)
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
                let size = self.count(size)?;
                let elem = head & 0x0f;
                for _ in 0..size {
                    self.nested(|t| t.skip(elem, true))?;
                }
                Ok(())
            }
            T_MAP => {
                let size = self.varint()?;
                let size = self.count(size)?;
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
            T_STRUCT => self.nested(|t| t.fields(|t, _, ty| t.skip(ty, false))),
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

    /// The i32 field `name`, or an error if the field has another type.
    fn i32_field(&mut self, ty: u8, name: &str) -> Parse<i32> {
        if ty != T_I32 {
            return Err(format!(
                "`{name}` of a page header has Thrift type {ty} instead of i32"
            ));
        }
        i32::try_from(self.zigzag()?)
            .map_err(|_| format!("`{name}` of a page header is out of range for i32"))
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
        let mut seen = Seen::default();
        let mut required = [false; 3];
        self.fields(|t, id, ty| {
            seen.check(id)?;
            match (id, ty) {
                (1, _) => {
                    h.kind = t.i32_field(ty, "type")?;
                    required[0] = true;
                }
                (2, _) => {
                    h.uncompressed = t.i32_field(ty, "uncompressed_page_size")?;
                    required[1] = true;
                }
                (3, _) => {
                    h.compressed = t.i32_field(ty, "compressed_page_size")?;
                    required[2] = true;
                }
                // DataPageHeader, DictionaryPageHeader, DataPageHeaderV2: num_values is field
                // 1 of each; the encoding is field 2 of the first two and 4 of the third,
                // whose fields 2, 5 and 6 are its nulls and level lengths.
                (5 | 7 | 8, T_STRUCT) => {
                    let v2 = id == 8;
                    let encoding_field = if v2 { 4 } else { 2 };
                    let mut seen = Seen::default();
                    t.nested(|t| {
                        t.fields(|t, sub, ty| {
                            seen.check(sub)?;
                            match (sub, v2) {
                                (1, _) => h.num_values = t.i32_field(ty, "num_values")?,
                                (s, _) if s == encoding_field => {
                                    h.encoding = t.i32_field(ty, "encoding")?
                                }
                                (2, true) => h.num_nulls = t.i32_field(ty, "num_nulls")?,
                                (5 | 6, true) => {
                                    let n = t.i32_field(ty, "levels_byte_length")?;
                                    h.levels_bytes += i64::from(n);
                                }
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
        if required != [true; 3] {
            return Err("a page header without its type or sizes".into());
        }
        Ok(h)
    }
}

/// Reads one `PageHeader` from `input`, consuming at most `limit` bytes; returns it with
/// the bytes it took.
pub fn read_page_header<R: Read>(input: R, limit: u64) -> Result<(PageHeader, u64), String> {
    let mut t = Thrift {
        input,
        consumed: 0,
        limit,
        depth: 0,
    };
    let h = t.page_header()?;
    Ok((h, t.consumed))
}

/// Where a column chunk's pages lie, `(start, len)` in bytes of a file of `file_len`
/// bytes, from the footer's metadata: the chunk must lie inside the file, and its sizes and
/// value count must not be negative (the `parquet` reader asserts these, panicking, or
/// reads past the end).
pub fn chunk_range(chunk: &ColumnChunkMetaData, file_len: u64) -> Result<(u64, u64), String> {
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset());
    let len = chunk.compressed_size();
    let range = match (u64::try_from(start), u64::try_from(len)) {
        (Ok(s), Ok(l)) if s.checked_add(l).is_some_and(|end| end <= file_len) => Some((s, l)),
        _ => None,
    };
    match range {
        Some(r) if chunk.data_page_offset() >= 0 => {
            if chunk.uncompressed_size() < 0 || chunk.num_values() < 0 {
                return Err(format!(
                    "the footer declares {} values and {} bytes uncompressed",
                    chunk.num_values(),
                    chunk.uncompressed_size()
                ));
            }
            Ok(r)
        }
        _ => Err(format!(
            "bytes {start} to {start}+{len} are not inside the file ({file_len} bytes)"
        )),
    }
}

/// One page found by [`pages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// 0-based position of the page in its chunk.
    pub index: u64,
    /// Where its header starts in the file.
    pub offset: u64,
    /// The header's fields.
    pub header: PageHeader,
    /// `header.uncompressed`, checked not negative.
    pub uncompressed: u64,
    /// `header.compressed`, checked not negative.
    pub compressed: u64,
}

/// Why the walk of a chunk stopped.
#[derive(Debug, thiserror::Error)]
pub enum PageWalkError {
    /// The page header is malformed, or the page does not fit in its chunk.
    #[error("page {index} at byte {offset}: {detail}")]
    Corrupt {
        /// 0-based position of the page in its chunk.
        index: u64,
        /// Where its header starts in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file could not be read there.
    #[error("page {index} at byte {offset}: cannot read it: {source}")]
    Read {
        /// 0-based position of the page in its chunk.
        index: u64,
        /// Where its header starts in the file.
        offset: u64,
        /// The reader's error.
        #[source]
        source: ParquetError,
    },
}

/// The pages of the column chunk at `start..start + len` of `reader`, in order (see the
/// module docs for what is checked); the walk ends after the first error.
pub fn pages<R: ChunkReader>(reader: &R, start: u64, len: u64) -> Pages<'_, R> {
    Pages {
        reader,
        pos: start,
        end: start.saturating_add(len),
        index: 0,
        failed: false,
    }
}

/// The iterator of [`pages`].
pub struct Pages<'r, R> {
    reader: &'r R,
    pos: u64,
    end: u64,
    index: u64,
    failed: bool,
}

impl<R: ChunkReader> Pages<'_, R> {
    fn step(&mut self) -> Result<Page, PageWalkError> {
        let (index, offset) = (self.index, self.pos);
        let corrupt = |detail: String| PageWalkError::Corrupt {
            index,
            offset,
            detail,
        };
        let input = self
            .reader
            .get_read(offset)
            .map_err(|source| PageWalkError::Read {
                index,
                offset,
                source,
            })?;
        let (header, header_len) = read_page_header(input, self.end - offset).map_err(corrupt)?;
        let (Ok(uncompressed), Ok(compressed)) = (
            u64::try_from(header.uncompressed),
            u64::try_from(header.compressed),
        ) else {
            return Err(corrupt(format!(
                "negative size ({} uncompressed, {} compressed)",
                header.uncompressed, header.compressed
            )));
        };
        let next = offset.saturating_add(header_len).saturating_add(compressed);
        if next > self.end {
            return Err(corrupt("runs past the end of its column chunk".into()));
        }
        self.pos = next;
        self.index += 1;
        Ok(Page {
            index,
            offset,
            header,
            uncompressed,
            compressed,
        })
    }
}

impl<R: ChunkReader> Iterator for Pages<'_, R> {
    type Item = Result<Page, PageWalkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let page = self.step();
        self.failed = page.is_err();
        Some(page)
    }
}

thread_local! {
    /// Set while this thread runs inside [`catch_decoder_panic`].
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Restores [`DECODING`] when a guarded scope ends, however it ends.
struct Decoding {
    was: bool,
}

impl Decoding {
    fn enter() -> Decoding {
        Decoding {
            was: DECODING.with(|d| d.replace(true)),
        }
    }
}

impl Drop for Decoding {
    fn drop(&mut self) {
        DECODING.with(|d| d.set(self.was));
    }
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "an internal check failed".to_owned())
}

/// Runs `f` (a read of a Parquet file), returning a panic inside it as `Err` with the
/// panic's message. `f` should own what it reads into: a panic may leave anything it
/// borrows mutably half-updated. Nesting is allowed.
pub fn catch_decoder_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let _scope = Decoding::enter();
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panic_text(payload.as_ref()))
}

/// **Process-wide, for binaries only.** Installs (once) a panic hook that stays silent for
/// a panic raised inside [`catch_decoder_panic`] (on that thread: it is returned as an
/// error there) and hands every other panic to the hook that was installed before. A
/// binary that reads untrusted Parquet calls it at startup, so that a corrupt file prints
/// one error instead of a panic message and then the error; a library never calls it, and
/// without it the caught panics are printed by the default hook and still returned as
/// errors.
pub fn quiet_decoder_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

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
        read_page_header(bytes, bytes.len() as u64)
    }

    /// A dictionary page header: type, sizes, a crc, then DictionaryPageHeader{1, 2, 3}.
    fn dictionary_header(uncompressed: i64, entries: i64) -> Vec<u8> {
        let mut b = vec![0x15];
        zigzag(page_type::DICTIONARY_PAGE.into(), &mut b);
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

    /// A data page header with its sizes and a nested data-page header holding fields the
    /// walk skips (a list, a binary, a bool), then `body`.
    fn page(uncompressed: i64, body: &[u8]) -> Vec<u8> {
        let mut h = vec![0x15];
        zigzag(0, &mut h); // 1: type
        h.push(0x15);
        zigzag(uncompressed, &mut h); // 2
        h.push(0x15);
        zigzag(body.len() as i64, &mut h); // 3
        h.push(0x2c); // 5: struct (delta 2)
        h.push(0x15);
        zigzag(10, &mut h); // 1: num_values
        h.push(0x15);
        zigzag(0, &mut h); // 2: encoding
        h.push(0x49); // 6: list (delta 4)
        h.push(0x25); // 2 elements of i32
        zigzag(1, &mut h);
        zigzag(2, &mut h);
        h.push(0x18); // 7: binary
        varint(3, &mut h);
        h.extend(b"abc");
        h.push(0x11); // 8: bool true
        h.push(0); // end of struct
        h.push(0); // end of page header
        h.extend(body);
        h
    }

    fn walk(file: &[u8], start: u64, len: u64) -> Result<Vec<Page>, String> {
        let file = Bytes::copy_from_slice(file);
        pages(&file, start, len)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reads_the_fields_it_needs_and_skips_the_rest() {
        let bytes = dictionary_header(30_000, 1);
        let (h, used) = parse(&bytes).expect("header");
        assert_eq!(used, bytes.len() as u64);
        assert_eq!(
            h,
            PageHeader {
                kind: page_type::DICTIONARY_PAGE,
                uncompressed: 30_000,
                compressed: 10,
                num_values: 1,
                encoding: 0,
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
        // A list claiming 2^60 elements is refused at once.
        let mut list = vec![0x49, 0xf5];
        varint(1 << 60, &mut list);
        let err = parse(&list).unwrap_err();
        assert!(err.contains("elements"), "{err}");
        // A repeated field.
        // A repeated field (field 1, then field 1 again in the long form).
        let twice = [0x15, 0x00, 0x05, 0x02, 0x00, 0x00];
        assert!(parse(&twice).unwrap_err().contains("repeated"));
        // A size of the wrong Thrift type.
        let err = parse(&[0x15, 0x00, 0x16, 0x02, 0x00]).unwrap_err();
        assert!(
            err.contains("`uncompressed_page_size` of a page header has Thrift type 6"),
            "{err}"
        );
    }

    #[test]
    fn walks_pages_and_bounds_them() {
        let mut chunk = page(100, b"0123456789");
        chunk.extend(page(5, b"xy"));
        let n = chunk.len() as u64;
        let mut file = b"PAR1".to_vec();
        file.extend(&chunk);
        let found = walk(&file, 4, n).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].index, found[0].offset), (0, 4));
        assert_eq!((found[0].uncompressed, found[0].compressed), (100, 10));
        assert_eq!(found[1].header.num_values, 10);
        let e = walk(&file, 4, n - 1).unwrap_err();
        assert!(e.starts_with("page 1 at byte"), "{e}");
        assert!(e.contains("past the end"), "{e}");
        let neg = page(-1, b"z");
        let e = walk(&neg, 0, neg.len() as u64).unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = walk(&[0x49u8, 0xf5, 0xff, 0xff, 0x7f], 0, 5).unwrap_err();
        assert!(e.contains("elements"), "{e}");
        assert!(walk(&[0x1cu8; 64], 0, 64).is_err(), "deep nesting");
        // A chunk announced past the end of the file cuts the header short.
        let e = walk(&chunk[..3], 0, 64).unwrap_err();
        assert!(e.contains("ends inside a page header"), "{e}");
    }

    #[test]
    fn a_caught_panic_is_its_message_and_the_scope_is_restored() {
        assert_eq!(catch_decoder_panic(|| 7), Ok(7));
        let e = catch_decoder_panic(|| -> u8 { panic!("offset + len out of bounds") });
        assert_eq!(e, Err("offset + len out of bounds".to_owned()));
        let n = 3;
        let e = catch_decoder_panic(|| -> u8 { panic!("index {n} out of bounds") });
        assert_eq!(e, Err("index 3 out of bounds".to_owned()));
        let nested = catch_decoder_panic(|| {
            let inner = catch_decoder_panic(|| -> u8 { panic!("inner") });
            (inner, DECODING.with(Cell::get))
        });
        assert_eq!(nested, Ok((Err("inner".to_owned()), true)));
        assert!(!DECODING.with(Cell::get));
    }
}
