//! Opening input files: gzip-transparent buffered readers, chosen by magic bytes rather
//! than by file extension, so a renamed or extension-less file still reads correctly.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const BUF_BYTES: usize = 1 << 20;

/// Opens `path` for buffered reading, decompressing it if it starts with the gzip magic.
/// A truncated gzip stream surfaces as an `UnexpectedEof` error from the reader.
pub fn open_text(path: &Path) -> std::io::Result<Box<dyn BufRead + Send>> {
    let mut file = BufReader::with_capacity(BUF_BYTES, File::open(path)?);
    let head = file.fill_buf()?;
    if head.len() >= 2 && head[..2] == GZIP_MAGIC {
        Ok(Box::new(BufReader::with_capacity(
            BUF_BYTES,
            MultiGzDecoder::new(file),
        )))
    } else {
        Ok(Box::new(file))
    }
}

/// Reads a whole (possibly gzipped) file into memory.
pub fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    open_text(path)?.read_to_end(&mut out)?;
    Ok(out)
}

/// Strips a trailing `\n` or `\r\n`.
pub fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
