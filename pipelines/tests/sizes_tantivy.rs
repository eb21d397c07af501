//! `ballot sizes --tantivy` (the `tantivy` feature) on a real Tantivy index on disk: the
//! table it writes holds every term of the index with its postings bytes, as
//! `tantivy_engine::sizes` reads them (with each list's page overhead under
//! `--page-bytes`), and a directory that is no Tantivy index is a clean
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
    let expected = tantivy_engine::sizes::term_sizes(&index, None, 0)
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

    // In pages of 4 KiB, each (one-segment) list costs its bytes plus 4095.
    let paged = tmp.path().join("paged.parquet");
    let run = ballot(&[
        "sizes",
        "--tantivy",
        index.to_str().unwrap(),
        "--page-bytes",
        "4096",
        "-o",
        paged.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let paged = SizeTable::read_parquet(&paged).unwrap();
    assert_eq!(
        paged.sorted(),
        expected
            .iter()
            .map(|(t, b)| (t.as_str(), b + 4095))
            .collect::<Vec<_>>()
    );

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
