//! A walk over the page headers of a Parquet column chunk before the `parquet` crate
//! decodes it, so that a corrupt or hostile file cannot make the reader reserve memory it
//! does not need.
//!
//! The `parquet` crate reserves a page's announced uncompressed size (an `i32`, up to
//! 2 GiB) before decompressing it; the fuzz tests found that one mutated varint in a page
//! header is enough. This walk reads each page header of a chunk (Thrift compact protocol,
//! Apache Thrift's `TCompactProtocol` specification; only fields 2 `uncompressed_page_size`
//! and 3 `compressed_page_size` of `PageHeader` are kept, everything else is skipped) and
//! checks that every page lies inside its chunk and announces at most [`MAX_PAGE_BYTES`].
//! It reads only the headers (seeking over page bodies) and every length it meets is
//! bounded by the bytes left in the chunk, so it allocates nothing in proportion to what
//! the file claims.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

/// The largest uncompressed page accepted. Writers use 1 MiB pages by default (this crate
/// writes 1 MiB pages too); dictionary pages of large vocabularies can be bigger.
pub const MAX_PAGE_BYTES: i64 = 256 << 20;

/// Thrift structs nested deeper than this are refused (a page header nests three deep).
const MAX_DEPTH: u32 = 16;

/// A Thrift compact-protocol reader over at most `limit` bytes.
struct Compact<R> {
    r: R,
    read: u64,
    limit: u64,
}

impl<R: BufRead> Compact<R> {
    fn left(&self) -> u64 {
        self.limit.saturating_sub(self.read)
    }

    fn byte(&mut self) -> Result<u8, String> {
        if self.left() == 0 {
            return Err("page header runs past the end of its column chunk".to_owned());
        }
        let mut b = [0u8];
        self.r
            .read_exact(&mut b)
            .map_err(|e| format!("cannot read a page header: {e}"))?;
        self.read += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint in a page header is longer than 10 bytes".to_owned())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// Skips `n` bytes, which must be inside the limit.
    fn skip_bytes(&mut self, n: u64) -> Result<(), String> {
        if n > self.left() {
            return Err("a field of a page header runs past its column chunk".to_owned());
        }
        let copied = io::copy(&mut (&mut self.r).take(n), &mut io::sink())
            .map_err(|e| format!("cannot read a page header: {e}"))?;
        if copied != n {
            return Err("the file ends inside a page header".to_owned());
        }
        self.read += n;
        Ok(())
    }

    /// A count of elements, each at least one byte, so at most the bytes left.
    fn count(&mut self, n: u64) -> Result<u64, String> {
        if n > self.left() {
            return Err(format!(
                "a page header announces {n} elements in fewer bytes"
            ));
        }
        Ok(n)
    }

    /// Skips one value of compact type `ty`.
    fn skip(&mut self, ty: u8, depth: u32) -> Result<(), String> {
        match ty {
            1 | 2 => Ok(()), // a boolean field: the value is in the type
            3 => self.byte().map(drop),
            4..=6 => self.varint().map(drop),
            7 => self.skip_bytes(8),
            8 => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let n = self.count(n)?;
                let elem = h & 0x0f;
                for _ in 0..n {
                    if matches!(elem, 1 | 2) {
                        self.byte()?; // booleans in lists take a byte each
                    } else {
                        self.skip(elem, depth)?;
                    }
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                let n = self.count(n)?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip(kv >> 4, depth)?;
                        self.skip(kv & 0x0f, depth)?;
                    }
                }
                Ok(())
            }
            12 => self.fields(depth + 1, &mut |_, _, c| c.skip_field()),
            t => Err(format!("unknown Thrift type {t} in a page header")),
        }
    }

    /// Walks the fields of a struct, calling `field(id, type, self)` for each; the callback
    /// must consume the value (e.g. [`Field::skip_field`]).
    fn fields(&mut self, depth: u32, field: &mut FieldVisitor<'_, R>) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("page header nested too deep".to_owned());
        }
        let mut last: i16 = 0;
        loop {
            let h = self.byte()?;
            if h == 0 {
                return Ok(());
            }
            let ty = h & 0x0f;
            let id = match h >> 4 {
                0 => i16::try_from(self.zigzag()?)
                    .map_err(|_| "a page header field id is out of range".to_owned())?,
                delta => last.wrapping_add(i16::from(delta)),
            };
            last = id;
            field(id, ty, &mut Field { c: self, ty, depth })?;
        }
    }
}

/// What [`Compact::fields`] calls for each field: `(id, type, field)`.
type FieldVisitor<'v, R> = dyn FnMut(i16, u8, &mut Field<'_, R>) -> Result<(), String> + 'v;

/// One field being visited.
struct Field<'a, R> {
    c: &'a mut Compact<R>,
    ty: u8,
    depth: u32,
}

