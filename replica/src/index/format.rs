//! The on-flash index format: one postings file, one term directory, one manifest.
//!
//! Layout of `INDEX_DIR`:
//!
//! - `postings.bin`: the lists back to back, in term-id order. A stored list is a 16-byte
//!   header (`b"BLPL"`, term id u32, df u32, payload length u32, little endian) followed by
//!   the payload: the sorted doc ids, delta-coded (first id, then each gap) as LEB128
//!   varints, the classic d-gap + variable-byte compression of inverted indexes
//!   (Zobel & Moffat, "Inverted files for text search engines", 2006). The header is the
//!   `16` of the size model's `16 + df` bytes, and a list's *stored bytes* (header plus
//!   payload) are what the RAM cache accounts and what `sizes.parquet` records.
//! - `terms.bin`: the term directory. A header (`b"BLTD"`, version u32, term count u64),
//!   then per term in sorted order (its position is its dense term id): term length u16,
//!   the UTF-8 term, offset u64, stored length u32, df u32, CRC-32 of the stored list u32.
//! - `manifest.json`: the format version, document count, file names and byte lengths, and
//!   the CRC-32 of the directory, so a truncated or swapped file is caught at start-up; for
//!   one shard of a document-partitioned index, also its [`Shard`] (absent otherwise, so an
//!   index written before shards existed reads the same).
//! - `sizes.parquet`: `(term, bytes)` with every term's stored bytes, for `train`/`eval`.
//!
//! A shard's index has the same layout: its lists hold global doc ids (below the manifest's
//! `docs`, the whole collection's count), only those of the shard, and its directory only the
//! terms with at least one doc in the shard (`index::build`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::postings::{Postings, PostingsBuilder};
use crate::varint;

/// Magic of a stored postings list.
pub const LIST_MAGIC: [u8; 4] = *b"BLPL";
/// Magic of the term directory.
pub const DIR_MAGIC: [u8; 4] = *b"BLTD";
/// Bytes of a stored list's header.
pub const LIST_HEADER_LEN: usize = 16;
/// Version written to the manifest and the directory.
pub const FORMAT_VERSION: u32 = 1;
/// File names inside the index directory.
pub const POSTINGS_FILE: &str = "postings.bin";
/// The term directory's file name.
pub const DIRECTORY_FILE: &str = "terms.bin";
/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The size table's file name.
pub const SIZES_FILE: &str = "sizes.parquet";
/// Longest term the directory can hold (its length is a u16).
pub const MAX_TERM_BYTES: usize = u16::MAX as usize;

/// Why an index could not be built, opened or read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is structurally wrong (truncated, bad magic, mismatching manifest, ...).
    #[error("{path}: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The size table could not be written.
    #[error(transparent)]
    Sizes(#[from] data::sizes::SizesError),
    /// The build's inputs are invalid.
    #[error("invalid index input: {0}")]
    Input(String),
}

impl IndexError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
        move |source| IndexError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn format(path: &Path, detail: impl Into<String>) -> IndexError {
        IndexError::Format {
            path: path.to_owned(),
            detail: detail.into(),
        }
    }
}

/// `manifest.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Documents in the index: every doc id is below this.
    pub docs: u32,
    /// Number of terms.
    pub terms: u64,
    /// The doc-id generator (see `index::build`).
    pub generator: String,
    /// Postings file name (relative to the index directory).
    pub postings_file: String,
    /// Its exact length in bytes.
    pub postings_bytes: u64,
    /// Directory file name.
    pub directory_file: String,
    /// Its exact length in bytes.
    pub directory_bytes: u64,
    /// CRC-32 of the whole directory file.
    pub directory_crc32: u32,
    /// Size table file name.
    pub sizes_file: String,
    /// The part of a document-partitioned index this is; absent for a whole index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

/// One part of a document-partitioned index: the docs `d` with `d % count == index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// This shard, below `count`.
    pub index: u32,
    /// Number of shards, at least 1.
    pub count: u32,
}

impl Shard {
    /// Shard `index` of `count`, checked.
    pub fn new(index: u32, count: u32) -> Result<Shard, IndexError> {
        let shard = Shard { index, count };
        shard.check().map_err(IndexError::Input)?;
        Ok(shard)
    }

    /// Whether `doc` belongs to this shard.
    #[inline]
    pub fn holds(self, doc: u32) -> bool {
        doc % self.count == self.index
    }

