//! The voting-table format: which replicas each term votes for, and how strongly.
//!
//! A voting table (Archer et al., "Cache-aware load balancing of data center applications",
//! PVLDB 2019) is a Parquet file of rows `(term utf8, replica u16, weight f32)` plus
//! key-value metadata: `ballot.replicas` (R), `ballot.format_version`, `ballot.created_at`
//! (unix seconds) and any free-form training information. A term may have several rows (it
//! votes for several replicas, e.g. a hot term cached on more than one); weight 0 is an
//! explicit abstention.
//!
//! Loading validates everything once, so routing never has to: `replica < R`, weights finite
//! and non-negative, no duplicate `(term, replica)`, non-empty terms. A bad file is rejected
//! with an error naming the file and the first offending row.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, Float32Array, RecordBatch, StringArray, UInt16Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::ChunkReader;
use rustc_hash::FxHashSet;

/// Version of the table layout this code writes and reads.
pub const FORMAT_VERSION: &str = "1";
/// Metadata key holding the replica count.
pub const KEY_REPLICAS: &str = "ballot.replicas";
/// Metadata key holding the format version.
pub const KEY_FORMAT_VERSION: &str = "ballot.format_version";
/// Metadata key holding the creation time (unix seconds).
pub const KEY_CREATED_AT: &str = "ballot.created_at";

/// One vote: `term` votes for `replica` with `weight`.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    /// A normalized term (as the tokenizer produces it).
    pub term: String,
    /// Replica index in `[0, replicas)`.
    pub replica: u16,
    /// Finite, non-negative vote weight.
    pub weight: f32,
}

/// A validated voting table.
#[derive(Clone, Debug, PartialEq)]
pub struct VotingTable {
    /// Number of replicas R the table was built for.
    pub replicas: u16,
    /// The votes.
    pub rows: Vec<TableRow>,
    /// Free-form metadata (training information); the `ballot.*` keys above are managed by
    /// the reader and writer.
    pub metadata: BTreeMap<String, String>,
}

/// Why a voting table was rejected.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read voting table: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bytes are not a readable Parquet file.
    #[error("{path}: not a readable Parquet voting table: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    /// Columns are missing or of the wrong type.
    #[error("{path}: wrong voting-table schema: {detail} (expected columns term utf8, replica u16, weight f32)")]
    Schema { path: PathBuf, detail: String },
    /// Metadata is missing, unparsable or contradicts the caller.
    #[error("{path}: {detail}")]
    Metadata { path: PathBuf, detail: String },
    /// A row breaks an invariant.
    #[error("{path}: row {row}: {detail}")]
    Row {
        path: PathBuf,
        row: usize,
        detail: String,
    },
    /// The table has no rows.
    #[error("{path}: voting table has no rows")]
    Empty { path: PathBuf },
}

impl VotingTable {
    /// Builds and validates a table held in memory (`source` names it in errors).
    pub fn new(
        replicas: u16,
        rows: Vec<TableRow>,
        metadata: BTreeMap<String, String>,
    ) -> Result<Self, TableError> {
        let table = VotingTable {
            replicas,
            rows,
            metadata,
        };
        table.validate(Path::new("<memory>"))?;
        Ok(table)
    }

