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
//!
//! **Shards: document partitioning.** A sharded build ([`build_shards`]) writes `S` indexes,
//! `shard-0` to `shard-{S-1}` ([`shard_dir`]); shard `s` holds the docs `d` with
//! `d % S == s`. Each term's ids are generated exactly as above and the shard keeps its own,
//! as global ids (the manifest's `docs` stays `N`, and it records the [`Shard`]), so the
//! shards' lists of a term are a partition of the unsharded list and an AND query's answer
//! is the union of the shards' answers (the document-partitioned index of Barroso, Dean &
//! Hölzle, "Web search for a planet", IEEE Micro 2003). A list's header holds the shard's
//! df; a term with no doc in a shard is left out of that shard's directory (an unknown term
//! answers nothing there, as its empty list would), so term ids differ between shards.
//! `sizes.parquet` holds the shard's stored bytes. Each shard is one pass over the
//! vocabulary with the memory bound above, so `S` shards generate every id `S` times.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use data::hash::{mix64, term_hash};
use data::sizes::SizeTable;

use super::format::{
    list_header, IndexError, Manifest, Shard, DIRECTORY_FILE, DIR_MAGIC, FORMAT_VERSION,
    MANIFEST_FILE, MAX_TERM_BYTES, POSTINGS_FILE, SIZES_FILE,
};
use crate::varint;

/// Name of the doc-id generator, recorded in the manifest.
pub const GENERATOR: &str = "stratified-splitmix64-v1";

/// Most shards [`build_shards`] writes.
pub const MAX_SHARDS: u32 = 64;

/// Bytes of the term directory's header (magic, version, term count).
const DIR_HEADER_LEN: usize = 16;

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
    /// The shard built, `None` for a whole index.
    pub shard: Option<Shard>,
}

/// Builds an index of `docs` documents in `dir` (created if needed) from `(term, df)` pairs.
/// Duplicate terms keep their first df; df is clamped to `docs`. Every term is in the
/// directory, even one of df 0.
pub fn build_index(
    dir: &Path,
    docs: u32,
    terms: impl IntoIterator<Item = (String, u64)>,
) -> Result<BuildSummary, IndexError> {
    let start = Instant::now();
    let terms = prepare(docs, terms)?;
    write_index(dir, docs, &terms, None, start)
}

/// Builds one shard of the index [`build_index`] would build from the same inputs, in `dir`
/// (see the module docs).
pub fn build_shard(
    dir: &Path,
    docs: u32,
    terms: impl IntoIterator<Item = (String, u64)>,
    shard: Shard,
) -> Result<BuildSummary, IndexError> {
    let start = Instant::now();
    shard.check().map_err(IndexError::Input)?;
    let terms = prepare(docs, terms)?;
    write_index(dir, docs, &terms, Some(shard), start)
}

/// The directory of shard `s` under `root`: `root/shard-<s>`.
pub fn shard_dir(root: &Path, s: u32) -> PathBuf {
    root.join(format!("shard-{s}"))
}

/// Builds all `shards` shards (1 to [`MAX_SHARDS`], at most `docs`) of the index of `docs`
/// documents, each in [`shard_dir`]`(root, s)`, one after the other, and returns their
/// summaries in shard order. Always writes the `shard-<s>` directories, even for one shard
/// (whose index is [`build_index`]'s without its df-0 terms); `root` itself gets no index.
pub fn build_shards(
    root: &Path,
    docs: u32,
    terms: impl IntoIterator<Item = (String, u64)>,
    shards: u32,
) -> Result<Vec<BuildSummary>, IndexError> {
    if !(1..=MAX_SHARDS).contains(&shards) {
        return Err(IndexError::Input(format!(
            "{shards} shards: the count must be between 1 and {MAX_SHARDS}"
        )));
    }
    if shards > docs {
        return Err(IndexError::Input(format!(
            "{shards} shards of {docs} documents would leave shards without documents"
        )));
    }
    let terms = prepare(docs, terms)?;
    (0..shards)
        .map(|s| {
            let shard = Shard {
                index: s,
                count: shards,
            };
            write_index(
                &shard_dir(root, s),
                docs,
                &terms,
                Some(shard),
                Instant::now(),
            )
        })
        .collect()
}

