//! The postings index on flash: its format ([`format`](mod@format)), the streaming builder ([`build`])
//! and loading its manifest and term directory at start-up ([`open_directory`]).
//!
//! An index may be one [`Shard`] of a document-partitioned collection ([`build_shards`]);
//! it opens and serves like any other (its doc ids are global, below the manifest's `docs`),
//! and the answers of the shards' replicas merge into the whole index's answer.
//!
//! Start-up checks everything that is cheap to check: the manifest parses and has the right
//! version (and a valid shard, if any), each file it names exists with exactly the recorded
//! length, the directory's CRC-32 matches, and every directory entry lies inside the postings
//! file. Every error names the offending file. Per-list checksums are verified on each flash
//! read instead (`store`), so a bad list costs one query, not the server.

pub mod build;
pub mod format;

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use format::{IndexError, Manifest, TermEntry, DIR_MAGIC, FORMAT_VERSION, MANIFEST_FILE};

pub use build::{build_shard, build_shards, shard_dir, MAX_SHARDS};
pub use format::Shard;

/// The loaded term directory: term → dense id → where its list lives.
#[derive(Debug)]
pub struct Directory {
    /// The manifest it was opened with.
    pub manifest: Manifest,
    /// Path of the postings file.
    pub postings_path: PathBuf,
    ids: FxHashMap<Box<str>, u32>,
    entries: Vec<TermEntry>,
}

impl Directory {
    /// The dense id of `term`, if the index has it.
    pub fn id(&self, term: &str) -> Option<u32> {
        self.ids.get(term).copied()
    }

    /// The entry of term `id`.
    pub fn entry(&self, id: u32) -> Option<&TermEntry> {
        self.entries.get(id as usize)
    }

    /// Every term with its entry, in term-id order (the terms' sorted order).
    pub fn terms(&self) -> impl Iterator<Item = (&str, &TermEntry)> + '_ {
        let mut by_id: Vec<(&str, u32)> = self.ids.iter().map(|(t, &id)| (&**t, id)).collect();
        by_id.sort_unstable_by_key(|&(_, id)| id);
        by_id
            .into_iter()
            .map(move |(t, id)| (t, &self.entries[id as usize]))
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no terms.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Opens and validates `dir`'s manifest and term directory.
pub fn open_directory(dir: &Path) -> Result<Directory, IndexError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&manifest_path).map_err(IndexError::io(&manifest_path))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| IndexError::format(&manifest_path, format!("bad manifest: {e}")))?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(IndexError::format(
            &manifest_path,
            format!(
                "format version {} (this replica reads {FORMAT_VERSION})",
                manifest.format_version
            ),
        ));
    }
    if let Some(shard) = manifest.shard {
        shard
            .check()
            .map_err(|e| IndexError::format(&manifest_path, format!("bad {e}")))?;
    }
    let postings_path = dir.join(&manifest.postings_file);
    check_len(&postings_path, manifest.postings_bytes)?;
    let dir_path = dir.join(&manifest.directory_file);
    check_len(&dir_path, manifest.directory_bytes)?;
    let bytes = std::fs::read(&dir_path).map_err(IndexError::io(&dir_path))?;
    let crc = crc32fast::hash(&bytes);
    if crc != manifest.directory_crc32 {
        return Err(IndexError::format(
            &dir_path,
            format!(
                "checksum {crc:#010x} does not match the manifest's {:#010x}",
                manifest.directory_crc32
            ),
        ));
    }
    let bad = |detail: &str| IndexError::format(&dir_path, detail.to_owned());
    let mut r = Reader {
        bytes: &bytes,
        pos: 0,
    };
    let header = r.take(16).ok_or_else(|| bad("truncated header"))?;
    let count = u64::from_le_bytes(header[8..16].try_into().unwrap_or_default());
    if header[0..4] != DIR_MAGIC || count != manifest.terms {
        return Err(bad("bad header or term count"));
    }
    let mut ids = FxHashMap::default();
    // Each entry takes at least 23 bytes: never trust the count for the allocation alone.
    let mut entries = Vec::with_capacity((count as usize).min(bytes.len() / 23));
    for id in 0..count {
        let entry_err = || bad(&format!("truncated or invalid entry {id}"));
        let tlen = r.u16().ok_or_else(entry_err)?;
        let term = r.take(usize::from(tlen)).ok_or_else(entry_err)?;
        let term = std::str::from_utf8(term).map_err(|_| entry_err())?;
        let offset = r.u64().ok_or_else(entry_err)?;
        let len = r.u32().ok_or_else(entry_err)?;
        let df = r.u32().ok_or_else(entry_err)?;
        let crc32 = r.u32().ok_or_else(entry_err)?;
        if offset
            .checked_add(u64::from(len))
            .is_none_or(|end| end > manifest.postings_bytes)
        {
            return Err(bad(&format!(
                "entry {id} ({term:?}) points past the postings file"
            )));
        }
        ids.insert(term.into(), id as u32);
        entries.push(TermEntry {
            offset,
            len,
            df,
            crc32,
        });
    }
    if r.pos != bytes.len() {
        return Err(bad("trailing bytes after the last entry"));
    }
    Ok(Directory {
        manifest,
        postings_path,
        ids,
        entries,
    })
}

fn check_len(path: &Path, expected: u64) -> Result<(), IndexError> {
    let len = std::fs::metadata(path).map_err(IndexError::io(path))?.len();
    if len != expected {
        return Err(IndexError::format(
            path,
            format!("{len} bytes, the manifest says {expected} (truncated or replaced?)"),
        ));
    }
    Ok(())
}

/// A little-endian cursor over the directory bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_then_open_round_trips_and_truncation_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let terms = vec![
            ("b".to_string(), 50u64),
            ("a".to_string(), 1000),
            ("c".into(), 0),
        ];
        let s = build::build_index(&dir, 1000, terms).unwrap();
        assert_eq!((s.terms, s.postings), (3, 1050));
        let d = open_directory(&dir).unwrap();
        assert_eq!((d.id("a"), d.id("b"), d.id("zz")), (Some(0), Some(1), None));
        assert_eq!(d.entry(0).unwrap().df, 1000);
        // df = N: one byte per gap plus the header.
        assert_eq!(d.entry(0).unwrap().len, 16 + 1000);
        let sizes = data::sizes::SizeTable::read_parquet(&dir.join("sizes.parquet")).unwrap();
        assert_eq!(sizes.get("a"), Some(1016));
        assert_eq!(sizes.get("c"), Some(16));

        let p = dir.join("postings.bin");
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(100).unwrap();
        let err = open_directory(&dir).unwrap_err().to_string();
        assert!(
            err.contains("postings.bin") && err.contains("truncated"),
            "{err}"
        );
        std::fs::remove_file(dir.join("manifest.json")).unwrap();
        let err = open_directory(&dir).unwrap_err().to_string();
        assert!(err.contains("manifest.json"), "{err}");
    }
}
