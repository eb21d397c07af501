//! `ballot eval --table T --replicas R --movement-from R0`: what serving a table over
//! virtual homes on R replicas instead of R0 moves, beside what consistent hashing moves.
//!
//! The figures are shares of the test queries' requested postings bytes: for the table, the
//! bytes of the terms whose home (top vote) changes replica and the bytes of the queries
//! whose first choice (the replica ranked first before any load bound) changes, between its
//! assignments on R0 and on R replicas (`balancer::virtual_homes`); for consistent hashing,
//! the bytes of the queries whose owner changes between rings of R0 and of R replicas with
//! the default virtual nodes (a query's terms live where it goes).

use std::path::Path;

use anyhow::{bail, Context, Result};
use balancer::ring::{Ring, DEFAULT_VNODES};
use balancer::virtual_homes::{moved_work, rebalance};
use cache_sim::sim::movement::{
    movement, query_movement, requested_by_term, ring_movement, top_votes, Movement,
};
use cache_sim::sim::Trace;
use data::table::VotingTable;
use serde::Serialize;

use crate::inputs::table_for;

/// A table over virtual homes compiled for R0 and for R replicas.
pub struct Mapped {
    from: usize,
    to: usize,
    before: VotingTable,
    after: VotingTable,
    moved_work_share: f64,
}

/// The movement of a change of replica count.
#[derive(Clone, Debug, Serialize)]
pub struct Rescale {
    /// The replica count before.
    pub from: usize,
    /// The replica count after.
    pub to: usize,
    /// The table's movement: terms whose home changed.
    pub table_terms: Movement,
    /// The table's movement: queries whose first choice changed.
    pub table: Movement,
    /// Consistent hashing's movement.
    pub consistent_hashing: Movement,
    /// The share of the homes' work (as trained) whose home changed replica.
    pub moved_work_share: f64,
}

/// Reads the table at `path` and compiles it for `from` and for `to` replicas; fails
/// naming the file unless it is over virtual homes and serves both.
pub fn map(path: &Path, from: usize, to: usize) -> Result<Mapped> {
    let r = u16::try_from(to.max(from)).context("--replicas is too large")?;
    let table = VotingTable::read_parquet(path, Some(r))?;
    let label = path.display().to_string();
    let Some(homes) = table.virtual_homes()? else {
        bail!("{label}: --movement-from needs a table trained with --virtual-homes");
    };
    // As the balancer maps them: by the work measured on that count, if the table has it.
    let assignment = |n: usize| {
        let slots: Vec<u16> = (0..n as u16).collect();
        rebalance(homes.work_for(n), &homes.trained, &slots)
    };
    let total: u64 = homes.work.iter().sum();
    let moved = moved_work(&assignment(from), &assignment(to), &homes.work);
    Ok(Mapped {
        from,
        to,
        before: table_for(table.clone(), from, &label)?,
        after: table_for(table, to, &label)?,
        moved_work_share: if total > 0 {
            moved as f64 / total as f64
        } else {
            0.0
        },
    })
}

/// Measures the movement of `mapped` over the test part of `trace`, and prints it.
pub fn measure(trace: &Trace, mapped: &Mapped) -> Result<Rescale> {
    let (from, to) = (mapped.from, mapped.to);
    let test = trace.train_len..trace.len();
    let table_terms = movement(
        &top_votes(trace, &mapped.before),
        &top_votes(trace, &mapped.after),
        &requested_by_term(trace, test.clone()),
    );
    let table = query_movement(trace, test.clone(), &mapped.before, &mapped.after)?;
    let ring = |n| Ring::new(n, DEFAULT_VNODES).map_err(balancer::PolicyError::from);
    let consistent_hashing = ring_movement(trace, test, &ring(from)?, &ring(to)?);
    println!(
        "movement from {from} to {to} replicas, shares of the test queries' requested bytes: table {:.4} by term home, {:.4} by query first choice; consistent hashing {:.4}; homes moved {:.4} of the work",
        table_terms.share(),
        table.share(),
        consistent_hashing.share(),
        mapped.moved_work_share
    );
    Ok(Rescale {
        from,
        to,
        table_terms,
        table,
        consistent_hashing,
        moved_work_share: mapped.moved_work_share,
    })
}
