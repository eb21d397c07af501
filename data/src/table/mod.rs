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
//!
//! A table file is untrusted input (the balancer accepts uploads), so reading it is bounded
//! by [`TableLimits`] (module `limits`): the footer is checked before it is parsed, the row counts
//! and column sizes it declares before any page is read, every page header and each `term`
//! dictionary before any value is decoded (module `pages`, on the walk of
//! [`crate::parquet_guard`]), and each record batch of
//! [`BATCH_ROWS`] rows before its rows are materialized. Only the three table columns are
//! decoded; the file's embedded Arrow schema is ignored (the Parquet types decide).

mod limits;
mod pages;
mod virtual_homes;

pub use limits::{Limit, TableLimits};
pub use virtual_homes::{VirtualHomes, KEY_VHOMES_REPLICAS, KEY_VHOMES_TRAINED, KEY_VHOMES_WORK};

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, Float32Array, RecordBatch, StringArray, UInt16Array};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use rustc_hash::FxHashSet;

/// Version of the table layout this code writes and reads.
pub const FORMAT_VERSION: &str = "1";
/// Metadata key holding the replica count.
pub const KEY_REPLICAS: &str = "ballot.replicas";
/// Metadata key holding the format version.
pub const KEY_FORMAT_VERSION: &str = "ballot.format_version";
/// Metadata key holding the creation time (unix seconds).
pub const KEY_CREATED_AT: &str = "ballot.created_at";
/// Metadata key of the per-replica cache size, in bytes, a trained table was learned for.
pub const KEY_TRAINED_CACHE_BYTES: &str = "ballot.train.capacity_bytes";
/// Rows per record batch when reading: with terms of at most
/// [`TableLimits::max_term_bytes`], one batch holds at most 4,096 × 6,144 bytes = 24 MiB of
/// terms however the file is encoded.
pub const BATCH_ROWS: usize = 4096;

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

impl TableRow {
    /// `term` votes for `replica` with `weight` (checked when a table is built of it).
    pub fn new(term: &str, replica: u16, weight: f32) -> Self {
        TableRow {
            term: term.to_owned(),
            replica,
            weight,
        }
    }
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
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a readable Parquet file.
    #[error("{path}: not a readable Parquet voting table: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: parquet::errors::ParquetError,
    },
    /// Columns are missing or of the wrong type.
    #[error("{path}: wrong voting-table schema: {detail} (expected columns term utf8, replica u16, weight f32)")]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Metadata is missing, unparsable or contradicts the caller.
    #[error("{path}: {detail}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A row breaks an invariant.
    #[error("{path}: row {row}: {detail}")]
    Row {
        /// The file.
        path: PathBuf,
        /// The row index.
        row: usize,
        /// What is wrong.
        detail: String,
    },
    /// The table has no rows.
    #[error("{path}: voting table has no rows")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The Parquet structure contradicts itself (found by the checks made before decoding).
    #[error("{path}: corrupt Parquet voting table: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The Parquet decoder panicked on malformed page data (caught; see
    /// [`VotingTable::read_parquet`]).
    #[error("{path}: malformed Parquet voting table (the decoder failed: {detail})")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The table breaks one of the [`TableLimits`]; nothing more of it was decoded.
    #[error("{path}: voting table exceeds the limit {limit} = {max}: {detail}")]
    Limit {
        /// The file.
        path: PathBuf,
        /// Which limit.
        limit: Limit,
        /// The limit's value.
        max: u64,
        /// What the file holds.
        detail: String,
    },
}

