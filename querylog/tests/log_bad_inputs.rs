//! Query-log readers on bad inputs: each is an error whose message names the file, or a
//! report of malformed lines with their line numbers; never a panic, never a silent
//! partial read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use flate2::write::GzEncoder;
use flate2::Compression;
use parquet::arrow::ArrowWriter;
use proptest::prelude::*;
use querylog::time::TimeFormat;
use querylog::{read_log, write_log_parquet, LayoutSpec, LogError, LogRecord, ReadOptions};
use tempfile::TempDir;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Reads `path` expecting an error whose message names the file; returns the error.
fn expect_err(path: &Path) -> LogError {
    expect_err_with(path, &ReadOptions::default())
}

/// [`expect_err`] with `opts`.
fn expect_err_with(path: &Path, opts: &ReadOptions) -> LogError {
    let err = match read_log(path, opts) {
        Ok(log) => panic!("expected an error, got {}", log.report.summary()),
        Err(e) => e,
    };
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "message does not name the file: {msg}"
    );
    err
}

/// A text log of some thousands of lines, big enough for truncation to hit the middle of
/// the deflate stream.
fn big_tsv() -> String {
    let mut s = String::from("timestamp\tanon_id\tquery\n");
    for i in 0..5000 {
        s.push_str(&format!(
            "2006-03-01 {:02}:{:02}:{:02}\t{}\tquery number {i} about {}\n",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60,
            i % 17,
            i * 7919 % 1013
        ));
    }
    s
}

#[test]
fn missing_file() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("no-such-log.tsv.gz");
    let err = expect_err(&path);
    assert!(matches!(err, LogError::NotFound { .. }), "{err}");
}

#[test]
fn directory_is_an_io_error() {
    let dir = TempDir::new().unwrap();
    let err = expect_err(dir.path());
    assert!(matches!(err, LogError::Io { .. }), "{err}");
}