impl<R: BufRead> Field<'_, R> {
    fn skip_field(&mut self) -> Result<(), String> {
        self.c.skip(self.ty, self.depth)
    }

    fn i32(&mut self) -> Result<i64, String> {
        if self.ty != 5 {
            return Err(format!(
                "a page size has Thrift type {} instead of i32",
                self.ty
            ));
        }
        self.c.zigzag()
    }
}

/// Checks every page of the column chunk at `start..start + len` of `file`: header and
/// body inside the chunk, sizes not negative, at most [`MAX_PAGE_BYTES`] uncompressed.
/// Returns the number of pages, or what is wrong.
pub(crate) fn check_chunk<F: Read + Seek>(file: F, start: u64, len: u64) -> Result<u64, String> {
    let mut r = BufReader::with_capacity(8 * 1024, file);
    let mut pos = 0u64;
    let mut pages = 0u64;
    while pos < len {
        r.seek(SeekFrom::Start(start + pos))
            .map_err(|e| format!("cannot seek to a page: {e}"))?;
        let mut c = Compact {
            r: &mut r,
            read: 0,
            limit: len - pos,
        };
        let (mut uncompressed, mut compressed) = (None, None);
        c.fields(0, &mut |id, _, f| match id {
            2 => f.i32().map(|v| uncompressed = Some(v)),
            3 => f.i32().map(|v| compressed = Some(v)),
            _ => f.skip_field(),
        })?;
        let header = c.read;
        let (Some(uncompressed), Some(compressed)) = (uncompressed, compressed) else {
            return Err(format!(
                "page {pages} at byte {}: a page header without its sizes",
                start + pos
            ));
        };
        if uncompressed < 0 || compressed < 0 {
            return Err(format!(
                "page {pages} at byte {}: negative size ({uncompressed} uncompressed, \
                 {compressed} compressed)",
                start + pos
            ));
        }
        if uncompressed > MAX_PAGE_BYTES {
            return Err(format!(
                "page {pages} at byte {} announces {uncompressed} bytes uncompressed, more than \
                 the {MAX_PAGE_BYTES} this reader accepts",
                start + pos
            ));
        }
        let end = pos + header + compressed as u64;
        if end > len {
            return Err(format!(
                "page {pages} at byte {} runs past the end of its column chunk",
                start + pos
            ));
        }
        pos = end;
        pages += 1;
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn varint(mut v: u64) -> Vec<u8> {
        let mut o = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                o.push(b);
                return o;
            }
            o.push(b | 0x80);
        }
    }

    /// A page header: type, sizes, a nested data-page header with a list and a binary,
    /// then `body` bytes.
    fn page(uncompressed: i64, body: &[u8]) -> Vec<u8> {
        let zz = |v: i64| varint(((v << 1) ^ (v >> 63)) as u64);
        let mut h = vec![0x15];
        h.extend(zz(0)); // 1: type
        h.push(0x15);
        h.extend(zz(uncompressed)); // 2
        h.push(0x15);
        h.extend(zz(body.len() as i64)); // 3
        h.push(0x2c); // 5: struct (delta 2)
        h.push(0x15);
        h.extend(zz(10)); // 1: num_values
        h.push(0x19); // 2: list
        h.push(0x25); // 2 elements of i32
        h.extend(zz(1));
        h.extend(zz(2));
        h.push(0x18); // 3: binary
        h.extend(varint(3));
        h.extend(b"abc");
        h.push(0x11); // 4: bool true
        h.push(0); // end of struct
        h.push(0); // end of page header
        h.extend(body);
        h
    }

    #[test]
    fn walks_pages_and_bounds_them() {
        let mut chunk = page(100, b"0123456789");
        chunk.extend(page(5, b"xy"));
        let n = chunk.len() as u64;
        let mut file = b"PAR1".to_vec();
        file.extend(&chunk);
        assert_eq!(check_chunk(Cursor::new(&file), 4, n), Ok(2));
        let e = check_chunk(Cursor::new(&file), 4, n - 1).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
        let huge = page(i64::from(i32::MAX), b"z");
        let e = check_chunk(Cursor::new(&huge), 0, huge.len() as u64).unwrap_err();
        assert!(e.contains("more than"), "{e}");
        let neg = page(-1, b"z");
        let e = check_chunk(Cursor::new(&neg), 0, neg.len() as u64).unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = check_chunk(Cursor::new(&[0x19u8, 0xf5, 0xff, 0xff, 0x7f][..]), 0, 5).unwrap_err();
        assert!(e.contains("elements"), "{e}");
        assert!(
            check_chunk(Cursor::new(&[0x1cu8; 64][..]), 0, 64).is_err(),
            "deep nesting"
        );
    }
}
