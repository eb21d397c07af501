//! Query evaluation on a Tantivy index read through the kernel's page cache (mapped, or
//! with `pread`: [`crate::directory`]), so every postings byte comes from the page cache or,
//! on a miss, from the block device.
//!
//! A query is tokenized by ballot's tokenizer (`data::tokenizer`, what the balancer and its
//! shadow caches see) and becomes a disjunction of term queries; the collector is the top
//! `k` by BM25 together with the count of matches, so every matching document is visited and
//! each term's whole postings list is read, as ballot's replica reads it (Tantivy's top-k
//! alone would skip blocks by block-max WAND, and a count alone of one term would read no
//! postings at all).
//!
//! Read-ahead is off by default (`MADV_RANDOM` on the mapping, `POSIX_FADV_RANDOM` on files
//! read with `pread`): a miss reads the pages the list touches and nothing around them, so
//! the device bytes the kernel counts are those pages. `--readahead kernel` leaves the
//! kernel's read-ahead on. The term dictionary is held in memory by default, so the page
//! cache holds postings only.

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde::Serialize;
use tantivy::collector::{Count, TopDocs};
use tantivy::directory::{Advice, MmapDirectory};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{Index, IndexReader, ReloadPolicy, Term};

use crate::directory::{Dictionary, IndexFiles, PostingsIo};
use crate::schema::BODY;

/// Most results a query may ask for.
pub const MAX_HITS: usize = 1000;

/// Read-ahead on the index's files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Readahead {
    /// `MADV_RANDOM` / `POSIX_FADV_RANDOM`: a miss reads its pages only.
    #[default]
    Off,
    /// `MADV_NORMAL` / `POSIX_FADV_NORMAL`: the kernel's read-ahead.
    Kernel,
}

/// One result.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Hit {
    /// BM25 score.
    pub score: f32,
    /// Segment ordinal and doc id within it.
    pub id: (u32, u32),
}

/// A query's answer.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    /// Documents matching any term.
    pub num_hits: usize,
    /// The best `k`, best first.
    pub hits: Vec<Hit>,
}

/// An open index.
pub struct Engine {
    reader: IndexReader,
    field: Field,
}

impl Engine {
    /// Opens the index in `dir` (written by [`crate::build`]: one text field [`BODY`]), its
    /// term dictionary where `dictionary` says, its postings read as `postings` says.
    pub fn open(
        dir: &Path,
        readahead: Readahead,
        dictionary: Dictionary,
        postings: PostingsIo,
    ) -> Result<Engine> {
        let (mapped, read) = match readahead {
            Readahead::Off => (Advice::Random, libc::POSIX_FADV_RANDOM),
            Readahead::Kernel => (Advice::Normal, libc::POSIX_FADV_NORMAL),
        };
        let mmap = MmapDirectory::open_with_madvice(dir, mapped)
            .with_context(|| format!("opening {}", dir.display()))?;
        let files = IndexFiles::open(dir, mmap, dictionary, postings, read)?;
        let index = Index::open(files)
            .with_context(|| format!("{} is not a readable Tantivy index", dir.display()))?;
        let field = index
            .schema()
            .get_field(BODY)
            .with_context(|| format!("{}: no field {BODY:?}", dir.display()))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Engine { reader, field })
    }

    /// The top `k` (1 to [`MAX_HITS`]) documents of `query` and the number of matches.
    pub fn search(&self, query: &str, k: usize) -> Result<Answer> {
        if !(1..=MAX_HITS).contains(&k) {
            bail!("k must be between 1 and {MAX_HITS}, not {k}");
        }
        let terms = data::tokenizer::tokenize(query);
        if terms.is_empty() {
            return Ok(Answer {
                num_hits: 0,
                hits: Vec::new(),
            });
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let term = Term::from_field_text(self.field, t);
                let q: Box<dyn Query> = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                (Occur::Should, q)
            })
            .collect();
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let (top, num_hits) =
            searcher.search(&query, &(TopDocs::with_limit(k).order_by_score(), Count))?;
        let hits = top
            .into_iter()
            .map(|(score, addr)| Hit {
                score,
                id: (addr.segment_ord, addr.doc_id),
            })
            .collect();
        Ok(Answer { num_hits, hits })
    }
}
