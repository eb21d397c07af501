//! Builds a Tantivy index holding the documents of a ballot replica index: the same document
//! count, and each document holding the terms whose lists hold its id in the replica index
//! (`replica::doc_ids`, the replica builder's own generator, fed each term's `df` from the
//! replica's term directory). Tantivy numbers the documents itself (its indexing threads
//! interleave them), so its doc ids are a permutation of the replica's. A document's text is
//! its terms joined by spaces; [`crate::schema`] splits it on whitespace, so Tantivy's term
//! dictionary holds the replica's terms and nothing else.
//!
//! The replica index stores postings per term; Tantivy indexes documents, so the lists are
//! inverted in memory first (a compressed-row layout: one `u32` term id per posting plus one
//! offset per document, 4 bytes per posting in all, about 0.8 GB for the demo's 1M-document
//! index). The index is then written by Tantivy's own writer and merged into one segment, as
//! an index at rest in production usually is.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tantivy::indexer::NoMergePolicy;
use tantivy::{Index, IndexWriter, TantivyDocument};

use crate::schema::{schema, BODY};

/// What a build wrote.
#[derive(Clone, Debug)]
pub struct BuildSummary {
    /// Documents indexed (empty ones included, so doc counts match the replica's).
    pub docs: u32,
    /// Distinct terms.
    pub terms: u64,
    /// Postings (term, document) pairs.
    pub postings: u64,
    /// Bytes of the index directory's files.
    pub index_bytes: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Builds the Tantivy index of the replica index in `replica_index` into `out` (created;
/// refused if it already holds a Tantivy index), with `heap_bytes` of indexing memory split
/// over `threads` indexing threads.
pub fn build(
    replica_index: &Path,
    out: &Path,
    heap_bytes: usize,
    threads: usize,
) -> Result<BuildSummary> {
    let start = Instant::now();
    let dir = replica::index::open_directory(replica_index)
        .with_context(|| format!("opening the replica index {}", replica_index.display()))?;
    if let Some(shard) = dir.manifest.shard {
        // A shard's df counts its own documents, and the generator would spread them over
        // every document id: the Tantivy index would hold documents no shard has.
        bail!(
            "{} is shard {} of {} of a sharded replica index: build the Tantivy index from \
             the whole index (`ballot build-index` without --shards)",
            replica_index.display(),
            shard.index,
            shard.count
        );
    }
    let docs = dir.manifest.docs;
    let terms: Vec<(&str, u32)> = dir.terms().map(|(t, e)| (t, e.df)).collect();
    if terms.is_empty() {
        bail!("the replica index {} has no terms", replica_index.display());
    }
    let (offsets, doc_terms) = invert(&terms, docs);

    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let index = Index::create_in_dir(out, schema())
        .with_context(|| format!("creating a Tantivy index in {}", out.display()))?;
    let body = index.schema().get_field(BODY)?;
    let mut writer: IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(threads.max(1), heap_bytes)?;
    // One explicit merge at the end, and no background merge racing it.
    writer.set_merge_policy(Box::new(NoMergePolicy));
    let mut text = String::new();
    for d in 0..docs as usize {
        text.clear();
        for &t in &doc_terms[offsets[d] as usize..offsets[d + 1] as usize] {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(terms[t as usize].0);
        }
        let mut doc = TantivyDocument::default();
        doc.add_text(body, &text);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    let segments = index.searchable_segment_ids()?;
    if segments.len() > 1 {
        writer.merge(&segments).wait()?;
    }
    writer.wait_merging_threads()?;
    let index_bytes = directory_bytes(out)?;
    Ok(BuildSummary {
        docs,
        terms: terms.len() as u64,
        postings: doc_terms.len() as u64,
        index_bytes,
        elapsed: start.elapsed(),
    })
}

/// Per document, the ids (positions in `terms`) of the terms whose generated lists hold it:
/// `offsets` has `docs + 1` entries, document `d`'s terms are
/// `doc_terms[offsets[d]..offsets[d + 1]]`, in term order.
fn invert(terms: &[(&str, u32)], docs: u32) -> (Vec<u64>, Vec<u32>) {
    let mut offsets = vec![0u64; docs as usize + 1];
    for &(term, df) in terms {
        for d in replica::doc_ids(term, df, docs) {
            offsets[d as usize + 1] += 1;
        }
    }
    for d in 0..docs as usize {
        offsets[d + 1] += offsets[d];
    }
    let mut next = offsets.clone();
    let mut doc_terms = vec![0u32; offsets[docs as usize] as usize];
    for (id, &(term, df)) in terms.iter().enumerate() {
        for d in replica::doc_ids(term, df, docs) {
            let slot = &mut next[d as usize];
            doc_terms[*slot as usize] = id as u32;
            *slot += 1;
        }
    }
    (offsets, doc_terms)
}

/// Total bytes of the regular files directly in `dir` (a Tantivy index is flat).
pub fn directory_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversion_puts_every_generated_doc_id_under_its_term() {
        let terms = [("apple", 3u32), ("pear", 10), ("fig", 1)];
        let (offsets, doc_terms) = invert(&terms, 10);
        for (id, &(term, df)) in terms.iter().enumerate() {
            let holding: Vec<u32> = (0..10u32)
                .filter(|&d| {
                    doc_terms[offsets[d as usize] as usize..offsets[d as usize + 1] as usize]
                        .contains(&(id as u32))
                })
                .collect();
            let generated: Vec<u32> = replica::doc_ids(term, df, 10).collect();
            assert_eq!(holding, generated, "{term}");
        }
        assert_eq!(doc_terms.len(), 14);
    }

    #[test]
    fn a_shard_of_a_replica_index_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let terms = [("apple".to_owned(), 3u64), ("pear".to_owned(), 5)];
        replica::index::build_shards(tmp.path(), 10, terms, 2).unwrap();
        let shard = replica::index::shard_dir(tmp.path(), 1);
        let out = tmp.path().join("tantivy");
        let err = build(&shard, &out, 50_000_000, 1).unwrap_err().to_string();
        assert!(err.contains("is shard 1 of 2"), "{err}");
        assert!(!out.exists(), "nothing is written");
    }
}