/// A term as an error message shows it: at most 64 characters.
fn show_term(term: &str) -> String {
    const SHOWN: usize = 64;
    match term.char_indices().nth(SHOWN) {
        None => format!("{term:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &term[..cut], term.len()),
    }
}

/// A [`ChunkReader`] shared between the page checks and the Arrow reader.
struct Shared<R>(Arc<R>);

impl<R: ChunkReader> Length for Shared<R> {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl<R: ChunkReader> ChunkReader for Shared<R> {
    type T = R::T;

    fn get_read(&self, start: u64) -> parquet::errors::Result<R::T> {
        self.0.get_read(start)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0.get_bytes(start, length)
    }
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
                        "term {} votes for replica {} but the table has {} replicas (valid: 0..{})",
                        show_term(&row.term),
                        row.replica,
                        self.replicas,
                        self.replicas
                    ),
                ));
            }
            if !row.weight.is_finite() || row.weight < 0.0 {
                return Err(row_err(
                    i,
                    format!(
                        "term {} has weight {} (weights must be finite and >= 0)",
                        show_term(&row.term),
                        row.weight
                    ),
                ));
            }
            if !seen.insert((row.term.as_str(), row.replica)) {
                return Err(row_err(
                    i,
                    format!(
                        "duplicate vote of term {} for replica {}",
                        show_term(&row.term),
                        row.replica
                    ),
                ));
            }
        }
        VirtualHomes::from_metadata(&self.metadata, self.replicas, path)?;
        Ok(())
    }

    /// The virtual homes of a homes table (module `virtual_homes`), `None` for a plain table. Loading
    /// validated them, so this fails only for a table built without [`VotingTable::new`].
    pub fn virtual_homes(&self) -> Result<Option<VirtualHomes>, TableError> {
        VirtualHomes::from_metadata(&self.metadata, self.replicas, Path::new("<table>"))
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
        let file = File::create(path).map_err(|source| TableError::Io {
            path: path.to_owned(),
            source,
        })?;
        self.write_to(file, path)
    }

    /// The Parquet file [`VotingTable::write_parquet`] writes, in memory (`label` names it
    /// in errors).
    pub fn to_parquet_bytes(&self, label: &Path) -> Result<Vec<u8>, TableError> {
        self.validate(label)?;
        let mut out = Vec::new();
        self.write_to(&mut out, label)?;
        Ok(out)
    }

    fn write_to<W: std::io::Write + Send>(&self, sink: W, path: &Path) -> Result<(), TableError> {
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
        let mut writer = ArrowWriter::try_new(sink, schema.clone(), Some(props)).map_err(pq)?;
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

    /// Reads and validates a table file with the default [`TableLimits`]. With
    /// `expected_replicas`, a table built for a different replica count is rejected. Every
    /// bad file is an error, never a panic: where the `parquet` decoder itself panics on
    /// malformed data, the panic is caught and returned as [`TableError::Malformed`].
    pub fn read_parquet(path: &Path, expected_replicas: Option<u16>) -> Result<Self, TableError> {
        Self::read_parquet_with_limits(path, expected_replicas, &TableLimits::default())
    }

    /// [`VotingTable::read_parquet`] within `limits`.
    pub fn read_parquet_with_limits(
        path: &Path,
        expected_replicas: Option<u16>,
        limits: &TableLimits,
    ) -> Result<Self, TableError> {
        let file = File::open(path).map_err(|source| TableError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::read_guarded(file, path, expected_replicas, limits)
    }

    /// Reads and validates a table from bytes held in memory (an uploaded file) with the
    /// default [`TableLimits`]; `label` names it in errors.
    pub fn from_parquet_bytes(
        bytes: Vec<u8>,
        label: &Path,
        expected_replicas: Option<u16>,
    ) -> Result<Self, TableError> {
        Self::from_parquet_bytes_with_limits(
            bytes,
            label,
            expected_replicas,
            &TableLimits::default(),
        )
    }

    /// [`VotingTable::from_parquet_bytes`] within `limits`.
    pub fn from_parquet_bytes_with_limits(
        bytes: Vec<u8>,
        label: &Path,
        expected_replicas: Option<u16>,
        limits: &TableLimits,
    ) -> Result<Self, TableError> {
        Self::read_guarded(Bytes::from(bytes), label, expected_replicas, limits)
    }

    /// [`VotingTable::read_from`], with a panic of the Parquet decoder turned into
    /// [`TableError::Malformed`] ([`crate::parquet_guard::catch_decoder_panic`]): `parquet`
    /// asserts on some malformed page data (an over-long varint in RLE-encoded levels, found
    /// by fuzzing) that no header check can see. Everything the read allocated is local and
    /// is dropped by the unwind.
    fn read_guarded<R: ChunkReader + 'static>(
        reader: R,
        path: &Path,
        expected_replicas: Option<u16>,
        limits: &TableLimits,
    ) -> Result<Self, TableError> {
        crate::parquet_guard::catch_decoder_panic(|| {
            Self::read_from(reader, path, expected_replicas, limits)
        })
        .unwrap_or_else(|detail| {
            Err(TableError::Malformed {
                path: path.to_owned(),
                detail,
            })
        })
    }

    fn read_from<R: ChunkReader + 'static>(
        reader: R,
        path: &Path,
        expected_replicas: Option<u16>,
        limits: &TableLimits,
    ) -> Result<Self, TableError> {
        let pq = |source| TableError::Parquet {
            path: path.to_owned(),
            source,
        };
        let schema_err = |detail: String| TableError::Schema {
            path: path.to_owned(),
            detail,
        };
        limits::check_footer_len(&reader, path, limits)?;
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        let meta = ArrowReaderMetadata::load(&reader, options).map_err(pq)?;
        let mut metadata = BTreeMap::new();
        if let Some(kvs) = meta.metadata().file_metadata().key_value_metadata() {
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
        // The three columns, their types checked before anything is decoded.
        let schema = meta.schema().clone();
        let column = |name: &str| {
            schema
                .index_of(name)
                .map_err(|_| schema_err(format!("missing column `{name}`")))
        };
        let roots = [column("term")?, column("replica")?, column("weight")?];
        let types = roots.map(|i| schema.field(i).data_type().clone());
        if types[0] != DataType::Utf8 {
            return Err(schema_err(format!(
                "column `term` is {} (expected utf8)",
                types[0]
            )));
        }
        if !is_integer(&types[1]) {
            return Err(schema_err(format!(
                "column `replica` is {} (expected u16)",
                types[1]
            )));
        }
        if !matches!(types[2], DataType::Float32 | DataType::Float64) {
            return Err(schema_err(format!(
                "column `weight` is {} (expected f32)",
                types[2]
            )));
        }
        // Their leaf columns in the Parquet schema (each is a primitive, so one leaf each).
        let descr = meta.parquet_schema();
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|&leaf| roots.contains(&descr.get_column_root_idx(leaf)))
            .collect();
        let term_leaf = (0..descr.num_columns())
            .find(|&leaf| descr.get_column_root_idx(leaf) == roots[0])
            .ok_or_else(|| schema_err("column `term` has no values".into()))?;
        if leaves.len() != roots.len() {
            return Err(schema_err(
                "columns term, replica and weight must be flat".into(),
            ));
        }
        limits::check_metadata(meta.metadata(), &leaves, path, limits)?;
        let reader = Arc::new(reader);
        let file_len = reader.len();
        let mut decoded = 0u64;
        let mut footer_rows = 0usize;
        for group in meta.metadata().row_groups() {
            let group_rows = usize::try_from(group.num_rows()).unwrap_or(0);
            footer_rows = footer_rows.saturating_add(group_rows);
            for &leaf in &leaves {
                let chunk = group.column(leaf);
                let pages = pages::walk_chunk(&*reader, file_len, chunk, path, limits)?;
                decoded = decoded.saturating_add(pages.uncompressed);
                if decoded > limits.max_decoded_bytes {
                    return Err(Limit::DecodedBytes.error(
                        path,
                        limits,
                        format!("its pages hold more than {decoded} uncompressed bytes in the columns read"),
                    ));
                }
                if leaf == term_leaf && pages.has_dictionary {
                    pages::check_term_dictionary(&reader, chunk, group_rows, path, limits)?;
                }
            }
        }
        let mask = ProjectionMask::roots(descr, roots);
        let batches = ParquetRecordBatchReaderBuilder::new_with_metadata(Shared(reader), meta)
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(pq)?;
        let mut rows: Vec<TableRow> = Vec::new();
        rows.reserve_exact(footer_rows);
        let mut term_bytes = 0u64;
        let mut distinct: FxHashSet<u64> = FxHashSet::default();
        for batch in batches {
            let batch = batch.map_err(|e| pq(e.into()))?;
            let col = |name: &str| {
                batch
                    .column_by_name(name)
                    .ok_or_else(|| schema_err(format!("missing column `{name}`")))
            };
            let (term_array, replica_array, weight_array) =
                (col("term")?, col("replica")?, col("weight")?);
            let terms = term_array
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    schema_err(format!(
                        "column `term` is {} (expected utf8)",
                        term_array.data_type()
                    ))
                })?;
            check_batch(terms, rows.len(), &mut term_bytes, path, limits)?;
            let replica_values = integer_column(replica_array.as_ref())
                .map_err(|t| schema_err(format!("column `replica` is {t} (expected u16)")))?;
            let weight_values = float_column(weight_array.as_ref())
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
                let term = terms.value(i);
                if distinct.insert(crate::hash::term_hash(term))
                    && distinct.len() as u64 > limits.max_terms
                {
                    return Err(Limit::Terms.error(
                        path,
                        limits,
                        format!("row {row} brings its term count to {}", distinct.len()),
                    ));
                }
                rows.push(TableRow {
                    term: term.to_owned(),
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

/// Checks a batch of terms, whose first row is row `first` of the table, before its rows are
/// materialized: the row count, each term's length and the running total of term bytes.
fn check_batch(
    terms: &StringArray,
    first: usize,
    term_bytes: &mut u64,
    path: &Path,
    limits: &TableLimits,
) -> Result<(), TableError> {
    let rows = (first + terms.len()) as u64;
    if rows > limits.max_rows {
        return Err(Limit::Rows.error(
            path,
            limits,
            format!("it holds more than {} rows", rows - 1),
        ));
    }
    let offsets = terms.value_offsets();
    for (i, w) in offsets.windows(2).enumerate() {
        let len = (w[1] - w[0]) as usize;
        if len > limits.max_term_bytes {
            return Err(Limit::TermBytes.error(
                path,
                limits,
                format!("row {}: a term of {len} bytes", first + i),
            ));
        }
    }
    let batch_bytes = match (offsets.first(), offsets.last()) {
        (Some(&a), Some(&b)) => (b - a) as u64,
        _ => 0,
    };
    *term_bytes = term_bytes.saturating_add(batch_bytes);
    if *term_bytes > limits.max_total_term_bytes {
        return Err(Limit::TotalTermBytes.error(
            path,
            limits,
            format!("rows 0..{rows} hold {} bytes of terms", *term_bytes),
        ));
    }
    Ok(())
}

/// Whether `t` is an integer type [`integer_column`] reads.
fn is_integer(t: &DataType) -> bool {
    matches!(
        t,
        DataType::UInt16
            | DataType::UInt8
            | DataType::Int16
            | DataType::Int32
            | DataType::UInt32
            | DataType::Int64
    )
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
    // A homes table serves any replica count up to its home count (module `virtual_homes`).
    let serves_any = metadata.contains_key(KEY_VHOMES_REPLICAS);
    match (declared, expected) {
        (Some(d), Some(e)) if serves_any && e > d => Err(meta_err(format!(
            "table has {d} homes, too few for {e} replicas"
        ))),
        (Some(d), Some(e)) if d != e && !serves_any => Err(meta_err(format!(
            "table was built for {d} replicas but {e} are configured (a table trained with \
             --virtual-homes serves other counts)"
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