#[test]
fn empty_file() {
    let dir = TempDir::new().unwrap();
    let err = expect_err(&write(&dir, "empty.txt", b""));
    assert!(matches!(err, LogError::NoData { .. }), "{err}");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn empty_gzip() {
    let dir = TempDir::new().unwrap();
    let err = expect_err(&write(&dir, "empty.gz", &gzip(b"")));
    assert!(matches!(err, LogError::NoData { .. }), "{err}");
}

#[test]
fn header_only() {
    let dir = TempDir::new().unwrap();
    for (name, text) in [
        ("query.txt", "Query\n"),
        ("tsv.tsv", "timestamp\tanon_id\tquery\n"),
        ("aol.txt", "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"),
    ] {
        let err = expect_err(&write(&dir, name, text.as_bytes()));
        assert!(matches!(err, LogError::NoData { .. }), "{err}");
        assert!(err.to_string().contains("header"), "{err}");
    }
}

#[test]
fn only_blank_lines() {
    let dir = TempDir::new().unwrap();
    let err = expect_err(&write(&dir, "blank.txt", b"\n  \n\t\n"));
    assert!(err.to_string().contains("3 blank lines"), "{err}");
}

#[test]
fn only_malformed_lines() {
    let dir = TempDir::new().unwrap();
    let mut text = String::from("timestamp\tanon_id\tquery\n");
    for i in 0..8 {
        text.push_str(&format!("yesterday\t{i}\tq\n"));
    }
    let path = write(&dir, "bad.tsv", text.as_bytes());
    // Without --time-format, a time column that reads as no detected format is refused
    // before any line is read ...
    let err = expect_err(&path);
    assert!(matches!(err, LogError::Layout { .. }), "{err}");
    assert!(err.to_string().contains("--time-format"), "{err}");
    // ... and with it, every line is malformed, the first five kept as examples.
    let iso = ReadOptions {
        layout: LayoutSpec {
            time_format: Some(TimeFormat::Iso),
            ..LayoutSpec::default()
        },
        ..ReadOptions::default()
    };
    let err = expect_err_with(&path, &iso);
    let LogError::AllMalformed { count, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*count, 8);
    let msg = err.to_string();
    assert!(msg.contains("8 malformed"), "{msg}");
    assert!(msg.contains("line 2: bad timestamp \"yesterday\""), "{msg}");
    assert!(msg.contains("line 6:"), "{msg}");
    assert!(
        !msg.contains("line 7:"),
        "only the first five examples: {msg}"
    );
    assert!(msg.contains("..."), "{msg}");
}

#[test]
fn malformed_lines_reported_with_line_numbers() {
    let dir = TempDir::new().unwrap();
    let mut text = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n".to_vec();
    text.extend_from_slice(b"1\tgood one\t2006-03-01 07:17:12\t\t\n"); // 2
    text.extend_from_slice(b"1\tonly two\n"); // 3: columns
    text.extend_from_slice(b"1\tbad date\t2006-02-30 07:17:12\n"); // 4: time
    text.extend_from_slice(b"1\tbad \xff utf8\t2006-03-01 07:17:12\n"); // 5: utf-8
    text.extend_from_slice(b"2\tgood two\t2006-03-01 07:17:13\t1\thttp://x\n"); // 6
    text.extend_from_slice(b"1\ta\t2006-03-01 07:17:12\t\t\textra\n"); // 7: columns
    text.extend_from_slice(b"1\t2006-03-01 07:17:12\n"); // 8: columns
    let path = write(&dir, "aol.txt", &text);
    let log = read_log(&path, &ReadOptions::default()).unwrap();
    let r = &log.report;
    assert_eq!(log.queries().collect::<Vec<_>>(), ["good one", "good two"]);
    assert_eq!(r.lines, 7);
    assert_eq!(r.malformed, 5);
    let lines: Vec<u64> = r.malformed_examples.iter().map(|m| m.line).collect();
    assert_eq!(lines, [3, 4, 5, 7, 8]);
    assert!(r.malformed_examples[0].reason.contains("found 2"));
    assert!(r.malformed_examples[1].reason.contains("2006-02-30"));
    assert!(r.malformed_examples[2].reason.contains("UTF-8"));
    assert!(r.malformed_examples[3].reason.contains("found 6"));
    let s = r.summary();
    assert!(s.starts_with(&path.display().to_string()), "{s}");
    assert!(
        s.contains("5 malformed lines (line 3: expected 3 to 5"),
        "{s}"
    );
    assert!(s.contains("; line 4: bad QueryTime"), "{s}");

    // The same file gzipped reports the same line numbers.
    let gz = write(&dir, "aol.gz", &gzip(&text));
    let log = read_log(&gz, &ReadOptions::default()).unwrap();
    assert_eq!(log.report.malformed_examples, r.malformed_examples);
}

#[test]
fn truncated_gzip() {
    let dir = TempDir::new().unwrap();
    let full = gzip(big_tsv().as_bytes());
    assert!(full.len() > 1000);
    // Cut in the header, the deflate body, and the 8-byte trailer.
    for cut in [
        5,
        12,
        full.len() / 3,
        full.len() / 2,
        full.len() - 20,
        full.len() - 3,
    ] {
        let path = write(&dir, &format!("cut-{cut}.tsv.gz"), &full[..cut]);
        let err = expect_err(&path);
        assert!(matches!(err, LogError::Gzip { .. }), "cut {cut}: {err}");
        assert!(err.to_string().contains("gzip"), "{err}");
    }
}

#[test]
fn corrupt_gzip() {
    let dir = TempDir::new().unwrap();
    let mut bytes = gzip(big_tsv().as_bytes());
    // Flip the CRC in the trailer: the data decodes but does not check out.
    let n = bytes.len();
    bytes[n - 8] ^= 0xff;
    let err = expect_err(&write(&dir, "crc.gz", &bytes));
    assert!(matches!(err, LogError::Gzip { .. }), "{err}");
    // Garbage in the middle of the deflate stream.
    let mut bytes = gzip(big_tsv().as_bytes());
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b = 0xff;
    }
    let err = expect_err(&write(&dir, "mid.gz", &bytes));
    assert!(matches!(err, LogError::Gzip { .. }), "{err}");
}

