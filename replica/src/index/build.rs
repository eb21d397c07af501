//! The streaming index builder behind `ballot build-index`.
//!
//! Input: `(term, df)` pairs and the document count `N`. For each term, in sorted order
//! (its position becomes its dense term id), it generates `df` distinct sorted doc ids in
//! `[0, N)`, encodes them (`index::format`), appends the stored list to `postings.bin` and
//! its entry to `terms.bin`, then writes `sizes.parquet` and, last, `manifest.json` (an
//! interrupted build leaves no manifest, so it cannot be opened by mistake).
//!
//! Memory is bounded by the vocabulary (the term list and one directory entry per term) plus
//! one encoded list (about `N` bytes at most), whatever the total index size: the postings
//! are streamed to disk through a buffered writer and never held together.
//!
//! **Doc ids: stratified sampling.** `[0, N)` is cut into `df` consecutive strata
//! `[⌊iN/df⌋, ⌊(i+1)N/df⌋)` and one doc is drawn in each with a counter-based hash
//! (SplitMix64 of the term's hash and `i`). That yields exactly `df` distinct ids, already
//! sorted, in O(df) time with no memory and no rejection, for any `df` from 1 to `N` (at
//! `df = N` every stratum has one doc, so no complement trick is needed). Each doc is in a
//! term's list with probability `df/N`, independently across terms (different seeds), so two
//! terms share about `df1·df2/N` documents, as independent uniform samples would. Gaps stay
//! near `N/df`, which keeps the varint payload close to the size model's byte per doc for
//! frequent terms.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use data::hash::{mix64, term_hash};
use data::sizes::SizeTable;

use super::format::{
    list_header, IndexError, Manifest, DIRECTORY_FILE, DIR_MAGIC, FORMAT_VERSION, MANIFEST_FILE,
    MAX_TERM_BYTES, POSTINGS_FILE, SIZES_FILE,
};
use crate::varint;

/// Name of the doc-id generator, recorded in the manifest.
pub const GENERATOR: &str = "stratified-splitmix64-v1";

/// The `df` doc ids of `term` in an index of `docs` documents, sorted and distinct
/// (stratified sampling; see the module docs). `df` is clamped to `docs`.
pub fn doc_ids(term: &str, df: u32, docs: u32) -> impl Iterator<Item = u32> {
    let df = df.min(docs);
    let seed = term_hash(term);
    let n = u64::from(docs);
    let d = u64::from(df.max(1));
    (0..u64::from(df)).map(move |i| {
        let lo = i * n / d;
        let hi = (i + 1) * n / d;
        let r = mix64(seed ^ mix64(i.wrapping_add(0x9e37_79b9_7f4a_7c15)));
        // Multiply-shift range reduction into [0, hi - lo); hi > lo because df <= docs.
        (lo + ((u128::from(r) * u128::from(hi - lo)) >> 64) as u64) as u32
    })
}

/// What a build wrote.
#[derive(Clone, Debug)]
pub struct BuildSummary {
    /// Distinct terms.
    pub terms: u64,
    /// Documents.
    pub docs: u32,
    /// Sum of df over terms.
    pub postings: u64,
    /// Bytes of `postings.bin` (the sum of stored list bytes).
    pub postings_bytes: u64,
    /// Largest stored list.
    pub max_list_bytes: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Builds an index of `docs` documents in `dir` (created if needed) from `(term, df)` pairs.
/// Duplicate terms keep their first df; df is clamped to `docs`.
pub fn build_index(
    dir: &Path,
    docs: u32,
    terms: impl IntoIterator<Item = (String, u64)>,
) -> Result<BuildSummary, IndexError> {
    let start = Instant::now();
    if docs == 0 {
        return Err(IndexError::Input("--docs must be positive".into()));
    }
    let mut terms: Vec<(String, u32)> = terms
        .into_iter()
        .map(|(t, df)| (t, df.min(u64::from(docs)) as u32))
        .collect();
    terms.sort_by(|a, b| a.0.cmp(&b.0));
    terms.dedup_by(|b, a| a.0 == b.0);
    if terms.is_empty() {
        return Err(IndexError::Input("no terms".into()));
    }
    if let Some((t, _)) = terms
        .iter()
        .find(|(t, _)| t.is_empty() || t.len() > MAX_TERM_BYTES)
    {
        return Err(IndexError::Input(format!(
            "term of {} bytes (must be 1..={MAX_TERM_BYTES})",
            t.len()
        )));
    }
    std::fs::create_dir_all(dir).map_err(IndexError::io(dir))?;
    let postings_path = dir.join(POSTINGS_FILE);
    let dir_path = dir.join(DIRECTORY_FILE);
    let manifest_path = dir.join(MANIFEST_FILE);
    // A stale manifest must not describe the half-written files of this build.
    match std::fs::remove_file(&manifest_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(IndexError::io(&manifest_path)(e))
        }
        _ => {}
    }
    let mut postings = BufWriter::with_capacity(
        1 << 20,
        File::create(&postings_path).map_err(IndexError::io(&postings_path))?,
    );
    let mut directory = HashingWriter {
        inner: BufWriter::with_capacity(
            1 << 20,
            File::create(&dir_path).map_err(IndexError::io(&dir_path))?,
        ),
        crc: crc32fast::Hasher::new(),
        len: 0,
    };
    let dir_io = IndexError::io(&dir_path);
    let mut head = Vec::with_capacity(16);
    head.extend_from_slice(&DIR_MAGIC);
    head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    head.extend_from_slice(&(terms.len() as u64).to_le_bytes());
    directory.write_all(&head).map_err(dir_io)?;

