//! Training is deterministic across processes: two `ballot train` runs with the same seed
//! write the same voting table (rows and every metadata key but the stage timings and the
//! creation time), and a
//! different seed writes a different one, so the comparison can fail.

mod common;

use std::path::Path;

use common::{ballot, stderr};
use data::table::VotingTable;

fn train(out: &Path, seed: &str) -> VotingTable {
    let run = ballot(&[
        "train",
        "--synth-queries",
        "20000",
        "--replicas",
        "4",
        "--seed",
        seed,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    VotingTable::read_parquet(out, Some(4)).unwrap()
}

fn stable_metadata(t: &VotingTable) -> Vec<(String, String)> {
    let mut m: Vec<(String, String)> = t
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("ballot.train.seconds.") && *k != "ballot.created_at")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    m.sort();
    m
}

#[test]
fn two_processes_train_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let a = train(&dir.path().join("a.parquet"), "1");
    let b = train(&dir.path().join("b.parquet"), "1");
    assert!(!a.rows.is_empty());
    assert_eq!(a.rows, b.rows, "same seed, different tables");
    assert_eq!(stable_metadata(&a), stable_metadata(&b));
    let c = train(&dir.path().join("c.parquet"), "2");
    assert_ne!(a.rows, c.rows, "the seed does not reach training");
}
