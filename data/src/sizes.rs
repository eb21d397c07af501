//! Postings-list sizes: the model that turns word frequencies into bytes, the frequency
//! table it uses, and the `(term, bytes)` size table in Parquet.
//!
//! Model (DESIGN.md): a term with per-token frequency `f` appears in
//! `df = ceil(N · (1 − exp(−f · L)))` of `N` documents of `L` tokens (the chance that a
//! document of `L` independent tokens contains it at least once); its postings list takes
//! `16 + df` bytes (a header plus about a byte per compressed doc id). Terms absent from the
//! frequency table get `df = 5`. Defaults: `N = 10,000,000`, `L = 300`.
//!
//! A [`FreqTable`] is built from `(word, frequency)` pairs ([`FreqTable::from_pairs`]): the
//! synthetic generator makes its own, and the frequency file users pass
//! (`word<TAB>frequency_per_token`, gzip-transparent, like `wordfreq-large-en.tsv.gz`) is read
//! by `querylog::freq`, next to the other readers of text files.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rustc_hash::FxHashMap;

/// Fixed per-list overhead in bytes.
pub const LIST_HEADER_BYTES: u64 = 16;
/// Document frequency assumed for a term the frequency table does not know.
pub const UNKNOWN_DF: u64 = 5;
/// Bytes of a term the frequency table does not know.
pub const UNKNOWN_TERM_BYTES: u64 = LIST_HEADER_BYTES + UNKNOWN_DF;

/// Why sizes could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SizesError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Parquet could not be read or written.
    #[error("{path}: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: parquet::errors::ParquetError,
    },
    /// The size table's schema is wrong.
    #[error("{path}: wrong size-table schema: {detail} (expected columns term utf8, bytes u64)")]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Parameters of the document-frequency model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeModel {
    /// Documents in the index (N).
    pub docs: u64,
    /// Tokens per document (L).
    pub doc_len: f64,
}

impl Default for SizeModel {
    fn default() -> Self {
        SizeModel {
            docs: 10_000_000,
            doc_len: 300.0,
        }
    }
}

impl SizeModel {
    /// Document frequency of a term with per-token frequency `freq` (None: unknown term).
    pub fn df(&self, freq: Option<f64>) -> u64 {
        match freq {
            None => UNKNOWN_DF.min(self.docs),
            Some(f) => {
                let share = -(-f * self.doc_len).exp_m1();
                ((self.docs as f64 * share).ceil() as u64).clamp(1, self.docs)
            }
        }
    }

    /// Postings bytes of a term with per-token frequency `freq`.
    pub fn bytes(&self, freq: Option<f64>) -> u64 {
        LIST_HEADER_BYTES + self.df(freq)
    }
}

/// Word → per-token frequency.
#[derive(Clone, Debug, Default)]
pub struct FreqTable {
    freq: FxHashMap<String, f64>,
}

impl FreqTable {
    /// Builds a table from pairs; the first occurrence of a word wins.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, f64)>) -> Self {
        let mut freq = FxHashMap::default();
        for (w, f) in pairs {
            freq.entry(w).or_insert(f);
        }
        FreqTable { freq }
    }

    /// Frequency of `word`, if known.
    pub fn get(&self, word: &str) -> Option<f64> {
        self.freq.get(word).copied()
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.freq.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.freq.is_empty()
    }
}

/// Term → exact postings bytes, as written by `ballot sizes` or `ballot build-index`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SizeTable {
    bytes: FxHashMap<String, u64>,
}