    /// Checks every invariant; `path` only labels the error.
    pub fn validate(&self, path: &Path) -> Result<(), TableError> {
        let row_err = |row: usize, detail: String| TableError::Row {
            path: path.to_owned(),
            row,
            detail,
        };
        if self.replicas == 0 {
            return Err(TableError::Metadata {
                path: path.to_owned(),
                detail: "replica count is 0".into(),
            });
        }
        if self.rows.is_empty() {
            return Err(TableError::Empty {
                path: path.to_owned(),
            });
        }
        let mut seen: FxHashSet<(&str, u16)> = FxHashSet::default();
        seen.reserve(self.rows.len());
        for (i, row) in self.rows.iter().enumerate() {
            if row.term.is_empty() {
                return Err(row_err(i, "empty term".into()));
            }
            if row.replica >= self.replicas {
                return Err(row_err(
                    i,
                    format!(
                        "term {:?} votes for replica {} but the table has {} replicas (valid: 0..{})",
                        row.term, row.replica, self.replicas, self.replicas
                    ),
                ));
            }
            if !row.weight.is_finite() || row.weight < 0.0 {
                return Err(row_err(
                    i,
                    format!(
                        "term {:?} has weight {} (weights must be finite and >= 0)",
                        row.term, row.weight
                    ),
                ));
            }
            if !seen.insert((row.term.as_str(), row.replica)) {
                return Err(row_err(
                    i,
                    format!(
                        "duplicate vote of term {:?} for replica {}",
                        row.term, row.replica
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Number of distinct terms.
    pub fn distinct_terms(&self) -> usize {
        let mut terms: Vec<&str> = self.rows.iter().map(|r| r.term.as_str()).collect();
        terms.sort_unstable();
        terms.dedup();
        terms.len()
    }

    /// Writes the table as Parquet (snappy) with its metadata.
    pub fn write_parquet(&self, path: &Path) -> Result<(), TableError> {
        self.validate(path)?;
        let io = |source| TableError::Io {
            path: path.to_owned(),
            source,
        };
        let pq = |source| TableError::Parquet {
            path: path.to_owned(),
            source,
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("term", DataType::Utf8, false),
            Field::new("replica", DataType::UInt16, false),
            Field::new("weight", DataType::Float32, false),
        ]));
        let mut kv: Vec<KeyValue> = self
            .metadata
            .iter()
            .filter(|(k, _)| !k.starts_with("ballot.") || is_free_ballot_key(k))
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
            .collect();
        kv.push(KeyValue::new(
            KEY_REPLICAS.to_owned(),
            self.replicas.to_string(),
        ));
        kv.push(KeyValue::new(
            KEY_FORMAT_VERSION.to_owned(),
            FORMAT_VERSION.to_owned(),
        ));
        if !self.metadata.contains_key(KEY_CREATED_AT) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            kv.push(KeyValue::new(KEY_CREATED_AT.to_owned(), now.to_string()));
        } else if let Some(v) = self.metadata.get(KEY_CREATED_AT) {
            kv.push(KeyValue::new(KEY_CREATED_AT.to_owned(), v.clone()));
        }
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(kv))
            .build();
        let file = File::create(path).map_err(io)?;
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(pq)?;
        for chunk in self.rows.chunks(65_536) {
            let terms = StringArray::from_iter_values(chunk.iter().map(|r| r.term.as_str()));
            let replicas = UInt16Array::from_iter_values(chunk.iter().map(|r| r.replica));
            let weights = Float32Array::from_iter_values(chunk.iter().map(|r| r.weight));
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(terms), Arc::new(replicas), Arc::new(weights)],
            )
            .map_err(|e| pq(e.into()))?;
            writer.write(&batch).map_err(pq)?;
        }
        writer.close().map_err(pq)?;
        Ok(())
    }

    /// Reads and validates a table file. With `expected_replicas`, a table built for a
    /// different replica count is rejected.
    pub fn read_parquet(path: &Path, expected_replicas: Option<u16>) -> Result<Self, TableError> {
        let file = File::open(path).map_err(|source| TableError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::read_from(file, path, expected_replicas)
    }

    /// Reads and validates a table from bytes held in memory (an uploaded file); `label`
    /// names it in errors.
    pub fn from_parquet_bytes(
        bytes: Vec<u8>,
        label: &Path,
        expected_replicas: Option<u16>,
    ) -> Result<Self, TableError> {
        Self::read_from(bytes::Bytes::from(bytes), label, expected_replicas)
    }

    fn read_from<R: ChunkReader + 'static>(
        reader: R,
        path: &Path,
        expected_replicas: Option<u16>,
    ) -> Result<Self, TableError> {
        let pq = |source| TableError::Parquet {
            path: path.to_owned(),
            source,
        };
        let schema_err = |detail: String| TableError::Schema {
            path: path.to_owned(),
            detail,
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(reader).map_err(pq)?;
        let mut metadata = BTreeMap::new();
        if let Some(kvs) = builder.metadata().file_metadata().key_value_metadata() {
            for kv in kvs {
                if kv.key == "ARROW:schema" {
                    continue;
                }
                metadata.insert(kv.key.clone(), kv.value.clone().unwrap_or_default());
            }
        }
        let replicas = resolve_replicas(&metadata, expected_replicas, path)?;
        if let Some(v) = metadata.get(KEY_FORMAT_VERSION) {
            if v != FORMAT_VERSION {
                return Err(TableError::Metadata {
                    path: path.to_owned(),
                    detail: format!(
                        "voting-table format version {v} is not supported (this build reads {FORMAT_VERSION})"
                    ),
                });
            }
        }
        let schema = builder.schema().clone();
        let column = |name: &str| {
            schema
                .index_of(name)
                .map_err(|_| schema_err(format!("missing column `{name}`")))
        };
        let (term_col, replica_col, weight_col) =
            (column("term")?, column("replica")?, column("weight")?);
        let reader = builder.with_batch_size(65_536).build().map_err(pq)?;
        let mut rows = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| pq(e.into()))?;
            let terms = batch
                .column(term_col)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    schema_err(format!(
                        "column `term` is {} (expected utf8)",
                        batch.column(term_col).data_type()
                    ))
                })?;
            let replica_values = integer_column(batch.column(replica_col).as_ref())
                .map_err(|t| schema_err(format!("column `replica` is {t} (expected u16)")))?;
            let weight_values = float_column(batch.column(weight_col).as_ref())
                .map_err(|t| schema_err(format!("column `weight` is {t} (expected f32)")))?;
            for i in 0..batch.num_rows() {
                let row = rows.len();
                let null = |col: &str| TableError::Row {
                    path: path.to_owned(),
                    row,
                    detail: format!("null {col}"),
                };
                if terms.is_null(i) {
                    return Err(null("term"));
                }
                let replica = replica_values[i].ok_or_else(|| null("replica"))?;
                let weight = weight_values[i].ok_or_else(|| null("weight"))?;
                let replica = u16::try_from(replica).map_err(|_| TableError::Row {
                    path: path.to_owned(),
                    row,
                    detail: format!("replica {replica} is out of range for u16"),
                })?;
                rows.push(TableRow {
                    term: terms.value(i).to_owned(),
                    replica,
                    weight,
                });
            }
        }
        let table = VotingTable {
            replicas,
            rows,
            metadata,
        };
        table.validate(path)?;
        Ok(table)
    }
}