    /// `Err` with the reason when `count` is 0 or `index` is not below it.
    pub(crate) fn check(self) -> Result<(), String> {
        if self.count == 0 || self.index >= self.count {
            return Err(format!(
                "shard {} of {} (the count must be at least 1 and the index below it)",
                self.index, self.count
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

/// Where one term's list lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermEntry {
    /// Offset of the stored list in the postings file.
    pub offset: u64,
    /// Stored bytes (header + payload).
    pub len: u32,
    /// Document frequency (number of doc ids).
    pub df: u32,
    /// CRC-32 of the stored bytes.
    pub crc32: u32,
}

/// The 16-byte header of a stored list.
pub fn list_header(term_id: u32, df: u32, payload_len: u32) -> [u8; LIST_HEADER_LEN] {
    let mut h = [0u8; LIST_HEADER_LEN];
    h[0..4].copy_from_slice(&LIST_MAGIC);
    h[4..8].copy_from_slice(&term_id.to_le_bytes());
    h[8..12].copy_from_slice(&df.to_le_bytes());
    h[12..16].copy_from_slice(&payload_len.to_le_bytes());
    h
}

/// Why a stored list failed verification.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorruptList {
    /// The checksum does not match the directory's.
    #[error("checksum mismatch (directory {expected:#010x}, read {actual:#010x})")]
    Checksum {
        /// The value the directory records.
        expected: u32,
        /// The value computed from the bytes read.
        actual: u32,
    },
    /// The header disagrees with the directory.
    #[error("header mismatch: {0}")]
    Header(String),
    /// The payload does not decode to `df` strictly increasing ids below `docs`.
    #[error("bad payload: {0}")]
    Payload(String),
}

/// Verifies a stored list (checksum, header, payload: `df` strictly increasing ids below
/// `docs`) and returns it in its cached form (compressed, with a skip table).
pub fn decode_list(
    bytes: &[u8],
    term_id: u32,
    entry: &TermEntry,
    docs: u32,
) -> Result<Postings, CorruptList> {
    let actual = crc32fast::hash(bytes);
    if actual != entry.crc32 {
        return Err(CorruptList::Checksum {
            expected: entry.crc32,
            actual,
        });
    }
    if bytes.len() < LIST_HEADER_LEN || bytes.len() != entry.len as usize {
        return Err(CorruptList::Header(format!(
            "{} bytes, directory says {}",
            bytes.len(),
            entry.len
        )));
    }
    let word = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let (id, df, plen) = (word(4), word(8), word(12));
    if bytes[0..4] != LIST_MAGIC
        || id != term_id
        || df != entry.df
        || plen as usize != bytes.len() - LIST_HEADER_LEN
    {
        return Err(CorruptList::Header(format!(
            "magic/id/df/len {:?}/{id}/{df}/{plen}, expected term {term_id} df {}",
            &bytes[0..4],
            entry.df
        )));
    }
    let payload = &bytes[LIST_HEADER_LEN..];
    let mut out = PostingsBuilder::new(df, docs);
    let mut count = 0u64;
    let mut pos = 0usize;
    let mut prev: u64 = 0;
    while pos < payload.len() {
        let start = pos;
        let v = u64::from(
            varint::read(payload, &mut pos).map_err(|e| CorruptList::Payload(e.to_string()))?,
        );
        let doc = prev + v;
        if (count > 0 && v == 0) || doc >= u64::from(docs) {
            return Err(CorruptList::Payload(format!(
                "doc id {doc} out of order or >= {docs}"
            )));
        }
        out.push(doc as u32, start);
        count += 1;
        prev = doc;
    }
    if count != u64::from(df) {
        return Err(CorruptList::Payload(format!(
            "{count} ids, header says {df}"
        )));
    }
    Ok(out.finish(payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(term_id: u32, ids: &[u32]) -> (Vec<u8>, TermEntry) {
        let mut payload = Vec::new();
        let mut prev = 0;
        for (i, &d) in ids.iter().enumerate() {
            varint::put(&mut payload, if i == 0 { d } else { d - prev });
            prev = d;
        }
        let mut bytes = list_header(term_id, ids.len() as u32, payload.len() as u32).to_vec();
        bytes.extend_from_slice(&payload);
        let entry = TermEntry {
            offset: 0,
            len: bytes.len() as u32,
            df: ids.len() as u32,
            crc32: crc32fast::hash(&bytes),
        };
        (bytes, entry)
    }

    #[test]
    fn lists_round_trip_and_corruption_is_caught() {
        let ids = [0, 1, 127, 128, 16_384, 2_000_000, 4_000_000_000];
        let (bytes, entry) = encode(7, &ids);
        assert_eq!(
            decode_list(&bytes, 7, &entry, u32::MAX).unwrap().to_vec(),
            ids
        );
        assert!(matches!(
            decode_list(&bytes, 8, &entry, u32::MAX),
            Err(CorruptList::Header(_))
        ));
        assert!(matches!(
            decode_list(&bytes, 7, &entry, 1000),
            Err(CorruptList::Payload(_))
        ));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_list(&bad, 7, &entry, u32::MAX).is_err(), "byte {i}");
        }
        let (empty, e) = encode(0, &[]);
        assert_eq!(empty.len(), LIST_HEADER_LEN);
        assert!(decode_list(&empty, 0, &e, 10).unwrap().is_empty());
        assert_eq!(
            decode_list(&bytes, 7, &entry, u32::MAX).unwrap(),
            Postings::from_ids(&ids, u32::MAX)
        );
    }
}
