//! The Parquet query log: what `ballot ingest` writes and every later stage reads.
//!
//! Schema written: `ts` Timestamp(Millisecond, no time zone) nullable, `user` Utf8 nullable,
//! `query` Utf8 non-null; Snappy compression; row groups of [`ROW_GROUP_ROWS`] rows.
//!
//! Schema read: a query string column (Utf8, LargeUtf8 or Utf8View) is required; a time
//! column (Timestamp of any unit and time zone, converted to unix milliseconds, or Int64
//! taken as unix milliseconds, or seconds with `--time-format epoch-s`) and a user column (a
//! string type, or an integer id) are optional; other columns are ignored and not even
//! decoded (column projection). The columns are the ones `--query-column`, `--time-column`
//! and `--user-column` name, else `query`, `ts` and `user`, else the first whose names
//! announce them (`Query`, `QueryTime`, `AnonID`, ...; see
//! [`header_role`]). Anything else is a [`LogError::ParquetSchema`] that
//! says what was expected and what the file has. The file is read record batch by record
//! batch; each row costs only its record's own strings (repeats cost nothing). A row with a
//! null `query` is malformed (counted with its 1-based row number, skipped).
//!
//! A corrupt file is an error, never a crash, through the guard the voting-table loader uses
//! too ([`data::parquet_guard`]): column chunks must lie inside the file, their pages inside
//! them (a walk over every page header before anything is decoded) and no bigger than
//! [`MAX_PAGE_BYTES`] uncompressed, and the decoders' internal assertions (which the
//! `parquet` and `arrow` crates make instead of returning errors on some corrupt pages) are
//! caught and reported as [`LogError::ParquetCorrupt`]. Such a panic still reaches the
//! process's panic hook; this library never replaces it (a binary may, with
//! [`data::parquet_guard::quiet_decoder_panics`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

use data::parquet_guard;

use crate::collapse::{Collector, PREVIEW_RECORDS};
use crate::format::{header_role, LogFormat, Role};
use crate::layout::{ColumnRef, Layout, LayoutSpec, ParquetColumns, Shape};
use crate::text::OnStart;
use crate::time::TimeFormat;
use crate::{LogError, LogRecord, ReadOptions};

