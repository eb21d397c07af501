//! Inputs shared by the batch commands: the query log (a file, or the embedded synthetic
//! default), postings sizes (`--sizes` table or `--freq` model) and the train/test split.
//! Every loader here returns an error that names the offending file.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use data::log::{read_log, ReadOptions};
use data::sizes::{FreqTable, SizeModel, SizeTable, Sizes};
use data::split::{Split, SplitOrder};
use data::synth::{generate, SynthConfig};
use data::time::parse_datetime_ms;

/// Where the queries come from.
#[derive(Args, Clone, Debug)]
pub struct LogArgs {
    /// Query log: AOL TSV, `Query`-header file, `timestamp anon_id query` TSV, one query per
    /// line, or Parquet; gzip-transparent. Omit it to use the embedded synthetic default.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Keep consecutive repeats (by default AOL's one-row-per-click repeats are collapsed).
    #[arg(long)]
    pub keep_repeats: bool,
    /// Queries in the embedded synthetic default log.
    #[arg(long, default_value_t = SynthConfig::default().queries)]
    pub synth_queries: usize,
    /// Seed of the embedded synthetic default log.
    #[arg(long, default_value_t = SynthConfig::default().seed)]
    pub synth_seed: u64,
}

/// Where postings sizes come from.
#[derive(Args, Clone, Debug)]
pub struct SizeArgs {
    /// Size table `(term, bytes)` from `ballot sizes` or `ballot build-index`.
    #[arg(long, conflicts_with = "freq")]
    pub sizes: Option<PathBuf>,
    /// Word-frequency TSV (`word<TAB>frequency_per_token`); sizes then come from the model.
    #[arg(long)]
    pub freq: Option<PathBuf>,
    /// Documents in the index (model N).
    #[arg(long, default_value_t = SizeModel::default().docs)]
    pub docs: u64,
    /// Tokens per document (model L).
    #[arg(long, default_value_t = SizeModel::default().doc_len)]
    pub doc_len: f64,
}

/// How to split the log into train and test.
#[derive(Args, Clone, Debug)]
pub struct SplitArgs {
    /// Fraction of the shuffled log used for training (warm-up); the rest is the test part.
    #[arg(long, default_value_t = 0.8)]
    pub split: f64,
    /// Seed of the shuffle.
    #[arg(long, default_value_t = 1)]
    pub shuffle_seed: u64,
    /// Split by time instead: train before this instant (UTC, `2006-05-01T00:00:00`), test
    /// from it on, in log order.
    #[arg(long)]
    pub split_time: Option<String>,
}

/// A loaded query stream.
pub struct Dataset {
    /// Human label: the file path, or "synthetic default (N queries, seed S)".
    pub label: String,
    /// The queries, in log order, repeats collapsed unless asked otherwise.
    pub queries: Vec<String>,
    /// Each query's time (unix ms), when the log has one.
    pub timestamps: Vec<Option<i64>>,
    /// The synthetic log's matching frequency table (None for a file).
    pub synth_freq: Option<FreqTable>,
    /// One-line reading report (malformed lines, collapsed repeats), for files.
    pub read_summary: Option<String>,
}

impl LogArgs {
    /// [`LogArgs::load`] as a reported stage: a spinner while reading, then one line with
    /// the query count and, for files, the reading report (malformed lines, repeats).
    pub fn load_reported(&self) -> Result<Dataset> {
        let stage = crate::progress::Stage::start("reading log");
        let dataset = self.load()?;
        stage.finish(&format!(
            "{} queries from {}",
            dataset.queries.len(),
            dataset.label
        ));
        if let Some(s) = &dataset.read_summary {
            eprintln!("{s}");
        }
        Ok(dataset)
    }

    /// Reads the log file, or generates the embedded default.
    pub fn load(&self) -> Result<Dataset> {
        match &self.log {
            Some(path) => {
                let log = read_log(
                    path,
                    &ReadOptions {
                        keep_repeats: self.keep_repeats,
                    },
                )?;
                let read_summary = Some(log.report.summary());
                let mut queries = Vec::with_capacity(log.records.len());
                let mut timestamps = Vec::with_capacity(log.records.len());
                for r in log.records {
                    queries.push(r.query);
                    timestamps.push(r.ts);
                }
                Ok(Dataset {
                    label: path.display().to_string(),
                    queries,
                    timestamps,
                    synth_freq: None,
                    read_summary,
                })
            }
            None => {
                let cfg = SynthConfig {
                    queries: self.synth_queries,
                    seed: self.synth_seed,
                    ..SynthConfig::default()
                };
                cfg.validate()?;
                let log = generate(&cfg);
                Ok(Dataset {
                    label: format!(
                        "synthetic default ({} queries, seed {})",
                        cfg.queries, cfg.seed
                    ),
                    timestamps: log.timestamps_ms.iter().map(|&t| Some(t)).collect(),
                    queries: log.queries,
                    synth_freq: Some(FreqTable::from_pairs(log.freq)),
                    read_summary: None,
                })
            }
        }
    }
}

impl SizeArgs {
    /// Loads the sizes; without `--sizes`/`--freq`, falls back to the synthetic log's own
    /// frequency table, and errors for a real log (its sizes cannot be guessed).
    pub fn load(&self, dataset: &Dataset) -> Result<Sizes> {
        let model = SizeModel {
            docs: self.docs,
            doc_len: self.doc_len,
        };
        if self.docs == 0 || self.doc_len.is_nan() || self.doc_len <= 0.0 {
            bail!("--docs and --doc-len must be positive");
        }
        match (&self.sizes, &self.freq, &dataset.synth_freq) {
            (Some(path), _, _) => Ok(Sizes::Table(
                SizeTable::read_parquet(path).context("loading --sizes")?,
            )),
            (None, Some(path), _) => Ok(Sizes::Model {
                freq: FreqTable::read_tsv(path).context("loading --freq")?,
                model,
            }),
            (None, None, Some(freq)) => Ok(Sizes::Model {
                freq: freq.clone(),
                model,
            }),
            (None, None, None) => bail!(
                "{}: postings sizes are needed: pass --sizes SIZES.parquet or --freq WORDFREQ.tsv",
                dataset.label
            ),
        }
    }
}

impl SplitArgs {
    /// The split these arguments describe.
    pub fn split(&self) -> Result<Split> {
        match &self.split_time {
            Some(t) => {
                let at_ms = parse_datetime_ms(t).with_context(|| {
                    format!("--split-time {t:?} is not a time like 2006-05-01T00:00:00")
                })?;
                Ok(Split::Time { at_ms })
            }
            None => Ok(Split::Shuffle {
                train_frac: self.split,
                seed: self.shuffle_seed,
            }),
        }
    }

    /// Splits `dataset`.
    pub fn apply(&self, dataset: &Dataset) -> Result<SplitOrder> {
        if dataset.queries.is_empty() {
            bail!("{}: the log has no queries", dataset.label);
        }
        self.split()?
            .apply(dataset.queries.len(), |i| dataset.timestamps[i])
            .with_context(|| format!("{}: cannot split", dataset.label))
    }
}

impl Dataset {
    /// The queries in split order (train first).
    pub fn ordered<'a>(&'a self, order: &'a SplitOrder) -> impl Iterator<Item = &'a str> + 'a {
        order
            .order
            .iter()
            .map(|&i| self.queries[i as usize].as_str())
    }
}
