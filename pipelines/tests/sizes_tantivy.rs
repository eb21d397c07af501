//! `ballot sizes --tantivy` (the `tantivy` feature) on a real Tantivy index on disk: the
//! table it writes holds every term of the index with its postings bytes, as
//! `tantivy_engine::sizes` reads them, and a directory that is no Tantivy index is a clean
//! error naming it.
#![cfg(feature = "tantivy")]

mod common;

use common::{assert_clean_failure, ballot, stderr};
use data::sizes::SizeTable;

#[test]
fn sizes_come_from_the_tantivy_term_dictionary() {
    let tmp = tempfile::tempdir().unwrap();
    let replica_index = tmp.path().join("replica");
    let pairs = [("alpha", 40u64), ("beta", 900), ("gamma", 1)];
    let pairs: Vec<(String, u64)> = pairs.iter().map(|&(t, d)| (t.to_owned(), d)).collect();
    replica::build_index(&replica_index, 1_000, pairs).unwrap();
    let index = tmp.path().join("tantivy");
    tantivy_engine::build::build(&replica_index, &index, 50 << 20, 1).unwrap();
    let out = tmp.path().join("sizes.parquet");
    let run = ballot(&[
        "sizes",
        "--tantivy",
        index.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let table = SizeTable::read_parquet(&out).unwrap();
    let expected = tantivy_engine::sizes::term_sizes(&index, None)
        .unwrap()
        .sizes;
    assert_eq!(
        table.sorted(),
        expected
            .iter()
            .map(|(t, b)| (t.as_str(), *b))
            .collect::<Vec<_>>()
    );
    assert_eq!(expected.len(), 3);

    let not_an_index = tmp.path().join("empty");
    std::fs::create_dir(&not_an_index).unwrap();
    assert_clean_failure(
        &[
            "sizes",
            "--tantivy",
            not_an_index.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &["empty", "not a readable Tantivy index"],
    );
}
