//! Distinct queries with their record counts, as one DataFusion plan over Parquet files:
//! `SELECT query, count(*) FROM files WHERE query IS NOT NULL GROUP BY query`. The same
//! plan runs embedded or on a Ballista cluster; the result is sorted by text here, so
//! every engine hands training the same list in the same order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::MemTable;
use datafusion::functions_aggregate::expr_fn::count;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ident, lit, DataFrame, SessionConfig, SessionContext};

use super::Engine;

/// Rows per Arrow batch built here.
const BATCH_ROWS: usize = 65_536;

/// Distinct query texts with their record counts, sorted by text (bytewise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryCounts {
    /// `(text, records)`, each text once.
    pub counts: Vec<(String, u64)>,
}

impl QueryCounts {
    /// Records counted (the sum of the counts).
    pub fn records(&self) -> u64 {
        self.counts.iter().map(|&(_, c)| c).sum()
    }

    /// The counts as training takes them.
    pub fn as_refs(&self) -> Vec<(&str, u64)> {
        self.counts.iter().map(|(q, c)| (q.as_str(), *c)).collect()
    }
}

/// Runs `work` on a multi-threaded Tokio runtime (the engines are async).
pub fn block_on<T>(work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(work)
}

/// A session on `engine`. Parquet strings are read as `Utf8`, as Ballista requires.
pub async fn session(engine: &Engine) -> Result<SessionContext> {
    match engine {
        Engine::Embedded => {
            let cfg = SessionConfig::new().set_bool(
                "datafusion.execution.parquet.schema_force_view_types",
                false,
            );
            Ok(SessionContext::new_with_config(cfg))
        }
        Engine::Ballista { scheduler } => {
            use ballista::prelude::SessionContextExt;
            SessionContext::remote(&format!("df://{scheduler}"))
                .await
                .with_context(|| format!("connecting to the Ballista scheduler at {scheduler}"))
        }
    }
}

/// Counts the records of each distinct value of `query_column` in the Parquet `files`
/// (null values are not queries). On Ballista the executors read the files by the same
/// absolute paths: a shared file system, or the same copy on every machine.
pub async fn count_queries(
    ctx: &SessionContext,
    files: &[PathBuf],
    query_column: &str,
) -> Result<QueryCounts> {
    if files.is_empty() {
        bail!("no file to aggregate");
    }
    let urls = files
        .iter()
        .map(|p| {
            let abs = std::path::absolute(p)
                .with_context(|| format!("{}: no absolute path", p.display()))?;
            let s = abs
                .to_str()
                .with_context(|| format!("{}: the path is not UTF-8", abs.display()))?;
            ListingTableUrl::parse(s).with_context(|| format!("{}: not a file URL", abs.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let format = ParquetFormat::default().with_force_view_types(false);
    // Every listed file is data, whatever its extension (`part-0.parquet`, `part-0`).
    let options = ListingOptions::new(Arc::new(format)).with_file_extension("");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&ctx.state())
        .await
        .with_context(|| format!("{}: reading the Parquet schema", files[0].display()))?;
    let table = ListingTable::try_new(config).context("planning the log table")?;
    count_frame(ctx.read_table(Arc::new(table))?, query_column).await
}

/// Counts in-memory query texts (a log in a text format, read by the local readers) with
/// the embedded engine: the same plan over a memory table.
pub async fn count_texts<'a>(
    ctx: &SessionContext,
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<QueryCounts> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "query",
        DataType::Utf8,
        false,
    )]));
    // Batches of BATCH_ROWS texts: one array of every text could pass the 2 GiB a Utf8
    // array's offsets address.
    let mut batches = Vec::new();
    let mut texts = texts.into_iter().peekable();
    while texts.peek().is_some() {
        let chunk: ArrayRef = Arc::new(StringArray::from_iter_values(
            texts.by_ref().take(BATCH_ROWS),
        ));
        batches.push(RecordBatch::try_new(schema.clone(), vec![chunk])?);
    }
    let table = MemTable::try_new(schema, vec![batches])?;
    count_frame(ctx.read_table(Arc::new(table))?, "query").await
}

/// The aggregation itself, over any frame with the query column.
async fn count_frame(df: DataFrame, query_column: &str) -> Result<QueryCounts> {
    let df = df
        .filter(ident(query_column).is_not_null())
        .with_context(|| format!("the log has no column {query_column:?}"))?
        .aggregate(
            vec![ident(query_column).alias("query")],
            vec![count(lit(1)).alias("records")],
        )?;
    let batches = df.collect().await.context("running the aggregation")?;
    let mut counts = Vec::new();
    for b in &batches {
        let texts = cast(b.column(0), &DataType::Utf8).context("query column as text")?;
        let texts = texts.as_string::<i32>();
        let n = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            counts.push((texts.value(i).to_owned(), n.value(i).max(0) as u64));
        }
    }
    counts.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(QueryCounts { counts })
}

/// Writes counts as Parquet: `query` Utf8, `records` Int64, sorted by query.
pub fn write_counts(path: &Path, counts: &QueryCounts) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("query", DataType::Utf8, false),
        Field::new("records", DataType::Int64, false),
    ]));
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = ArrowWriter::try_new(file, schema.clone(), None)?;
    for chunk in counts.counts.chunks(BATCH_ROWS) {
        let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
            chunk.iter().map(|(q, _)| q.as_str()),
        ));
        let n: ArrayRef = Arc::new(Int64Array::from_iter_values(
            chunk
                .iter()
                .map(|&(_, c)| i64::try_from(c).unwrap_or(i64::MAX)),
        ));
        w.write(&RecordBatch::try_new(schema.clone(), vec![texts, n])?)?;
    }
    w.close()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
