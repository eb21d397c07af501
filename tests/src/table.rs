//! Voting tables for the balancer's tests, written where a config can name them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use data::table::{TableRow, VotingTable};

/// Writes a table over `replicas` in which each `(term, replica)` votes for that replica
/// with weight 1, as `dir/table.parquet`, and returns its path.
pub fn write_votes(dir: &Path, replicas: u16, votes: &[(&str, u16)]) -> PathBuf {
    let rows = votes
        .iter()
        .map(|&(term, replica)| TableRow {
            term: term.to_owned(),
            replica,
            weight: 1.0,
        })
        .collect();
    let path = dir.join("table.parquet");
    VotingTable::new(replicas, rows, BTreeMap::new())
        .expect("a valid table")
        .write_parquet(&path)
        .expect("the table written");
    path
}