    let mut sizes = Vec::with_capacity(terms.len());
    let mut list = Vec::new();
    let mut offset = 0u64;
    let (mut total_df, mut max_list) = (0u64, 0u64);
    for (id, (term, df)) in terms.iter().enumerate() {
        let id = id as u32;
        list.clear();
        list.extend_from_slice(&[0u8; 16]);
        let mut prev = 0u32;
        for (i, doc) in doc_ids(term, *df, docs).enumerate() {
            varint::put(&mut list, if i == 0 { doc } else { doc - prev });
            prev = doc;
        }
        let payload_len = u32::try_from(list.len() - 16).map_err(|_| {
            IndexError::Input(format!("list of {term:?} exceeds 4 GiB; use fewer --docs"))
        })?;
        list[..16].copy_from_slice(&list_header(id, *df, payload_len));
        let stored = list.len() as u32 as u64;
        let crc = crc32fast::hash(&list);
        postings
            .write_all(&list)
            .map_err(IndexError::io(&postings_path))?;
        let mut e = Vec::with_capacity(2 + term.len() + 20);
        e.extend_from_slice(&(term.len() as u16).to_le_bytes());
        e.extend_from_slice(term.as_bytes());
        e.extend_from_slice(&offset.to_le_bytes());
        e.extend_from_slice(&(stored as u32).to_le_bytes());
        e.extend_from_slice(&df.to_le_bytes());
        e.extend_from_slice(&crc.to_le_bytes());
        directory.write_all(&e).map_err(IndexError::io(&dir_path))?;
        sizes.push((term.clone(), stored));
        offset += stored;
        total_df += u64::from(*df);
        max_list = max_list.max(stored);
    }
    postings
        .into_inner()
        .map_err(|e| IndexError::io(&postings_path)(e.into_error()))?
        .sync_all()
        .map_err(IndexError::io(&postings_path))?;
    let directory_crc32 = directory.crc.clone().finalize();
    let directory_bytes = directory.len;
    directory
        .inner
        .into_inner()
        .map_err(|e| IndexError::io(&dir_path)(e.into_error()))?
        .sync_all()
        .map_err(IndexError::io(&dir_path))?;

    SizeTable::from_pairs(sizes).write_parquet(&dir.join(SIZES_FILE))?;

    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        docs,
        terms: terms.len() as u64,
        generator: GENERATOR.into(),
        postings_file: POSTINGS_FILE.into(),
        postings_bytes: offset,
        directory_file: DIRECTORY_FILE.into(),
        directory_bytes,
        directory_crc32,
        sizes_file: SIZES_FILE.into(),
    };
    let json = serde_json::to_string_pretty(&manifest)
        .map_err(|e| IndexError::format(&manifest_path, e.to_string()))?;
    std::fs::write(&manifest_path, json + "\n").map_err(IndexError::io(&manifest_path))?;
    Ok(BuildSummary {
        terms: terms.len() as u64,
        docs,
        postings: total_df,
        postings_bytes: offset,
        max_list_bytes: max_list,
        elapsed: start.elapsed(),
    })
}

/// A writer that checksums and counts what goes through it.
struct HashingWriter {
    inner: BufWriter<File>,
    crc: crc32fast::Hasher,
    len: u64,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_ids_are_exact_sorted_distinct_and_deterministic() {
        for (df, docs) in [
            (0, 10),
            (1, 1),
            (5, 10),
            (10, 10),
            (999, 1000),
            (7, 1_000_000),
        ] {
            let ids: Vec<u32> = doc_ids("term", df, docs).collect();
            assert_eq!(ids.len(), df as usize);
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            assert!(ids.iter().all(|&d| d < docs));
            assert_eq!(ids, doc_ids("term", df, docs).collect::<Vec<_>>());
        }
        // df above N is clamped; df = N is every document.
        assert_eq!(
            doc_ids("x", 20, 10).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        // Different terms get different samples.
        let a: Vec<u32> = doc_ids("a", 100, 1_000_000).collect();
        let b: Vec<u32> = doc_ids("b", 100, 1_000_000).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn overlap_is_close_to_independent_sampling() {
        let n = 1_000_000u32;
        let a: Vec<u32> = doc_ids("alpha", 200_000, n).collect();
        let b: Vec<u32> = doc_ids("beta", 300_000, n).collect();
        let mut common = 0;
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        // Expected 200k * 300k / 1M = 60k.
        assert!((58_000..62_000).contains(&common), "{common}");
    }
}
