//! `ballot build-index`: writes a replica's on-flash index (postings, term directory,
//! manifest, `sizes.parquet`) for the terms of a size source. The algorithm lives in
//! `replica::index::build`; this command only gathers `(term, df)` pairs.
//!
//! df per term: with `--freq` (or the embedded synthetic default's own frequency table),
//! the size model's `df` for each term of the log; with `--sizes`, `bytes − 16`, the model's
//! inverse, for each term of the table.
//!
//! `--shards S` (default 1, the unsharded layout) writes a document-partitioned index
//! instead: `OUTPUT/shard-0` to `OUTPUT/shard-{S-1}`, one replica index each
//! (`replica::index::build_shards`), from pairs gathered once. Shards an earlier build with
//! more shards left in OUTPUT are removed, so OUTPUT holds this build's shards only.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use data::sizes::{Sizes, LIST_HEADER_BYTES};
use data::tokenizer::Tokens;
use rustc_hash::FxHashSet;

use crate::inputs::{LogArgs, SizeArgs};

/// The index's inputs and output (the demo builds its index with these).
#[derive(Args, Debug)]
pub struct BuildIndexArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Output index directory (with --shards above 1, the parent of the `shard-<s>` indexes).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Arguments of `ballot build-index`.
#[derive(Args, Debug)]
pub struct BuildIndexCli {
    #[command(flatten)]
    pub index: BuildIndexArgs,
    /// Document-partitioned shards: above 1, OUTPUT/shard-0 .. OUTPUT/shard-{S-1}, shard s
    /// holding the docs d with d % S == s (1 to 64).
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
}

/// `ballot build-index`.
pub fn run_cli(cli: &BuildIndexCli) -> Result<()> {
    run_sharded(&cli.index, cli.shards)
}

/// Builds the index, in `shards` shards when above 1, printing one line per index written.
pub fn run_sharded(args: &BuildIndexArgs, shards: u32) -> Result<()> {
    if !(1..=replica::index::MAX_SHARDS).contains(&shards) {
        bail!(
            "--shards must be between 1 and {}, got {shards}",
            replica::index::MAX_SHARDS
        );
    }
    let (docs, pairs) = term_dfs(args)?;
    if shards == 1 {
        let s = replica::build_index(&args.output, docs, pairs)
            .with_context(|| format!("building the index in {}", args.output.display()))?;
        print_summary(&s, &args.output);
        return remove_stale_shards(&args.output, 0);
    }
    let summaries =
        replica::build_shards(&args.output, docs, pairs, shards).with_context(|| {
            format!(
                "building {shards} index shards in {}",
                args.output.display()
            )
        })?;
    for (s, summary) in (0..shards).zip(&summaries) {
        print_summary(summary, &replica::shard_dir(&args.output, s));
    }
    remove_stale_shards(&args.output, shards)
}

/// Removes `root/shard-<s>` for every `s` from `first` on that holds a shard of a replica
/// index (an earlier build's); a directory of that name holding anything else is left, with
/// a warning.
fn remove_stale_shards(root: &Path, first: u32) -> Result<()> {
    for s in first..replica::index::MAX_SHARDS {
        let dir = replica::shard_dir(root, s);
        if !dir.exists() {
            continue;
        }
        match replica::index::open_directory(&dir) {
            Ok(old) if old.manifest.shard.is_some() => {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing the stale shard {}", dir.display()))?;
                println!("removed {} (a shard of an earlier build)", dir.display());
            }
            _ => eprintln!(
                "warning: {} is not a shard this command wrote; left as it is",
                dir.display()
            ),
        }
    }
    Ok(())
}

/// Prints the one-line summary of the index written in `dir`.
fn print_summary(s: &replica::BuildSummary, dir: &std::path::Path) {
    let shard = s.shard.map_or(String::new(), |sh| format!("{sh}: "));
    println!(
        "{shard}wrote {} terms, {} postings, {} bytes (largest list {} bytes) for {} docs to {} in {:.1} s",
        s.terms,
        s.postings,
        s.postings_bytes,
        s.max_list_bytes,
        s.docs,
        dir.display(),
        s.elapsed.as_secs_f64()
    );
}

/// The document count and the `(term, df)` pairs an index of `args` is built from.
pub fn term_dfs(args: &BuildIndexArgs) -> Result<(u32, Vec<(String, u64)>)> {
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
    Ok((docs, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use data::sizes::SizeTable;

    fn args(sizes: PathBuf, docs: u64, output: PathBuf) -> BuildIndexArgs {
        BuildIndexArgs {
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
                docs,
                doc_len: 300.0,
            },
            output,
        }
    }

    #[test]
    fn sizes_give_df_as_bytes_minus_the_header() {
        let tmp = tempfile::tempdir().unwrap();
        let sizes = tmp.path().join("sizes.parquet");
        SizeTable::from_pairs([("a".to_string(), 1016u64), ("b".to_string(), 21)])
            .write_parquet(&sizes)
            .unwrap();
        let out = tmp.path().join("idx");
        run_sharded(&args(sizes, 1000, out.clone()), 1).unwrap();
        let dir = replica::index::open_directory(&out).unwrap();
        let df = |t: &str| dir.entry(dir.id(t).unwrap()).unwrap().df;
        assert_eq!((df("a"), df("b")), (1000, 5));
        // df = N: one byte per id, so the stored size is the model's again.
        let built = SizeTable::read_parquet(&out.join("sizes.parquet")).unwrap();
        assert_eq!(built.get("a"), Some(1016));
        assert!(!out.join("shard-0").exists());
    }

    #[test]
    fn shards_write_one_index_each_and_the_count_is_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let sizes = tmp.path().join("sizes.parquet");
        SizeTable::from_pairs([("a".to_string(), 1016u64), ("b".to_string(), 66)])
            .write_parquet(&sizes)
            .unwrap();
        let out = tmp.path().join("idx");
        let a = args(sizes, 1000, out.clone());
        run_sharded(&a, 4).unwrap();
        assert!(!out.join("manifest.json").exists());
        let mut df = [0u32; 2];
        for s in 0..4 {
            let dir = replica::index::open_directory(&replica::shard_dir(&out, s)).unwrap();
            assert_eq!(
                dir.manifest.shard,
                Some(replica::Shard { index: s, count: 4 })
            );
            for (i, t) in ["a", "b"].into_iter().enumerate() {
                df[i] += dir.id(t).map_or(0, |id| dir.entry(id).unwrap().df);
            }
        }
        assert_eq!(df, [1000, 50]);
        assert!(!out.join("shard-4").exists());
        for bad in [0, 65] {
            let err = run_sharded(&a, bad).unwrap_err().to_string();
            assert!(err.contains("--shards must be between 1 and 64"), "{err}");
        }
    }
}
