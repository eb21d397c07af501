//! The Parquet query log: what `ballot ingest` writes and every later stage reads.
//!
//! Schema written: `ts` Timestamp(Millisecond, no time zone) nullable, `user` Utf8 nullable,
//! `query` Utf8 non-null; Snappy compression; row groups of [`ROW_GROUP_ROWS`] rows.
//!
//! Schema read: a `query` string column (Utf8, LargeUtf8 or Utf8View) is required; `ts`
//! (Timestamp of any unit and time zone, converted to unix milliseconds, or Int64 taken as
//! unix milliseconds) and `user` (a string type) are optional; other columns are ignored and
//! not even decoded (column projection). Anything else is a [`LogError::ParquetSchema`] that
//! says what was expected and what the file has. The file is read record batch by record
//! batch; each row costs only its record's own strings (repeats cost nothing). A row with a
//! null `query` is malformed (counted with its 1-based row number, skipped).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::collapse::Collector;
use super::{LogError, LogRecord};

/// Rows per row group (and per record batch) when writing.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;
/// Rows per record batch when reading.
const READ_BATCH_ROWS: usize = 8192;

/// What a query-log Parquet file must look like, for error messages.
const EXPECTED: &str = "a `query` column of type Utf8 (with optional `ts` Timestamp(Millisecond) \
     or Int64 and `user` Utf8 columns)";

/// The Arrow schema of the Parquet query log this crate writes.
pub fn log_schema() -> Schema {
    Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("user", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, false),
    ])
}

/// Writes `records` as a Parquet query log (schema [`log_schema`], Snappy, row groups of
/// [`ROW_GROUP_ROWS`]). An existing file is replaced.
pub fn write_log_parquet(path: &Path, records: &[LogRecord]) -> Result<(), LogError> {
    let write_err = |detail: String| LogError::ParquetWrite {
        path: path.to_owned(),
        detail,
    };
    let schema: SchemaRef = Arc::new(log_schema());
    let file = File::create(path).map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let mut writer = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        Arc::clone(&schema),
        Some(props),
    )
    .map_err(|e| write_err(e.to_string()))?;
    for chunk in records.chunks(ROW_GROUP_ROWS) {
        let ts: TimestampMillisecondArray = chunk.iter().map(|r| r.ts).collect();
        let user: StringArray = chunk.iter().map(|r| r.user.as_deref()).collect();
        let query = StringArray::from_iter_values(chunk.iter().map(|r| r.query.as_str()));
        let columns: Vec<ArrayRef> = vec![Arc::new(ts), Arc::new(user), Arc::new(query)];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
            .map_err(|e| write_err(e.to_string()))?;
        writer.write(&batch).map_err(|e| write_err(e.to_string()))?;
    }
    let mut out = writer.into_inner().map_err(|e| write_err(e.to_string()))?;
    out.flush().map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(())
}

/// A string column of any of Arrow's string layouts.
enum StrCol<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> StrCol<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        match array.data_type() {
            DataType::Utf8 => array.as_string_opt::<i32>().map(StrCol::Utf8),
            DataType::LargeUtf8 => array.as_string_opt::<i64>().map(StrCol::Large),
            DataType::Utf8View => array.as_string_view_opt().map(StrCol::View),
            _ => None,
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            StrCol::Utf8(a) => (!a.is_null(i)).then(|| a.value(i)),
            StrCol::Large(a) => (!a.is_null(i)).then(|| a.value(i)),
            StrCol::View(a) => (!a.is_null(i)).then(|| a.value(i)),
        }
    }
}

/// A time column: its raw i64 values and how to turn them into milliseconds.
struct TsCol<'a> {
    array: &'a dyn Array,
    values: &'a [i64],
    unit: TimeUnit,
}

