//! Voting-table hot reload: read a table (from a path or uploaded Parquet bytes) off the
//! request path, validate it against the replica count, compile it, and swap it in to ramp
//! over the configured number of routed queries ([`balancer::ramp`]). A rejected table leaves the old one
//! serving and counts in `ballot_table_reload_failures_total` — the same contract as
//! Envoy's xDS updates (validate, then swap atomically, or keep the last good config).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use data::table::VotingTable;

use crate::metrics as m;
use crate::Balancer;
use balancer::policy::table::TableVotes;
use balancer::policy::TermBytes;

/// Where a table comes from.
#[derive(Debug)]
pub enum Source {
    /// A file on the balancer's machine.
    Path(PathBuf),
    /// An uploaded Parquet file.
    Bytes(Vec<u8>),
}

/// A loaded table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Loaded {
    /// The new table version.
    pub version: u64,
    /// Distinct terms.
    pub terms: usize,
    /// Positive votes.
    pub votes: usize,
    /// Seconds to read and compile.
    pub load_seconds: f64,
    /// Routed queries over which it ramps in.
    pub ramp_queries: u64,
}

/// Why a reload was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The policy does not use a table.
    #[error("policy `{0}` does not use a voting table")]
    NoTable(String),
    /// The table is invalid (unreadable, wrong schema, bad rows, wrong replica count).
    #[error("{0}")]
    Invalid(String),
}

/// A compiled table, the Parquet file it will be served as, and seconds to load it.
pub struct Compiled {
    /// The compiled votes.
    pub votes: TableVotes,
    /// The table as read (over virtual homes, if it is), as `GET /admin/table/parquet`
    /// serves it.
    pub parquet: hyper::body::Bytes,
    /// Seconds to read and compile.
    pub seconds: f64,
    /// The table, if it is over virtual homes ([`crate::router::Router::rescale`]).
    pub homes: Option<Arc<VotingTable>>,
}

/// Reads, validates and compiles a table for a balancer whose table has `columns` columns
/// and whose replicas are in slots `live` (blocking): a plain table must have `columns`
/// replicas, a table over virtual homes is mapped onto the live slots.
pub fn compile(
    source: Source,
    columns: usize,
    live: &[u16],
    term_bytes: Arc<TermBytes>,
) -> Result<Compiled, ReloadError> {
    let start = Instant::now();
    let invalid = |e: &dyn std::fmt::Display| ReloadError::Invalid(e.to_string());
    let expected = u16::try_from(columns).ok();
    let table = match source {
        Source::Path(p) => VotingTable::read_parquet(&p, expected),
        Source::Bytes(b) => VotingTable::from_parquet_bytes(b, Path::new("<upload>"), expected),
    }
    .map_err(|e| invalid(&e))?;
    let votes = match balancer::virtual_homes::for_slots(&table, live).map_err(|e| invalid(&e))? {
        Some(mapped) => TableVotes::build(&mapped, usize::from(mapped.replicas), term_bytes),
        None => TableVotes::build(&table, columns, term_bytes),
    }
    .map_err(|e| invalid(&e))?;
    // Re-encoded from the validated rows: what `GET /admin/table/parquet` serves is what
    // routes.
    let parquet = table
        .to_parquet_bytes(Path::new("<table>"))
        .map_err(|e| invalid(&e))?;
    Ok(Compiled {
        votes,
        parquet: parquet.into(),
        seconds: start.elapsed().as_secs_f64(),
        homes: crate::router::homes_of(&table),
    })
}

/// A table validated without being installed (`POST /admin/table?check=true`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Checked {
    /// Always true: the table would load.
    pub checked: bool,
    /// Its content hash, as `/admin/table` will report it once it serves.
    pub content_hash: String,
    /// Distinct terms.
    pub terms: usize,
    /// Positive votes.
    pub votes: usize,
    /// Its replica count.
    pub replicas: usize,
}

/// Reads, validates and compiles a table as [`reload`] does, and drops it: whether this
/// balancer would take it, for a promotion to several balancers that switches all of them
/// or none (`ballot retrain`).
pub async fn check(lb: &Balancer, source: Source) -> Result<Checked, ReloadError> {
    let votes = compile_off_path(lb, source).await?.votes;
    let replicas = votes.replicas();
    Ok(Checked {
        checked: true,
        content_hash: crate::router::hash_hex(votes.content_hash()),
        terms: votes.terms(),
        votes: votes.vote_count(),
        replicas,
    })
}

/// Publishes the table-load gauges.
pub fn record_load(version: u64, load_seconds: f64) {
    metrics::gauge!(m::TABLE_VERSION).set(version as f64);
    metrics::gauge!(m::TABLE_LOAD_SECONDS).set(load_seconds);
    metrics::gauge!(m::TABLE_LOADED_AT).set(crate::stats::unix_now());
}

/// Loads a table and swaps it in, or rejects it and keeps the old one.
pub async fn reload(lb: &Balancer, source: Source) -> Result<Loaded, ReloadError> {
    let result = reload_inner(lb, source).await;
    match &result {
        Ok(l) => tracing::info!(
            "table version {} loaded ({} terms, {} votes, {:.3}s), ramping over {} queries",
            l.version,
            l.terms,
            l.votes,
            l.load_seconds,
            l.ramp_queries
        ),
        Err(e) => {
            metrics::counter!(m::RELOAD_FAILURES).increment(1);
            tracing::warn!("table reload rejected, the old table keeps serving: {e}");
        }
    }
    result
}

/// Reads and compiles a table for the served table's columns and the live replicas on a
/// blocking thread.
async fn compile_off_path(lb: &Balancer, source: Source) -> Result<Compiled, ReloadError> {
    let Some(columns) = lb.router.table_replicas() else {
        return Err(ReloadError::NoTable(lb.router.kind.to_string()));
    };
    let live = lb.live_slots();
    let term_bytes = Arc::clone(&lb.router.term_bytes);
    tokio::task::spawn_blocking(move || compile(source, columns, &live, term_bytes))
        .await
        .map_err(|e| ReloadError::Invalid(format!("table loader failed: {e}")))?
}

async fn reload_inner(lb: &Balancer, source: Source) -> Result<Loaded, ReloadError> {
    let Compiled {
        votes,
        parquet,
        seconds: load_seconds,
        homes,
    } = compile_off_path(lb, source).await?;
    let (terms, nvotes) = (votes.terms(), votes.vote_count());
    let version = lb
        .router
        .install_table(votes, parquet, homes)
        .map_err(|e| ReloadError::NoTable(e.to_string()))?;
    // A replica that joined or left while the table compiled: map it onto them now.
    lb.rescale_table();
    record_load(version, load_seconds);
    Ok(Loaded {
        version,
        terms,
        votes: nvotes,
        load_seconds,
        ramp_queries: lb.cfg.config.ramp_queries,
    })
}