fn write_batch(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn parquet_with_int64_query() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("int-query.parquet");
    write_batch(
        &path,
        vec![("query", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)],
    );
    let err = expect_err(&path);
    assert!(matches!(err, LogError::ParquetSchema { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("expected `query` of type Utf8"), "{msg}");
    assert!(msg.contains("found columns `query`: Int64"), "{msg}");
}

#[test]
fn parquet_without_query() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("no-query.parquet");
    write_batch(
        &path,
        vec![
            ("q", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
            ("ts", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ],
    );
    let err = expect_err(&path);
    assert!(matches!(err, LogError::ParquetSchema { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("a `query` column"), "{msg}");
    assert!(msg.contains("`q`: Utf8, `ts`: Int64"), "{msg}");
}

#[test]
fn parquet_with_string_ts() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("str-ts.parquet");
    write_batch(
        &path,
        vec![
            ("query", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
            (
                "ts",
                Arc::new(StringArray::from(vec!["2006-03-01 00:00:00"])) as ArrayRef,
            ),
        ],
    );
    let err = expect_err(&path);
    assert!(err.to_string().contains("`ts` of type Timestamp"), "{err}");
}

#[test]
fn parquet_without_rows() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("zero.parquet");
    write_log_parquet(&path, &[]).unwrap();
    let err = expect_err(&path);
    assert!(err.to_string().contains("0 rows"), "{err}");
}

#[test]
fn parquet_only_null_queries() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("nulls.parquet");
    write_batch(
        &path,
        vec![(
            "query",
            Arc::new(StringArray::from(vec![None::<&str>, None])) as ArrayRef,
        )],
    );
    let err = expect_err(&path);
    assert!(
        matches!(err, LogError::AllMalformed { count: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("row 1: null query"), "{err}");
}

#[test]
fn truncated_parquet() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("full.parquet");
    let records: Vec<LogRecord> = (0..1000)
        .map(|i| LogRecord {
            ts: Some(i),
            user: None,
            query: format!("q{i}"),
        })
        .collect();
    write_log_parquet(&path, &records).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for cut in [4, 100, bytes.len() / 2, bytes.len() - 1] {
        let cut_path = write(&dir, &format!("cut-{cut}.parquet"), &bytes[..cut]);
        let err = expect_err(&cut_path);
        assert!(matches!(err, LogError::Parquet { .. }), "{err}");
    }
    // Garbage after a valid magic.
    let err = expect_err(&write(&dir, "junk.parquet", b"PAR1 this is not parquet"));
    assert!(matches!(err, LogError::Parquet { .. }), "{err}");
}

#[test]
fn gzipped_parquet() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.parquet");
    write_log_parquet(
        &path,
        &[LogRecord {
            ts: None,
            user: None,
            query: "q".into(),
        }],
    )
    .unwrap();
    let gz = write(
        &dir,
        "log.parquet.gz",
        &gzip(&std::fs::read(&path).unwrap()),
    );
    let err = expect_err(&gz);
    assert!(matches!(err, LogError::GzippedParquet { .. }), "{err}");
}

#[test]
fn unwritable_parquet_path() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("no-such-dir").join("log.parquet");
    let err = write_log_parquet(&path, &[]).unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Arbitrary bytes, plain or behind a gzip magic, or after a header: a result or an
    /// error naming the file, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(
        prefix in prop::sample::select(vec![
            &b""[..],
            b"\x1f\x8b",
            b"PAR1",
            b"Query\n",
            b"timestamp\tanon_id\tquery\n",
            b"AnonID\tQuery\tQueryTime\n",
        ]),
        body in prop::collection::vec(any::<u8>(), 0..300),
        zipped in any::<bool>(),
    ) {
        let dir = TempDir::new().unwrap();
        let mut bytes = prefix.to_vec();
        bytes.extend(&body);
        if zipped {
            bytes = gzip(&bytes);
        }
        let path = write(&dir, "fuzz", &bytes);
        match read_log(&path, &ReadOptions::default()) {
            Ok(log) => {
                let r = &log.report;
                prop_assert_eq!(r.records as usize, log.records.len());
                prop_assert_eq!(r.lines, r.records + r.collapsed + r.malformed + r.blank);
                prop_assert!(r.malformed_examples.len() <= 5);
            }
            Err(e) => prop_assert!(e.to_string().contains(&path.display().to_string())),
        }
    }
}