impl SizeTable {
    /// Builds a table from pairs (last occurrence wins).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, u64)>) -> Self {
        SizeTable {
            bytes: pairs.into_iter().collect(),
        }
    }

    /// Bytes of `term`, if known.
    pub fn get(&self, term: &str) -> Option<u64> {
        self.bytes.get(term).copied()
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// `(term, bytes)` pairs sorted by term (deterministic output).
    pub fn sorted(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.bytes.iter().map(|(t, &b)| (t.as_str(), b)).collect();
        v.sort_unstable();
        v
    }

    /// Writes `(term utf8, bytes u64)` Parquet, sorted by term.
    pub fn write_parquet(&self, path: &Path) -> Result<(), SizesError> {
        let pq = |source| SizesError::Parquet {
            path: path.to_owned(),
            source,
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("term", DataType::Utf8, false),
            Field::new("bytes", DataType::UInt64, false),
        ]));
        let file = File::create(path).map_err(|source| SizesError::Io {
            path: path.to_owned(),
            source,
        })?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(pq)?;
        for chunk in self.sorted().chunks(65_536) {
            let terms = StringArray::from_iter_values(chunk.iter().map(|(t, _)| *t));
            let bytes = UInt64Array::from_iter_values(chunk.iter().map(|(_, b)| *b));
            let batch =
                RecordBatch::try_new(schema.clone(), vec![Arc::new(terms), Arc::new(bytes)])
                    .map_err(|e| pq(e.into()))?;
            writer.write(&batch).map_err(pq)?;
        }
        writer.close().map_err(pq)?;
        Ok(())
    }

    /// Reads a size table written by [`SizeTable::write_parquet`].
    pub fn read_parquet(path: &Path) -> Result<Self, SizesError> {
        let pq = |source| SizesError::Parquet {
            path: path.to_owned(),
            source,
        };
        let schema_err = |detail: String| SizesError::Schema {
            path: path.to_owned(),
            detail,
        };
        let file = File::open(path).map_err(|source| SizesError::Io {
            path: path.to_owned(),
            source,
        })?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
        let schema = builder.schema().clone();
        let term_col = schema
            .index_of("term")
            .map_err(|_| schema_err("missing column `term`".into()))?;
        let bytes_col = schema
            .index_of("bytes")
            .map_err(|_| schema_err("missing column `bytes`".into()))?;
        let mut out = FxHashMap::default();
        for batch in builder.with_batch_size(65_536).build().map_err(pq)? {
            let batch = batch.map_err(|e| pq(e.into()))?;
            let terms = batch
                .column(term_col)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    schema_err(format!(
                        "column `term` is {}",
                        batch.column(term_col).data_type()
                    ))
                })?;
            let bytes = batch
                .column(bytes_col)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| {
                    schema_err(format!(
                        "column `bytes` is {}",
                        batch.column(bytes_col).data_type()
                    ))
                })?;
            if terms.null_count() > 0 || bytes.null_count() > 0 {
                return Err(schema_err("null values".into()));
            }
            for i in 0..batch.num_rows() {
                out.insert(terms.value(i).to_owned(), bytes.value(i));
            }
        }
        Ok(SizeTable { bytes: out })
    }
}

/// Where a command gets postings sizes from: an exact table, or the model over a frequency
/// table.
#[derive(Clone, Debug)]
pub enum Sizes {
    /// Exact bytes per term; unknown terms get [`UNKNOWN_TERM_BYTES`].
    Table(SizeTable),
    /// The model over word frequencies.
    Model {
        /// The word frequencies.
        freq: FreqTable,
        /// The size model.
        model: SizeModel,
    },
}

impl Sizes {
    /// Postings bytes of `term`.
    pub fn bytes(&self, term: &str) -> u64 {
        match self {
            Sizes::Table(t) => t.get(term).unwrap_or(UNKNOWN_TERM_BYTES),
            Sizes::Model { freq, model } => model.bytes(freq.get(term)),
        }
    }

    /// A size table for exactly `terms`.
    pub fn table_for<'a>(&self, terms: impl IntoIterator<Item = &'a str>) -> SizeTable {
        SizeTable::from_pairs(terms.into_iter().map(|t| (t.to_owned(), self.bytes(t))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_matches_the_design_formula() {
        let m = SizeModel::default();
        // "the" at 5.37% of tokens: N·(1 − e^(−16.11)) = 9,999,999.0… → 9,999,999.
        assert_eq!(m.df(Some(0.0537)), 9_999_999);
        assert_eq!(m.df(Some(0.5)), 10_000_000);
        // f = 1e-6: N·(1 − e^(−3e−4)) = 2999.55 → 3000.
        assert_eq!(m.df(Some(1e-6)), 3000);
        assert_eq!(m.bytes(Some(1e-6)), 3016);
        assert_eq!(m.df(None), 5);
        assert_eq!(m.bytes(None), 21);
        // A tiny positive frequency still yields a document.
        assert_eq!(m.df(Some(1e-15)), 1);
    }

    #[test]
    fn size_table_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sizes.parquet");
        let t = SizeTable::from_pairs([("b".to_string(), 21u64), ("a".to_string(), 3016)]);
        t.write_parquet(&p).unwrap();
        let back = SizeTable::read_parquet(&p).unwrap();
        assert_eq!(back, t);
        assert_eq!(Sizes::Table(back).bytes("zzz"), UNKNOWN_TERM_BYTES);
    }
}
