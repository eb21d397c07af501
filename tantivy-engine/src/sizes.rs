//! The `(term, bytes)` size table of a Tantivy index: for every term of one indexed text
//! field, the bytes of its postings lists (the `.idx` byte range its term dictionary entry
//! points at), summed over the index's segments. That is what a term query reads through
//! the page cache; positions (`.pos`, read by phrase queries only) and the term dictionary
//! itself are not counted. Written by `ballot sizes --tantivy` for the balancer's shadow
//! caches and the learner.
//!
//! The kernel reads whole pages: a list of `L` bytes at an offset uniformly spread over a
//! page touches `(L + P - 1) / P` pages of `P` bytes on average (a real-valued mean, not a
//! rounded count), so `page_bytes = P` counts each list as `L + P - 1` bytes, what a cold
//! read of it costs the device and occupies in the page cache (a one-document list costs at
//! least a page, not its few bytes). `page_bytes` 0 or 1 counts the lists' exact bytes.
//!
//! Only terms that ballot's tokenizer maps to themselves (lowercase alphanumeric, as
//! Tantivy's `default` and `whitespace` tokenizers produce from such text) can match a
//! query's terms; the others are skipped and counted, never renamed.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use tantivy::schema::{Field, FieldType, Schema};
use tantivy::Index;

/// The size table of a Tantivy index and what was left out of it.
#[derive(Clone, Debug, Default)]
pub struct TermSizes {
    /// `(term, postings bytes)`, sorted by term, each segment's list counted with its page
    /// overhead when asked; every size is at least 1.
    pub sizes: Vec<(String, u64)>,
    /// Dictionary entries skipped because ballot's tokenizer would not produce them.
    pub skipped: u64,
    /// Segments read.
    pub segments: usize,
}

/// Reads the postings size of every term of `field` (default: the index's only indexed
/// text field) in the Tantivy index directory `dir`, each segment's list read in pages of
/// `page_bytes` (0: exact bytes).
pub fn term_sizes(dir: &Path, field: Option<&str>, page_bytes: u64) -> Result<TermSizes> {
    let page_overhead = page_bytes.saturating_sub(1);
    let index = Index::open_in_dir(dir)
        .with_context(|| format!("{} is not a readable Tantivy index", dir.display()))?;
    let schema = index.schema();
    let field = pick_field(&schema, field).with_context(|| format!("in {}", dir.display()))?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
    let mut skipped = 0u64;
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(field)?;
        let mut stream = inverted.terms().stream()?;
        while stream.advance() {
            let len = stream.value().postings_range.len() as u64 + page_overhead;
            match std::str::from_utf8(stream.key()) {
                Ok(term) if is_ballot_term(term) => {
                    *bytes.entry(term.to_owned()).or_default() += len;
                }
                _ => skipped += 1,
            }
        }
    }
    Ok(TermSizes {
        sizes: bytes.into_iter().map(|(t, b)| (t, b.max(1))).collect(),
        skipped,
        segments: searcher.segment_readers().len(),
    })
}

/// True when ballot's tokenizer turns `term` into itself, so queries can name it.
fn is_ballot_term(term: &str) -> bool {
    let tokens = data::tokenizer::tokenize(term);
    tokens.len() == 1 && tokens[0] == term
}

/// The field `name`, which must be an indexed text field; or, with no name, the schema's
/// only indexed text field.
fn pick_field(schema: &Schema, name: Option<&str>) -> Result<Field> {
    let indexed_text =
        |ty: &FieldType| matches!(ty, FieldType::Str(o) if o.get_indexing_options().is_some());
    if let Some(name) = name {
        let field = schema
            .get_field(name)
            .map_err(|_| anyhow::anyhow!("the index has no field {name:?}"))?;
        if !indexed_text(schema.get_field_entry(field).field_type()) {
            bail!("field {name:?} is not an indexed text field");
        }
        return Ok(field);
    }
    let text: Vec<(Field, &str)> = schema
        .fields()
        .filter(|(_, e)| indexed_text(e.field_type()))
        .map(|(f, e)| (f, e.name()))
        .collect();
    match text.as_slice() {
        [(field, _)] => Ok(*field),
        [] => bail!("the index has no indexed text field"),
        many => bail!(
            "the index has {} indexed text fields ({}); name one with --tantivy-field",
            many.len(),
            many.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
        ),
    }
}
