//! Bad inputs to `ballot`: each must fail with a non-zero exit code and an error that names
//! the offending file — never a panic.

mod common;

use std::io::Write;
use std::path::Path;

use common::{assert_clean_failure, ballot, stderr};
use data::table::{TableRow, VotingTable};

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

/// Writes a voting table as raw Parquet, bypassing `VotingTable::write_parquet` (which
/// validates and so cannot produce a bad table).
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

/// How a voting-table case builds its bad table file.
enum TableFile {
    /// Raw Parquet for `replicas` with one row voting for `replica` with `weight`.
    Raw {
        replicas: u16,
        replica: u16,
        weight: f32,
    },
    /// Bytes that are not Parquet at all.
    Junk,
}

/// Runs `eval --policies table` with `--replicas replicas` against a bad table file named
/// `file`, and checks the error names the file and mentions `needles`.
fn table_case(file: &str, content: TableFile, replicas: &str, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("q.txt");
    std::fs::write(&log, "hello world\nhello\nworld\nhello there\n").unwrap();
    let table = dir.path().join(file);
    match content {
        TableFile::Raw {
            replicas,
            replica,
            weight,
        } => write_raw_table(&table, replicas, replica, weight),
        TableFile::Junk => std::fs::write(&table, "this is not parquet").unwrap(),
    }
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
            replicas,
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
    let content = TableFile::Raw {
        replicas: 2,
        replica: 2,
        weight: 1.0,
    };
    table_case("far.parquet", content, "2", &["replica 2", "2 replicas"]);
}

#[test]
fn voting_table_with_nan_weight() {
    let content = TableFile::Raw {
        replicas: 2,
        replica: 0,
        weight: f32::NAN,
    };
    table_case("nan.parquet", content, "2", &["NaN"]);
}

#[test]
fn voting_table_for_another_replica_count() {
    let content = TableFile::Raw {
        replicas: 8,
        replica: 0,
        weight: 1.0,
    };
    table_case(
        "eight.parquet",
        content,
        "4",
        &["8 replicas", "4 are configured"],
    );
}

#[test]
fn voting_table_that_is_not_parquet() {
    table_case("junk.parquet", TableFile::Junk, "8", &[]);
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
fn virtual_homes_flags_are_checked_and_need_a_homes_table() {
    let dir = tempfile::tempdir().unwrap();
    assert_clean_failure(
        &["train", "--virtual-homes", "1", "-o", "t.parquet"],
        &["1 virtual homes per replica", "at least 2"],
    );
    // A plain table is no homes table: named, for both modes that need one.
    let plain = dir.path().join("plain.parquet");
    VotingTable::new(8, vec![TableRow::new("hello", 0, 1.0)], Default::default())
        .unwrap()
        .write_parquet(&plain)
        .unwrap();
    let plain = plain.display().to_string();
    assert_clean_failure(
        &[
            "eval",
            "--synth-queries",
            "2000",
            "--table",
            &plain,
            "--movement-from",
            "4",
        ],
        &["plain.parquet", "--virtual-homes"],
    );
    assert_clean_failure(
        &[
            "eval",
            "--synth-queries",
            "2000",
            "--table",
            &plain,
            "--scale-to",
            "12",
        ],
        &["plain.parquet", "--virtual-homes"],
    );
    // A usage error: the ramp of a transition that is not simulated.
    assert_clean_failure(
        &["eval", "--synth-queries", "2000", "--ramp", "10"],
        &["--ramp", "--switch-table or --scale-to"],
    );
}

#[test]
fn cache_admission_is_a_share_and_needs_a_table() {
    // A usage error, from the argument parser.
    let out = ballot(&["eval", "--cache-admission", "0.5"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--table"), "{}", stderr(&out));
    assert_clean_failure(
        &["eval", "--table", "t.parquet", "--cache-admission", "1.5"],
        &["--cache-admission", "(0, 1]", "got 1.5"],
    );
    // The same check in every command that takes it, before any work.
    assert_clean_failure(
        &["grid", "--cache-admission", "0"],
        &["--cache-admission", "(0, 1]", "got 0"],
    );
    assert_clean_failure(
        &["simulate", "--table", "t.parquet", "--cache-admission", "2"],
        &["--cache-admission", "(0, 1]", "got 2"],
    );
    assert_clean_failure(
        &[
            "simulate",
            "--table",
            "t.parquet",
            "--cache-admission",
            "0.5",
            "--shard-routing",
            "pod",
        ],
        &["--cache-admission", "--shard-routing vote"],
    );
    // A policy list without `table` would make the flag do nothing.
    for cmd in ["eval", "simulate"] {
        assert_clean_failure(
            &[
                cmd,
                "--table",
                "t.parquet",
                "--policies",
                "round-robin",
                "--cache-admission",
                "0.5",
            ],
            &["--cache-admission", "add it to --policies"],
        );
    }
}

#[test]
fn unknown_policy_and_eviction_are_named() {
    assert_clean_failure(&["eval", "--policies", "nope"], &["nope", "round-robin"]);
    let out = ballot(&["eval", "--eviction", "arc"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("arc"));
}

#[test]
fn demo_rejects_bad_settings_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let out = out.to_str().unwrap();
    assert_clean_failure(&["demo", "--out", out, "--replicas", "0"], &["--replicas"]);
    assert_clean_failure(
        &["demo", "--out", out, "--train-cache-frac", "1.5"],
        &["--train-cache-frac"],
    );
    assert_clean_failure(
        &["demo", "--out", out, "--live-policies", "nope"],
        &["--live-policies", "nope"],
    );
    assert_clean_failure(
        &["demo", "--out", out, "--cache-admission", "1.1"],
        &["--cache-admission", "(0, 1]"],
    );
    assert_clean_failure(
        &[
            "demo",
            "--out",
            out,
            "--cache-admission",
            "0.5",
            "--shards",
            "2",
        ],
        &["--cache-admission", "--shards"],
    );
    // A 1,000-query log has a 200-query test part: too small for the default live phases.
    assert_clean_failure(
        &["demo", "--out", out, "--synth-queries", "1000"],
        &["test part", "--live-saturate"],
    );
    // Nothing was built: the checks ran first.
    assert!(!tmp.path().join("demo").join("index").exists());
}

#[test]
fn sizes_from_a_terms_dump_and_its_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("terms.tsv");
    std::fs::write(&dump, "term\tdf\nhello\t1000\nworld\t4\n").unwrap();
    let out = dir.path().join("sizes.parquet");
    let (dump_s, out_s) = (dump.display().to_string(), out.display().to_string());
    let run = ballot(&["sizes", "--terms", &dump_s, "-o", &out_s]);
    assert!(run.status.success(), "{}", stderr(&run));
    let table = data::sizes::SizeTable::read_parquet(&out).unwrap();
    assert_eq!(
        (table.len(), table.get("hello"), table.get("world")),
        (2, Some(1016), Some(20))
    );
    // Read in 4 KiB pages, each list costs its page overhead too.
    let run = ballot(&[
        "sizes",
        "--terms",
        &dump_s,
        "--page-bytes",
        "4096",
        "-o",
        &out_s,
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let table = data::sizes::SizeTable::read_parquet(&out).unwrap();
    assert_eq!(
        (table.get("hello"), table.get("world")),
        (Some(1016 + 4095), Some(20 + 4095))
    );
    std::fs::write(&dump, "term\tdf\nhello\t1000\nworld\tfour\n").unwrap();
    assert_clean_failure(
        &["sizes", "--terms", &dump_s, "-o", &out_s],
        &["terms.tsv:3", "\"four\" is not a number"],
    );
}
