//! Which files an engine reads: a Parquet log file, or the partitions of a directory that
//! `--from/--to` select. An engine reads whole files, so a range must not cut through a
//! partition's day (local reads filter records by time instead; see docs/logs.md). The
//! schema, and so the query column, comes from the first file (DataFusion infers a listed
//! table's schema from one file too): the partitions of one log share a schema.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use querylog::{list_partitions, parquet_layout, LayoutSpec, Shape, TimeRange, DAY_MS};

/// The files to aggregate, in path order, with their partition days (unix ms at midnight
/// UTC; None for a single file).
pub struct EngineInput {
    /// `(file, day)`.
    pub files: Vec<(PathBuf, Option<i64>)>,
    /// The query column, by the layout rules of the local readers.
    pub query_column: String,
}

/// Selects the files of `log` inside `range` and finds the query column.
pub fn select(log: &Path, range: &TimeRange, spec: &LayoutSpec) -> Result<EngineInput> {
    let bounded = range.from_ms.is_some() || range.to_ms.is_some();
    let files: Vec<(PathBuf, Option<i64>)> = if log.is_dir() {
        let mut out = Vec::new();
        for f in list_partitions(log)? {
            let day = f.span().filter(|(s, e)| e - s == DAY_MS).map(|(s, _)| s);
            match day {
                Some(d) if bounded && !range.overlaps(d, d + DAY_MS) => {}
                Some(d) if bounded && !(range.contains(d) && range.contains(d + DAY_MS - 1)) => {
                    bail!(
                        "{}: --from/--to cut through the day of partition {}; an engine reads whole partitions, so give dates (--from 2006-03-01 --to 2006-03-14)",
                        log.display(),
                        f.label()
                    )
                }
                None if bounded => bail!(
                    "{}: partition {} is not named by a date (date=YYYY-MM-DD), so --from/--to cannot select it",
                    log.display(),
                    f.label()
                ),
                _ => out.push((f.path, day)),
            }
        }
        if out.is_empty() {
            bail!("{}: no partition is inside --from/--to", log.display());
        }
        out
    } else {
        if bounded {
            bail!(
                "{}: with an engine, --from/--to select the partitions of a directory (date=YYYY-MM-DD/...); a single file is read whole",
                log.display()
            );
        }
        vec![(log.to_owned(), None)]
    };
    let first = &files[0].0;
    if !is_parquet(first) {
        bail!(
            "{}: not a Parquet file; an engine reads Parquet logs, so convert other formats with `ballot ingest` (--partition-by-day for a directory)",
            first.display()
        );
    }
    let layout = parquet_layout(first, spec)?;
    let Shape::Parquet(columns) = layout.shape else {
        bail!("{}: not a Parquet log", first.display());
    };
    Ok(EngineInput {
        files,
        query_column: columns.query,
    })
}

/// Whether `path` starts with Parquet's magic bytes.
pub fn is_parquet(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"PAR1")
}