/// The build's terms: df clamped to `docs`, sorted, first of duplicates kept, checked.
fn prepare(
    docs: u32,
    terms: impl IntoIterator<Item = (String, u64)>,
) -> Result<Vec<(String, u32)>, IndexError> {
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
    Ok(terms)
}

/// Writes the index of `terms` (prepared) in `dir`: the whole index, or only `shard`'s docs.
fn write_index(
    dir: &Path,
    docs: u32,
    terms: &[(String, u32)],
    shard: Option<Shard>,
    start: Instant,
) -> Result<BuildSummary, IndexError> {
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
    // The header holds the term count, known at the end (a shard leaves terms out): a
    // placeholder now, outside the running checksum, rewritten in place at the end.
    directory
        .inner
        .write_all(&[0u8; DIR_HEADER_LEN])
        .map_err(IndexError::io(&dir_path))?;

    let mut sizes = Vec::with_capacity(terms.len());
    let mut list = Vec::new();
    let mut offset = 0u64;
    let (mut count, mut total_df, mut max_list) = (0u32, 0u64, 0u64);
    for (term, df) in terms {
        list.clear();
        list.extend_from_slice(&[0u8; 16]);
        let mut kept = 0u32;
        let mut prev = 0u32;
        for doc in doc_ids(term, *df, docs).filter(|&d| shard.is_none_or(|s| s.holds(d))) {
            varint::put(&mut list, if kept == 0 { doc } else { doc - prev });
            prev = doc;
            kept += 1;
        }
        if kept == 0 && shard.is_some() {
            continue;
        }
        let id = count;
        count += 1;
        let payload_len = u32::try_from(list.len() - 16).map_err(|_| {
            IndexError::Input(format!("list of {term:?} exceeds 4 GiB; use fewer --docs"))
        })?;
        list[..16].copy_from_slice(&list_header(id, kept, payload_len));
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
        e.extend_from_slice(&kept.to_le_bytes());
        e.extend_from_slice(&crc.to_le_bytes());
        directory.write_all(&e).map_err(IndexError::io(&dir_path))?;
        sizes.push((term.clone(), stored));
        offset += stored;
        total_df += u64::from(kept);
        max_list = max_list.max(stored);
    }
    postings
        .into_inner()
        .map_err(|e| IndexError::io(&postings_path)(e.into_error()))?
        .sync_all()
        .map_err(IndexError::io(&postings_path))?;
    let mut head = Vec::with_capacity(DIR_HEADER_LEN);
    head.extend_from_slice(&DIR_MAGIC);
    head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    head.extend_from_slice(&u64::from(count).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head);
    crc.combine(&directory.crc);
    let directory_crc32 = crc.finalize();
    let directory_bytes = DIR_HEADER_LEN as u64 + directory.len;
    let dir_io = IndexError::io(&dir_path);
    let mut file = directory
        .inner
        .into_inner()
        .map_err(|e| IndexError::io(&dir_path)(e.into_error()))?;
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.write_all(&head))
        .and_then(|()| file.sync_all())
        .map_err(dir_io)?;

    SizeTable::from_pairs(sizes).write_parquet(&dir.join(SIZES_FILE))?;

    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        docs,
        terms: u64::from(count),
        generator: GENERATOR.into(),
        postings_file: POSTINGS_FILE.into(),
        postings_bytes: offset,
        directory_file: DIRECTORY_FILE.into(),
        directory_bytes,
        directory_crc32,
        sizes_file: SIZES_FILE.into(),
        shard,
    };
    let json = serde_json::to_string_pretty(&manifest)
        .map_err(|e| IndexError::format(&manifest_path, e.to_string()))?;
    std::fs::write(&manifest_path, json + "\n").map_err(IndexError::io(&manifest_path))?;
    Ok(BuildSummary {
        terms: u64::from(count),
        docs,
        postings: total_df,
        postings_bytes: offset,
        max_list_bytes: max_list,
        elapsed: start.elapsed(),
        shard,
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

    use crate::cache::RamCache;
    use crate::index::format::LIST_HEADER_LEN;
    use crate::index::open_directory;
    use crate::query::Engine;
    use crate::store::{FlashStore, StoreOptions};

    const DOCS: u32 = 20_000;

    /// Terms from a single doc to every doc (sparse and dense lists), one of df 0 and one
    /// above `DOCS`.
    fn terms() -> Vec<(String, u64)> {
        let mut t: Vec<(String, u64)> = (0..30u64)
            .map(|i| (format!("t{i:02}"), 1 + (i * i * i * 7) % u64::from(DOCS)))
            .collect();
        t.extend([
            ("all".to_string(), u64::from(DOCS)),
            ("more".to_string(), 3 * u64::from(DOCS)),
            ("half".to_string(), u64::from(DOCS / 2)),
            ("zero".to_string(), 0),
        ]);
        t
    }

    fn engine(dir: &Path) -> Engine {
        let store = FlashStore::open(dir, StoreOptions::default()).unwrap();
        Engine::new(store, RamCache::new(eviction::EvictionKind::Lru, 1 << 20))
    }

    /// Every list of `store`'s index, by term.
    fn lists(store: &FlashStore) -> std::collections::BTreeMap<String, Vec<u32>> {
        let d = store.directory();
        d.terms()
            .map(|(t, _)| {
                let list = store.read(d.id(t).unwrap()).unwrap();
                (t.to_owned(), list.postings.to_vec())
            })
            .collect()
    }

    #[test]
    fn shards_partition_every_list_and_record_themselves() {
        let tmp = tempfile::tempdir().unwrap();
        let whole_dir = tmp.path().join("whole");
        let root = tmp.path().join("sharded");
        let whole = build_index(&whole_dir, DOCS, terms()).unwrap();
        assert_eq!(whole.shard, None);
        let shards = build_shards(&root, DOCS, terms(), 3).unwrap();
        assert_eq!(shards.len(), 3);

        let whole_store = FlashStore::open(&whole_dir, StoreOptions::default()).unwrap();
        let want = lists(&whole_store);
        let mut union: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
        let (mut postings, mut stored, mut entries) = (0u64, 0u64, 0u64);
        for (s, summary) in shards.iter().enumerate() {
            let s = s as u32;
            let dir = shard_dir(&root, s);
            assert_eq!(dir, root.join(format!("shard-{s}")));
            let shard = Shard::new(s, 3).unwrap();
            assert_eq!(summary.shard, Some(shard));
            let store = FlashStore::open(&dir, StoreOptions::default()).unwrap();
            let m = &store.directory().manifest;
            assert_eq!(
                (m.shard, m.docs, m.terms),
                (Some(shard), DOCS, summary.terms)
            );
            for (term, ids) in lists(&store) {
                // Only the shard's docs, never an empty list, df in the header and entry.
                assert!(!ids.is_empty() && ids.iter().all(|&d| d % 3 == s), "{term}");
                let e = store
                    .directory()
                    .entry(store.directory().id(&term).unwrap());
                assert_eq!(e.unwrap().df as usize, ids.len());
                union.entry(term).or_default().extend(ids);
            }
            let sizes = SizeTable::read_parquet(&dir.join(SIZES_FILE)).unwrap();
            let shard_bytes: u64 = sizes.sorted().iter().map(|&(_, b)| b).sum();
            assert_eq!(shard_bytes, summary.postings_bytes);
            assert_eq!(summary.postings_bytes, m.postings_bytes);
            postings += summary.postings;
            stored += shard_bytes;
            entries += summary.terms;
        }
        for ids in union.values_mut() {
            ids.sort_unstable();
        }
        // df 0 is in the whole index only, as an empty list.
        assert_eq!(want["zero"], Vec::<u32>::new());
        let nonempty: std::collections::BTreeMap<String, Vec<u32>> = want
            .into_iter()
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        assert_eq!(union, nonempty);
        assert_eq!(union["all"], (0..DOCS).collect::<Vec<_>>());
        assert_eq!(postings, whole.postings);

        // The shards store the same ids, each with a gap at least its unsharded one (so never
        // fewer varint bytes) and a header per (term, shard) holding it.
        let header = LIST_HEADER_LEN as u64;
        let whole_payload = whole.postings_bytes - header * whole.terms;
        let shard_payload = stored - header * entries;
        assert!(
            shard_payload >= whole_payload && shard_payload <= whole_payload * 11 / 10,
            "{shard_payload} vs {whole_payload}"
        );
    }

    #[test]
    fn merged_shard_answers_equal_the_whole_index() {
        let tmp = tempfile::tempdir().unwrap();
        let whole_dir = tmp.path().join("whole");
        let root = tmp.path().join("sharded");
        build_index(&whole_dir, DOCS, terms()).unwrap();
        build_shards(&root, DOCS, terms(), 4).unwrap();
        let whole = engine(&whole_dir);
        let shards: Vec<Engine> = (0..4).map(|s| engine(&shard_dir(&root, s))).collect();
        let queries = [
            "half all",
            "t29 t28",
            "t20 t25 half",
            "t15 t27 t29 all",
            "t01 t02",
            "t03 half",
            "t10 t12 more",
            "t05 zero",
            "t05 unknown",
            "all",
            "zero",
            "",
        ];
        let mut answered = 0;
        for q in queries {
            for k in [0, 10, 1000] {
                let want = whole.search(q, k).unwrap();
                let (mut total, mut ids) = (0u64, Vec::new());
                for e in &shards {
                    let a = e.search(q, k).unwrap();
                    assert_eq!(a.terms, want.terms);
                    total += a.total_hits;
                    ids.extend(a.doc_ids);
                }
                ids.sort_unstable();
                ids.truncate(k);
                assert_eq!(
                    (total, &ids),
                    (want.total_hits, &want.doc_ids),
                    "{q:?} k={k}"
                );
                if want.total_hits > k as u64 && k > 0 {
                    answered += 1;
                }
            }
        }
        // Enough queries have more hits than k for the merge to matter.
        assert!(answered >= 6, "{answered}");
    }

    #[test]
    fn manifests_without_a_shard_open_and_bad_shards_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let whole = tmp.path().join("whole");
        build_index(&whole, 100, [("a".to_string(), 10u64)]).unwrap();
        // An unsharded manifest is the one written before shards existed.
        let text = std::fs::read_to_string(whole.join(MANIFEST_FILE)).unwrap();
        assert!(!text.contains("shard"), "{text}");
        assert_eq!(open_directory(&whole).unwrap().manifest.shard, None);

        let root = tmp.path().join("sharded");
        build_shards(&root, 100, [("a".to_string(), 10u64)], 2).unwrap();
        let dir = shard_dir(&root, 1);
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let one_line: String = text.split_whitespace().collect();
        assert!(
            one_line.contains(r#""shard":{"index":1,"count":2}"#),
            "{text}"
        );
        assert_eq!(
            open_directory(&dir).unwrap().manifest.shard,
            Some(Shard { index: 1, count: 2 })
        );
        for bad in [r#""index": 2,"#, r#""index": 1, "extra": 0,"#] {
            std::fs::write(&path, text.replace(r#""index": 1,"#, bad)).unwrap();
            let err = open_directory(&dir).unwrap_err().to_string();
            assert!(err.contains("manifest.json"), "{err}");
        }

        let err = |r: Result<Vec<BuildSummary>, IndexError>| r.unwrap_err().to_string();
        let t = || [("a".to_string(), 1u64)];
        assert!(err(build_shards(&root, 100, t(), 0)).contains("between 1 and 64"));
        assert!(err(build_shards(&root, 100, t(), 65)).contains("between 1 and 64"));
        assert!(err(build_shards(&root, 3, t(), 4)).contains("without documents"));
        let bad = build_shard(&root, 100, t(), Shard { index: 2, count: 2 });
        assert!(bad.unwrap_err().to_string().contains("shard 2 of 2"));
    }
}
