//! `ballot build-index`: writes a replica's on-flash index (postings, term directory,
//! manifest, `sizes.parquet`) for the terms of a size source. The algorithm lives in
//! `replica::index::build`; this command only gathers `(term, df)` pairs.
//!
//! df per term: with `--freq` (or the embedded synthetic default's own frequency table),
//! the size model's `df` for each term of the log; with `--sizes`, `bytes − 16`, the model's
//! inverse, for each term of the table.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use data::sizes::{Sizes, LIST_HEADER_BYTES};
use data::tokenizer::Tokens;
use rustc_hash::FxHashSet;

use crate::inputs::{LogArgs, SizeArgs};

/// Arguments of `ballot build-index`.
#[derive(Args, Debug)]
pub struct BuildIndexArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Output index directory.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Builds the index.
pub fn run(args: &BuildIndexArgs) -> Result<()> {
    let docs = u32::try_from(args.sizes.docs)
        .ok()
        .filter(|&d| d > 0)
        .context("--docs must be between 1 and 4294967295")?;
    let pairs: Vec<(String, u64)> = if let Some(path) = &args.sizes.sizes {
        let table = data::sizes::SizeTable::read_parquet(path).context("loading --sizes")?;
        table
            .sorted()
            .into_iter()
            .map(|(t, b)| (t.to_owned(), b.saturating_sub(LIST_HEADER_BYTES)))
            .collect()
    } else {
        let dataset = args.log.load()?;
        let Sizes::Model { freq, model } = args.sizes.load(&dataset)? else {
            bail!("expected a frequency model");
        };
        let mut tokens = Tokens::new();
        let mut terms: FxHashSet<String> = FxHashSet::default();
        for q in dataset.queries.distinct_texts() {
            tokens.tokenize(q);
            for t in tokens.iter() {
                if !terms.contains(t) {
                    terms.insert(t.to_owned());
                }
            }
        }
        terms
            .into_iter()
            .map(|t| {
                let df = model.df(freq.get(&t));
                (t, df)
            })
            .collect()
    };
    if pairs.is_empty() {
        bail!("no terms to index");
    }
    let s = replica::build_index(&args.output, docs, pairs)
        .with_context(|| format!("building the index in {}", args.output.display()))?;
    println!(
        "wrote {} terms, {} postings, {} bytes (largest list {} bytes) for {} docs to {} in {:.1} s",
        s.terms,
        s.postings,
        s.postings_bytes,
        s.max_list_bytes,
        s.docs,
        args.output.display(),
        s.elapsed.as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use data::sizes::SizeTable;

    #[test]
    fn sizes_give_df_as_bytes_minus_the_header() {
        let tmp = tempfile::tempdir().unwrap();
        let sizes = tmp.path().join("sizes.parquet");
        SizeTable::from_pairs([("a".to_string(), 1016u64), ("b".to_string(), 21)])
            .write_parquet(&sizes)
            .unwrap();
        let out = tmp.path().join("idx");
        let args = BuildIndexArgs {
            log: LogArgs {
                log: None,
                from: None,
                to: None,
                layout: Default::default(),
                keep_repeats: false,
                synth_queries: 10,
                synth_seed: 1,
            },
            sizes: SizeArgs {
                sizes: Some(sizes),
                freq: None,
                docs: 1000,
                doc_len: 300.0,
            },
            output: out.clone(),
        };
        run(&args).unwrap();
        let dir = replica::index::open_directory(&out).unwrap();
        let df = |t: &str| dir.entry(dir.id(t).unwrap()).unwrap().df;
        assert_eq!((df("a"), df("b")), (1000, 5));
        // df = N: one byte per id, so the stored size is the model's again.
        let built = SizeTable::read_parquet(&out.join("sizes.parquet")).unwrap();
        assert_eq!(built.get("a"), Some(1016));
    }
}