/// The largest uncompressed page accepted. Writers use 1 MiB pages by default (this crate
/// writes 1 MiB pages too); dictionary pages of large vocabularies can be bigger.
pub const MAX_PAGE_BYTES: u64 = 256 << 20;

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
    /// `seconds`: an Int64 column holds epoch seconds (else epoch milliseconds).
    fn new(array: &'a dyn Array, seconds: bool) -> Option<Self> {
        let int_unit = if seconds {
            TimeUnit::Second
        } else {
            TimeUnit::Millisecond
        };
        let (values, unit): (&[i64], TimeUnit) = match array.data_type() {
            DataType::Int64 => (array.as_primitive_opt::<Int64Type>()?.values(), int_unit),
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

fn is_int(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int32 | DataType::Int64 | DataType::UInt32 | DataType::UInt64
    )
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

/// The column playing `role`: the one `given` names (exactly, then ignoring case; or by
/// 1-based position), else the one called `default`, else the first whose name announces
/// the role ([`header_role`]: `Query`, `AnonID`, `timestamp`, ...).
fn find_column(
    path: &Path,
    schema: &Schema,
    role: Role,
    given: Option<&ColumnRef>,
    default: &str,
) -> Result<Option<usize>, LogError> {
    let fields = schema.fields();
    let not_found = |what: String| LogError::ParquetSchema {
        path: path.to_owned(),
        expected: what,
        found: describe(schema),
    };
    match given {
        Some(ColumnRef::Index(i)) if *i < fields.len() => Ok(Some(*i)),
        Some(ColumnRef::Index(i)) => {
            Err(not_found(format!("a column {} for --{role}-column", i + 1)))
        }
        Some(ColumnRef::Name(n)) => fields
            .iter()
            .position(|f| f.name() == n)
            .or_else(|| fields.iter().position(|f| f.name().eq_ignore_ascii_case(n)))
            .map(Some)
            .ok_or_else(|| not_found(format!("a column `{n}` for --{role}-column"))),
        None => Ok(schema.index_of(default).ok().or_else(|| {
            fields
                .iter()
                .position(|f| header_role(f.name()) == Some(role))
        })),
    }
}

/// The root column indices to read (query, then time and user when present) and the
/// layout, or the schema mismatch.
fn plan(path: &Path, schema: &Schema, spec: &LayoutSpec) -> Result<(Vec<usize>, Layout), LogError> {
    let mismatch = |expected: String| LogError::ParquetSchema {
        path: path.to_owned(),
        expected,
        found: describe(schema),
    };
    let name = |i: usize| schema.field(i).name().clone();
    let ty = |i: usize| schema.field(i).data_type().to_string();
    let query = match find_column(
        path,
        schema,
        Role::Query,
        spec.query_column.as_ref(),
        "query",
    )? {
        Some(i) if is_string(schema.field(i).data_type()) => i,
        Some(i) => {
            return Err(mismatch(format!(
                "`{}` of type Utf8, LargeUtf8 or Utf8View",
                name(i)
            )))
        }
        None => return Err(mismatch(EXPECTED.to_owned())),
    };
    let mut roots = vec![query];
    let time = find_column(path, schema, Role::Time, spec.time_column.as_ref(), "ts")?;
    if let Some(i) = time {
        if !is_time(schema.field(i).data_type()) {
            return Err(mismatch(format!(
                "`{}` of type Timestamp(Millisecond) (any unit accepted) or Int64",
                name(i)
            )));
        }
        roots.push(i);
    }
    let user = find_column(path, schema, Role::User, spec.user_column.as_ref(), "user")?;
    if let Some(i) = user {
        let t = schema.field(i).data_type();
        if !is_string(t) && !is_int(t) {
            return Err(mismatch(format!(
                "`{}` of type Utf8, LargeUtf8, Utf8View or an integer",
                name(i)
            )));
        }
        roots.push(i);
    }
    let distinct = |a: Option<usize>, b: Option<usize>| a.is_none() || a != b;
    if !distinct(Some(query), time) || !distinct(Some(query), user) || !distinct(time, user) {
        return Err(mismatch("distinct query, time and user columns".to_owned()));
    }
    let layout = Layout {
        format: LogFormat::Parquet,
        header: false,
        detected: spec.format.is_none(),
        shape: Shape::Parquet(ParquetColumns {
            query: name(query),
            user: user.map(|i| (name(i), ty(i))),
            time: time.map(|i| (name(i), ty(i))),
            int_time: spec.time_format.clone().unwrap_or(TimeFormat::EpochMs),
        }),
    };
    Ok((roots, layout))
}

/// The layout of a Parquet log from its schema alone (no row is read): which columns
/// hold the query, time and user, by the rules [`read_log`](crate::read_log) uses. For
/// engines that read the file themselves (`ballot train --engine`).
pub fn parquet_layout(path: &Path, spec: &LayoutSpec) -> Result<Layout, LogError> {
    let file = File::open(path).map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| LogError::Parquet {
            path: path.to_owned(),
            source,
        })?;
    Ok(plan(path, builder.schema(), spec)?.1)
}

/// A user column: a string, or an integer id written out in decimal.
enum UserCol<'a> {
    Str(StrCol<'a>),
    Int(&'a dyn Array),
}

impl<'a> UserCol<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        if is_int(array.data_type()) {
            Some(UserCol::Int(array))
        } else {
            StrCol::new(array).map(UserCol::Str)
        }
    }

    /// The user of row `i`, written into `buf` for integers.
    #[inline]
    fn get<'b>(&'b self, i: usize, buf: &'b mut String) -> Option<&'b str> {
        use std::fmt::Write;
        match self {
            UserCol::Str(s) => s.get(i),
            UserCol::Int(a) => {
                if a.is_null(i) {
                    return None;
                }
                buf.clear();
                let _ = match a.data_type() {
                    DataType::Int32 => write!(buf, "{}", a.as_primitive::<Int32Type>().value(i)),
                    DataType::Int64 => write!(buf, "{}", a.as_primitive::<Int64Type>().value(i)),
                    DataType::UInt32 => write!(buf, "{}", a.as_primitive::<UInt32Type>().value(i)),
                    DataType::UInt64 => write!(buf, "{}", a.as_primitive::<UInt64Type>().value(i)),
                    _ => return None,
                };
                Some(buf.as_str())
            }
        }
    }
}