/// Keys under `ballot.` that callers may set freely (everything except the managed ones).
fn is_free_ballot_key(key: &str) -> bool {
    !matches!(key, KEY_REPLICAS | KEY_FORMAT_VERSION | KEY_CREATED_AT)
}

fn resolve_replicas(
    metadata: &BTreeMap<String, String>,
    expected: Option<u16>,
    path: &Path,
) -> Result<u16, TableError> {
    let meta_err = |detail: String| TableError::Metadata {
        path: path.to_owned(),
        detail,
    };
    let declared = match metadata.get(KEY_REPLICAS) {
        Some(v) => Some(v.trim().parse::<u16>().map_err(|_| {
            meta_err(format!(
                "metadata {KEY_REPLICAS} = {v:?} is not a replica count"
            ))
        })?),
        None => None,
    };
    match (declared, expected) {
        (Some(d), Some(e)) if d != e => Err(meta_err(format!(
            "table was built for {d} replicas but {e} are configured"
        ))),
        (Some(d), _) => Ok(d),
        (None, Some(e)) => Ok(e),
        (None, None) => Err(meta_err(format!(
            "metadata {KEY_REPLICAS} is missing and no replica count was given"
        ))),
    }
}

/// Reads an integer column of any common width as `Option<i64>` values, or names its type.
fn integer_column(array: &dyn Array) -> Result<Vec<Option<i64>>, DataType> {
    use arrow_array::{Int16Array, Int32Array, Int64Array, UInt32Array, UInt8Array};
    macro_rules! collect {
        ($t:ty) => {
            if let Some(a) = array.as_any().downcast_ref::<$t>() {
                return Ok(a.iter().map(|v| v.map(i64::from)).collect());
            }
        };
    }
    collect!(UInt16Array);
    collect!(UInt8Array);
    collect!(Int16Array);
    collect!(Int32Array);
    collect!(UInt32Array);
    collect!(Int64Array);
    Err(array.data_type().clone())
}

/// Reads a float column (f32 or f64) as `Option<f32>` values, or names its type.
fn float_column(array: &dyn Array) -> Result<Vec<Option<f32>>, DataType> {
    use arrow_array::Float64Array;
    if let Some(a) = array.as_any().downcast_ref::<Float32Array>() {
        return Ok(a.iter().collect());
    }
    if let Some(a) = array.as_any().downcast_ref::<Float64Array>() {
        return Ok(a.iter().map(|v| v.map(|x| x as f32)).collect());
    }
    Err(array.data_type().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(term: &str, replica: u16, weight: f32) -> TableRow {
        TableRow {
            term: term.into(),
            replica,
            weight,
        }
    }

    #[test]
    fn validation_rejects_each_bad_row() {
        let meta = BTreeMap::new();
        let cases = [
            (vec![row("a", 4, 1.0)], "replica 4"),
            (vec![row("a", 0, f32::NAN)], "weight NaN"),
            (vec![row("a", 0, -1.0)], "weight -1"),
            (vec![row("a", 0, f32::INFINITY)], "weight inf"),
            (vec![row("a", 1, 1.0), row("a", 1, 2.0)], "duplicate"),
            (vec![row("", 1, 1.0)], "empty term"),
            (vec![], "no rows"),
        ];
        for (rows, needle) in cases {
            let err = VotingTable::new(4, rows, meta.clone())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        }
        assert!(VotingTable::new(4, vec![row("a", 0, 0.0), row("a", 3, 2.0)], meta).is_ok());
    }
}
