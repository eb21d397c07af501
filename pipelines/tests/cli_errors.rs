//! Bad inputs to `ballot`: each must fail with a non-zero exit code and an error that names
//! the offending file — never a panic.

mod common;

use std::io::Write;
use std::path::Path;

use common::{ballot, stderr};
use data::table::{TableRow, VotingTable};

fn assert_clean_failure(args: &[&str], needles: &[&str]) {
    let out = ballot(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} should fail; stderr: {err}");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(
            err.contains(n),
            "{args:?}: stderr should mention {n:?}: {err}"
        );
    }
}

fn freq_file(dir: &Path) -> String {
    let p = dir.join("freq.tsv");
    std::fs::write(
        &p,
        "word\tfrequency_per_token\nhello\t0.001\nworld\t0.0001\n",
    )
    .unwrap();
    p.display().to_string()
}

fn eval_args<'a>(log: &'a str, freq: &'a str) -> Vec<&'a str> {
    vec![
        "eval",
        "--log",
        log,
        "--freq",
        freq,
        "--policies",
        "round-robin",
    ]
}

#[test]
fn empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("empty.txt");
    std::fs::write(&log, "").unwrap();
    let (log, freq) = (log.display().to_string(), freq_file(dir.path()));
    assert_clean_failure(&eval_args(&log, &freq), &["empty.txt"]);
}

#[test]
fn log_of_only_malformed_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bad.tsv");
    std::fs::write(
        &log,
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\nonly-one-column\nanother\n",
    )
    .unwrap();
    let (log, freq) = (log.display().to_string(), freq_file(dir.path()));
    assert_clean_failure(&eval_args(&log, &freq), &["bad.tsv", "line 2"]);
}

#[test]
fn missing_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let freq = freq_file(dir.path());
    assert_clean_failure(
        &eval_args("/nonexistent/queries.txt", &freq),
        &["/nonexistent/queries.txt"],
    );
}

#[test]
fn missing_freq_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\n").unwrap();
    let log = log.display().to_string();
    assert_clean_failure(
        &eval_args(&log, "/nonexistent/freq.tsv"),
        &["/nonexistent/freq.tsv"],
    );
}

#[test]
fn truncated_gzip_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..5000 {
        writeln!(gz, "query number {i} about things").unwrap();
    }
    let bytes = gz.finish().unwrap();
    let log = dir.path().join("cut.txt.gz");
    std::fs::write(&log, &bytes[..bytes.len() / 2]).unwrap();
    let (log, freq) = (log.display().to_string(), freq_file(dir.path()));
    assert_clean_failure(&eval_args(&log, &freq), &["cut.txt.gz"]);
}

#[test]
fn parquet_log_with_wrong_schema() {
    // A voting table is valid Parquet but not a query log.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("not-a-log.parquet");
    let table = VotingTable::new(
        2,
        vec![TableRow {
            term: "a".into(),
            replica: 0,
            weight: 1.0,
        }],
        Default::default(),
    )
    .unwrap();
    table.write_parquet(&p).unwrap();
    let (log, freq) = (p.display().to_string(), freq_file(dir.path()));
    assert_clean_failure(&eval_args(&log, &freq), &["not-a-log.parquet", "query"]);
}

/// Writes a table with rows that bypass validation (the writer validates, so build the file
/// from a valid table and patch it through the public API is impossible; write raw Parquet).
fn write_raw_table(path: &Path, replicas: u16, replica: u16, weight: f32) {
    use arrow_array::{Float32Array, RecordBatch, StringArray, UInt16Array};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let schema = Arc::new(Schema::new(vec![
        Field::new("term", DataType::Utf8, false),
        Field::new("replica", DataType::UInt16, false),
        Field::new("weight", DataType::Float32, false),
    ]));
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ballot.replicas".to_owned(),
            replicas.to_string(),
        )]))
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        schema.clone(),
        Some(props),
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["hello"])),
            Arc::new(UInt16Array::from(vec![replica])),
            Arc::new(Float32Array::from(vec![weight])),
        ],
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn table_case(file: &str, replica: u16, weight: f32, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\nhello\nworld\nhello there\n").unwrap();
    let table = dir.path().join(file);
    write_raw_table(&table, 2, replica, weight);
    let (log, freq, table) = (
        log.display().to_string(),
        freq_file(dir.path()),
        table.display().to_string(),
    );
    let mut all = vec![file];
    all.extend_from_slice(needles);
    assert_clean_failure(
        &[
            "eval",
            "--log",
            &log,
            "--freq",
            &freq,
            "--replicas",
            "2",
            "--policies",
            "table",
            "--table",
            &table,
        ],
        &all,
    );
}

#[test]
fn voting_table_with_replica_out_of_range() {
    table_case("far.parquet", 2, 1.0, &["replica 2", "2 replicas"]);
}

#[test]
fn voting_table_with_nan_weight() {
    table_case("nan.parquet", 0, f32::NAN, &["NaN"]);
}

#[test]
fn voting_table_for_another_replica_count() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("eight.parquet");
    write_raw_table(&table, 8, 0, 1.0);
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\nhello\n").unwrap();
    let (log, freq, table) = (
        log.display().to_string(),
        freq_file(dir.path()),
        table.display().to_string(),
    );
    assert_clean_failure(
        &[
            "eval",
            "--log",
            &log,
            "--freq",
            &freq,
            "--replicas",
            "4",
            "--policies",
            "table",
            "--table",
            &table,
        ],
        &["eight.parquet", "8 replicas", "4 are configured"],
    );
}

#[test]
fn voting_table_that_is_not_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("junk.parquet");
    std::fs::write(&table, "this is not parquet").unwrap();
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\n").unwrap();
    let (log, freq, table) = (
        log.display().to_string(),
        freq_file(dir.path()),
        table.display().to_string(),
    );
    assert_clean_failure(
        &[
            "eval",
            "--log",
            &log,
            "--freq",
            &freq,
            "--policies",
            "table",
            "--table",
            &table,
        ],
        &["junk.parquet"],
    );
}

#[test]
fn real_log_without_sizes_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\n").unwrap();
    let log = log.display().to_string();
    assert_clean_failure(&["eval", "--log", &log], &["q.txt", "--sizes", "--freq"]);
}

#[test]
fn unknown_policy_and_eviction_are_named() {
    assert_clean_failure(&["eval", "--policies", "nope"], &["nope", "round-robin"]);
    let out = ballot(&["eval", "--eviction", "arc"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("arc"));
}