impl<'a> TsCol<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        let (values, unit): (&[i64], TimeUnit) = match array.data_type() {
            DataType::Int64 => (
                array.as_primitive_opt::<Int64Type>()?.values(),
                TimeUnit::Millisecond,
            ),
            DataType::Timestamp(TimeUnit::Second, _) => (
                array.as_primitive_opt::<TimestampSecondType>()?.values(),
                TimeUnit::Second,
            ),
            DataType::Timestamp(TimeUnit::Millisecond, _) => (
                array
                    .as_primitive_opt::<TimestampMillisecondType>()?
                    .values(),
                TimeUnit::Millisecond,
            ),
            DataType::Timestamp(TimeUnit::Microsecond, _) => (
                array
                    .as_primitive_opt::<TimestampMicrosecondType>()?
                    .values(),
                TimeUnit::Microsecond,
            ),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => (
                array
                    .as_primitive_opt::<TimestampNanosecondType>()?
                    .values(),
                TimeUnit::Nanosecond,
            ),
            _ => return None,
        };
        Some(TsCol {
            array,
            values,
            unit,
        })
    }

    #[inline]
    fn get_ms(&self, i: usize) -> Option<i64> {
        if self.array.is_null(i) {
            return None;
        }
        let v = *self.values.get(i)?;
        Some(match self.unit {
            TimeUnit::Second => v.saturating_mul(1000),
            TimeUnit::Millisecond => v,
            TimeUnit::Microsecond => v.div_euclid(1000),
            TimeUnit::Nanosecond => v.div_euclid(1_000_000),
        })
    }
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn is_time(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::Timestamp(_, _))
}

/// `name: type, ...` of every top-level column.
fn describe(schema: &Schema) -> String {
    if schema.fields().is_empty() {
        return "no columns".to_owned();
    }
    let cols: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("`{}`: {}", f.name(), f.data_type()))
        .collect();
    format!("columns {}", cols.join(", "))
}

/// The root column indices to read (`query`, then `ts` and `user` when present), or the
/// schema mismatch.
fn plan(path: &Path, schema: &Schema) -> Result<Vec<usize>, LogError> {
    let mismatch = |expected: String| LogError::ParquetSchema {
        path: path.to_owned(),
        expected,
        found: describe(schema),
    };
    let query = match schema.index_of("query") {
        Ok(i) if is_string(schema.field(i).data_type()) => i,
        Ok(_) => {
            return Err(mismatch(
                "`query` of type Utf8, LargeUtf8 or Utf8View".to_owned(),
            ))
        }
        Err(_) => return Err(mismatch(EXPECTED.to_owned())),
    };
    let mut roots = vec![query];
    if let Ok(i) = schema.index_of("ts") {
        if !is_time(schema.field(i).data_type()) {
            return Err(mismatch(
                "`ts` of type Timestamp(Millisecond) (any unit accepted) or Int64".to_owned(),
            ));
        }
        roots.push(i);
    }
    if let Ok(i) = schema.index_of("user") {
        if !is_string(schema.field(i).data_type()) {
            return Err(mismatch(
                "`user` of type Utf8, LargeUtf8 or Utf8View".to_owned(),
            ));
        }
        roots.push(i);
    }
    Ok(roots)
}

/// Reads a Parquet query log from an opened file.
pub(crate) fn read_parquet(
    path: &Path,
    file: File,
    keep_repeats: bool,
) -> Result<Collector, LogError> {
    let parquet_err = |source| LogError::Parquet {
        path: path.to_owned(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    let roots = plan(path, builder.schema())?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(parquet_err)?;

    let mut c = Collector::new(keep_repeats);
    let mut row: u64 = 0;
    for batch in reader {
        let batch = batch.map_err(|source| LogError::ParquetBatch {
            path: path.to_owned(),
            source,
        })?;
        let projected = batch.schema();
        let query = batch
            .column_by_name("query")
            .and_then(|a| StrCol::new(a.as_ref()))
            .ok_or_else(|| LogError::ParquetSchema {
                path: path.to_owned(),
                expected: EXPECTED.to_owned(),
                found: describe(&projected),
            })?;
        let ts = batch
            .column_by_name("ts")
            .and_then(|a| TsCol::new(a.as_ref()));
        let user = batch
            .column_by_name("user")
            .and_then(|a| StrCol::new(a.as_ref()));
        for i in 0..batch.num_rows() {
            row += 1;
            c.lines += 1;
            let Some(q) = query.get(i) else {
                c.malformed(row, "null query");
                continue;
            };
            let t = ts.as_ref().and_then(|t| t.get_ms(i));
            let u = user.as_ref().and_then(|u| u.get(i));
            c.push(t, u, q);
        }
    }
    Ok(c)
}