/// Checks that every column chunk of the metadata lies inside the file and that its pages
/// do, each at most [`MAX_PAGE_BYTES`] uncompressed ([`parquet_guard`]), before anything
/// is decoded.
fn check_chunks(
    path: &Path,
    meta: &ParquetMetaData,
    file: &File,
    file_len: u64,
) -> Result<(), LogError> {
    let corrupt = |detail: String| LogError::ParquetCorrupt {
        path: path.to_owned(),
        detail,
    };
    for (r, rg) in meta.row_groups().iter().enumerate() {
        if rg.num_rows() < 0 {
            return Err(corrupt(format!("row group {r} has {} rows", rg.num_rows())));
        }
        for c in rg.columns() {
            let at = || format!("row group {r}, column `{}`", c.column_path().string());
            let (start, len) = parquet_guard::chunk_range(c, file_len)
                .map_err(|e| corrupt(format!("{}: {e}", at())))?;
            for page in parquet_guard::pages(file, start, len) {
                let page = page.map_err(|e| corrupt(format!("{}: {e}", at())))?;
                if page.uncompressed > MAX_PAGE_BYTES {
                    return Err(corrupt(format!(
                        "{}: page {} at byte {} announces {} bytes uncompressed, more than \
                         the {MAX_PAGE_BYTES} this reader accepts",
                        at(),
                        page.index,
                        page.offset,
                        page.uncompressed
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Reads a Parquet query log from an opened file. The Parquet and Arrow decoders assert
/// some invariants of the data instead of returning errors; a corrupt file that trips one
/// is reported as [`LogError::ParquetCorrupt`], not as a crash
/// ([`parquet_guard::catch_decoder_panic`]).
pub(crate) fn read_parquet(
    path: &Path,
    file: File,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
    collector: Collector,
) -> Result<(Layout, Collector), LogError> {
    parquet_guard::catch_decoder_panic(|| read_parquet_inner(path, file, opts, on_start, collector))
        .unwrap_or_else(|panic| {
            Err(LogError::ParquetCorrupt {
                path: path.to_owned(),
                detail: format!("the Parquet decoder failed: {panic}"),
            })
        })
}

fn read_parquet_inner(
    path: &Path,
    file: File,
    opts: &ReadOptions,
    on_start: OnStart<'_>,
    collector: Collector,
) -> Result<(Layout, Collector), LogError> {
    let parquet_err = |source| LogError::Parquet {
        path: path.to_owned(),
        source,
    };
    let file_len = file
        .metadata()
        .map_err(|source| LogError::Io {
            path: path.to_owned(),
            source,
        })?
        .len();
    let pages_file = file.try_clone().map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    check_chunks(path, builder.metadata(), &pages_file, file_len)?;
    let (roots, layout) = plan(path, builder.schema(), &opts.layout)?;
    let names = match &layout.shape {
        Shape::Parquet(p) => (
            p.query.clone(),
            p.time.as_ref().map(|t| t.0.clone()),
            p.user.as_ref().map(|u| u.0.clone()),
        ),
        _ => unreachable_layout(path)?,
    };
    let seconds = opts.layout.time_format == Some(TimeFormat::EpochS);
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(parquet_err)?;

    let mut c = collector;
    let mut row: u64 = 0;
    let mut announced = false;
    let mut user_buf = String::new();
    for batch in reader {
        let batch = batch.map_err(|source| LogError::ParquetBatch {
            path: path.to_owned(),
            source,
        })?;
        let projected = batch.schema();
        let query = batch
            .column_by_name(&names.0)
            .and_then(|a| StrCol::new(a.as_ref()))
            .ok_or_else(|| LogError::ParquetSchema {
                path: path.to_owned(),
                expected: EXPECTED.to_owned(),
                found: describe(&projected),
            })?;
        let ts = names
            .1
            .as_ref()
            .and_then(|n| batch.column_by_name(n))
            .and_then(|a| TsCol::new(a.as_ref(), seconds));
        let user = names
            .2
            .as_ref()
            .and_then(|n| batch.column_by_name(n))
            .and_then(|a| UserCol::new(a.as_ref()));
        for i in 0..batch.num_rows() {
            row += 1;
            c.lines += 1;
            let Some(q) = query.get(i) else {
                c.malformed(row, "null query");
                continue;
            };
            let t = ts.as_ref().and_then(|t| t.get_ms(i));
            let u = user.as_ref().and_then(|u| u.get(i, &mut user_buf));
            c.push(t, u, q);
        }
        opts.on_rows.crossed(row - batch.num_rows() as u64, row);
        if !announced && c.records.len() >= PREVIEW_RECORDS {
            on_start(&layout, &c.records[..PREVIEW_RECORDS]);
            announced = true;
        }
    }
    if !announced {
        on_start(&layout, &c.records);
    }
    Ok((layout, c))
}

/// A Parquet plan always yields a Parquet layout; anything else is a bug reported as an
/// error rather than a panic.
fn unreachable_layout<T>(path: &Path) -> Result<T, LogError> {
    Err(LogError::ParquetSchema {
        path: path.to_owned(),
        expected: "a Parquet layout".to_owned(),
        found: "another layout".to_owned(),
    })
}
