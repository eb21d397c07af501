//! Query-log readers and writer on real files: every format round-trips, plain and gzip,
//! Parquet with nulls, collapse semantics, and (with `BALLOT_DATA` set) the real AOL logs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, LargeStringArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use flate2::write::GzEncoder;
use flate2::Compression;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use proptest::prelude::*;
use querylog::time::parse_datetime_ms;
use querylog::{
    collapse_repeats, format_timestamp, read_log, write_log_parquet, LogFormat, LogRecord,
    QueryLog, ReadOptions,
};
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

fn rec(ts: Option<&str>, user: Option<&str>, query: &str) -> LogRecord {
    LogRecord {
        ts: ts.map(|t| parse_datetime_ms(t).unwrap()),
        user: user.map(str::to_owned),
        query: query.to_owned(),
    }
}

fn read(path: &Path) -> QueryLog {
    read_log(path, &ReadOptions::default()).unwrap()
}

fn read_all(path: &Path) -> QueryLog {
    read_log(
        path,
        &ReadOptions {
            keep_repeats: true,
            ..ReadOptions::default()
        },
    )
    .unwrap()
}

/// Writes `text` plain and gzipped (names without telling extensions) and checks both read
/// as `format` with exactly `expected` records (repeats collapsed).
fn check_both(text: &str, format: LogFormat, expected: &[LogRecord]) -> QueryLog {
    let dir = TempDir::new().unwrap();
    let plain = write(&dir, "plain.log", text.as_bytes());
    let gz = write(&dir, "compressed.log", &gzip(text.as_bytes()));
    let a = read(&plain);
    let b = read(&gz);
    assert_eq!(a.report.format, format);
    assert_eq!(b.report.format, format);
    assert_eq!(a.records, expected);
    assert_eq!(b.records, expected);
    assert_eq!(a.report.malformed, 0, "{}", a.report.summary());
    let (ra, rb) = (&a.report, &b.report);
    assert_eq!(
        (ra.lines, ra.collapsed, ra.blank, ra.records),
        (rb.lines, rb.collapsed, rb.blank, rb.records)
    );
    assert_eq!(ra.records, expected.len() as u64);
    assert_eq!(
        ra.lines,
        ra.records + ra.collapsed + ra.malformed + ra.blank,
        "{}",
        ra.summary()
    );
    a
}

#[test]
fn aol_round_trip() {
    let text = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n\
                142\trentdirect.com\t2006-03-01 07:17:12\t\t\n\
                142\twww.prescriptionfortime.com\t2006-03-12 12:31:06\t\t\n\
                217\tlottery\t2006-03-01 11:58:51\t1\thttp://www.calottery.com\n\
                217\tlottery\t2006-03-01 11:58:51\t2\thttp://www.lottery.com\n\
                217\tlottery\t2006-03-27 14:10:38\n\
                993\t-\t2006-03-02 17:34:34\n\
                993\t\t2006-03-02 17:35:00\n\
                1268\tlottery\t2006-03-01 13:23:01\t\t\n";
    let log = check_both(
        text,
        LogFormat::Aol,
        &[
            rec(Some("2006-03-01 07:17:12"), Some("142"), "rentdirect.com"),
            rec(
                Some("2006-03-12 12:31:06"),
                Some("142"),
                "www.prescriptionfortime.com",
            ),
            rec(Some("2006-03-01 11:58:51"), Some("217"), "lottery"),
            rec(Some("2006-03-02 17:34:34"), Some("993"), "-"),
            rec(Some("2006-03-02 17:35:00"), Some("993"), ""),
            rec(Some("2006-03-01 13:23:01"), Some("1268"), "lottery"),
        ],
    );
    assert_eq!(log.report.lines, 8);
    assert_eq!(log.report.collapsed, 2);
    assert!(log.has_timestamps());
    let dir = TempDir::new().unwrap();
    let all = read_all(&write(&dir, "aol", text.as_bytes()));
    assert_eq!(all.records.len(), 8);
    assert_eq!(all.report.collapsed, 0);
}

#[test]
fn query_column_round_trip() {
    let text = "Query\nrentdirect.com\nstaple.com\nstaple.com\nwestchester.gov\nstaple.com\n";
    let log = check_both(
        text,
        LogFormat::QueryColumn,
        &[
            rec(None, None, "rentdirect.com"),
            rec(None, None, "staple.com"),
            rec(None, None, "westchester.gov"),
            rec(None, None, "staple.com"),
        ],
    );
    assert_eq!(log.report.lines, 5);
    assert_eq!(log.report.collapsed, 1);
    assert!(!log.has_timestamps());
    assert_eq!(
        log.queries().collect::<Vec<_>>(),
        [
            "rentdirect.com",
            "staple.com",
            "westchester.gov",
            "staple.com"
        ]
    );
}

#[test]
fn tsv_round_trip() {
    let text = "timestamp\tanon_id\tquery\n\
                2006-03-01 00:01:44\t4100001\tkon min run\n\
                2006-03-01 00:02:25\t4100002\tkoten kokon kolon kosan koven kodin\n\
                2006-03-01 00:03:15\t4100002\tmifen mizin\n\
                2006-03-01 00:03:20\t4100002\tmifen mizin\n\
                2006-03-01 00:03:32\t30011\tmifen mizin\n\
                2006-03-01 00:04:00\t30011\t\n";
    let log = check_both(
        text,
        LogFormat::Tsv,
        &[
            rec(Some("2006-03-01 00:01:44"), Some("4100001"), "kon min run"),
            rec(
                Some("2006-03-01 00:02:25"),
                Some("4100002"),
                "koten kokon kolon kosan koven kodin",
            ),
            rec(Some("2006-03-01 00:03:15"), Some("4100002"), "mifen mizin"),
            rec(Some("2006-03-01 00:03:32"), Some("30011"), "mifen mizin"),
            rec(Some("2006-03-01 00:04:00"), Some("30011"), ""),
        ],
    );
    assert_eq!(log.records[0].ts, Some(1_141_171_304_000));
    assert_eq!(log.report.collapsed, 1);
}

#[test]
fn lines_round_trip_with_crlf_bom_and_blanks() {
    // The first line is a query too; blank lines are skipped but counted.
    let text = "\u{feff}first query\r\nsecond\r\n\r\n   \r\nsecond\r\nthird\tcolumn\r\nlast";
    let log = check_both(
        text,
        LogFormat::Lines,
        &[
            rec(None, None, "first query"),
            rec(None, None, "second"),
            rec(None, None, "third\tcolumn"),
            rec(None, None, "last"),
        ],
    );
    assert_eq!(log.report.lines, 7);
    assert_eq!(log.report.blank, 2);
    // Blank lines do not separate a run: the two `second` lines are consecutive data lines.
    assert_eq!(log.report.collapsed, 1);
    assert!(log.report.summary().contains("2 blank lines skipped"));
}

#[test]
fn lines_keep_leading_and_trailing_spaces() {
    let log = check_both(
        " padded \nQuery\n",
        LogFormat::Lines,
        &[rec(None, None, " padded "), rec(None, None, "Query")],
    );
    assert_eq!(log.report.blank, 0);
}

#[test]
fn format_follows_content_not_extension() {
    let dir = TempDir::new().unwrap();
    let text = b"Query\na\nb\n";
    let plain_named_gz = write(&dir, "log.txt.gz", text);
    let gz_named_txt = write(&dir, "log.txt", &gzip(text));
    let parquet_named_tsv = dir.path().join("log.tsv");
    write_log_parquet(&parquet_named_tsv, &[rec(None, None, "a")]).unwrap();
    assert_eq!(read(&plain_named_gz).report.format, LogFormat::QueryColumn);
    assert_eq!(read(&gz_named_txt).report.format, LogFormat::QueryColumn);
    assert_eq!(read(&parquet_named_tsv).report.format, LogFormat::Parquet);
}

#[test]
fn multi_member_gzip_is_read_whole() {
    let dir = TempDir::new().unwrap();
    let mut bytes = gzip(b"timestamp\tanon_id\tquery\n2006-03-01 00:01:44\t1\ta\n");
    bytes.extend(gzip(b"2006-03-01 00:01:45\t1\tb\n"));
    bytes.extend(gzip(b"2006-03-01 00:01:46\t2\tc\n"));
    let log = read(&write(&dir, "multi.gz", &bytes));
    assert_eq!(log.queries().collect::<Vec<_>>(), ["a", "b", "c"]);
}

#[test]
fn parquet_round_trip_with_nulls() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.parquet");
    let records = vec![
        rec(Some("2006-03-01 00:01:44"), Some("1"), "a b"),
        rec(None, Some("1"), "c"),
        rec(Some("2006-03-01 00:01:46"), None, ""),
        rec(None, None, "ünïcödé query"),
        LogRecord {
            ts: Some(-5),
            user: Some(String::new()),
            query: "neg".into(),
        },
    ];
    write_log_parquet(&path, &records).unwrap();
    let log = read(&path);
    assert_eq!(log.records, records);
    assert_eq!(log.report.format, LogFormat::Parquet);
    assert_eq!(log.report.lines, 5);
    assert!(!log.has_timestamps());

    // The schema as documented.
    let file = std::fs::File::open(&path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = builder.schema();
    let expected = Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("user", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, false),
    ]);
    assert_eq!(schema.fields(), expected.fields());
    let codec = builder.metadata().row_group(0).column(0).compression();
    assert_eq!(codec, parquet::basic::Compression::SNAPPY);
}

#[test]
fn parquet_row_groups_and_collapse() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("big.parquet");
    // 150k records, every other one a repeat of the previous: 75k kept after collapsing.
    let records: Vec<LogRecord> = (0..150_000u64)
        .map(|i| LogRecord {
            ts: Some(i as i64 * 1000),
            user: Some(format!("u{}", i / 10)),
            query: format!("q{}", i / 2),
        })
        .collect();
    write_log_parquet(&path, &records).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let meta = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .metadata()
        .clone();
    assert_eq!(meta.num_row_groups(), 3);
    assert_eq!(meta.row_group(0).num_rows(), 65_536);

    let all = read_all(&path);
    assert_eq!(all.records, records);
    let log = read(&path);
    assert_eq!(log.report.collapsed, 75_000);
    assert_eq!(log.records.len(), 75_000);
    let (expected, removed) = collapse_repeats(records);
    assert_eq!(removed, 75_000);
    assert_eq!(log.records, expected);
    assert!(log.has_timestamps());
}

fn write_batch(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn parquet_from_other_writers() {
    let dir = TempDir::new().unwrap();
    // Only a query column, LargeUtf8, plus an ignored column.
    let path = dir.path().join("only_query.parquet");
    write_batch(
        &path,
        vec![
            ("extra", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "query",
                Arc::new(LargeStringArray::from(vec!["x", "y"])) as ArrayRef,
            ),
        ],
    );
    assert_eq!(
        read(&path).records,
        [rec(None, None, "x"), rec(None, None, "y")]
    );

    // Int64 ts in milliseconds, a nullable query column with a null (malformed row 2).
    let path = dir.path().join("int_ts.parquet");
    write_batch(
        &path,
        vec![
            (
                "query",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("b")])) as ArrayRef,
            ),
            (
                "ts",
                Arc::new(Int64Array::from(vec![Some(7), Some(8), None])) as ArrayRef,
            ),
            (
                "user",
                Arc::new(StringArray::from(vec![Some("u"), Some("u"), Some("u")])) as ArrayRef,
            ),
        ],
    );
    let log = read(&path);
    assert_eq!(
        log.records,
        [
            LogRecord {
                ts: Some(7),
                user: Some("u".into()),
                query: "a".into()
            },
            LogRecord {
                ts: None,
                user: Some("u".into()),
                query: "b".into()
            },
        ]
    );
    assert_eq!(log.report.malformed, 1);
    assert_eq!(log.report.malformed_examples[0].line, 2);
    assert!(log.report.summary().contains("row 2: null query"));

    // Timestamp(Microsecond, UTC) is converted to milliseconds.
    let path = dir.path().join("us.parquet");
    let us = arrow_array::TimestampMicrosecondArray::from(vec![1_141_171_304_000_123])
        .with_timezone("UTC");
    write_batch(
        &path,
        vec![
            ("ts", Arc::new(us) as ArrayRef),
            ("query", Arc::new(StringArray::from(vec!["q"])) as ArrayRef),
        ],
    );
    assert_eq!(read(&path).records[0].ts, Some(1_141_171_304_000));
}

#[test]
fn collapse_semantics() {
    let text = "timestamp\tanon_id\tquery\n\
                2006-03-01 00:00:01\t1\tweather\n\
                2006-03-01 00:00:02\t2\tweather\n\
                2006-03-01 00:00:03\t2\tweather\n\
                2006-03-01 00:00:04\t2\tnews\n\
                2006-03-01 00:00:05\t2\tweather\n\
                2006-03-01 00:00:06\t1\tweather\n";
    let log = check_both(
        text,
        LogFormat::Tsv,
        &[
            // Same query by a different user: not a repeat.
            rec(Some("2006-03-01 00:00:01"), Some("1"), "weather"),
            rec(Some("2006-03-01 00:00:02"), Some("2"), "weather"),
            // 00:00:03 collapsed into 00:00:02 (first of the run kept).
            rec(Some("2006-03-01 00:00:04"), Some("2"), "news"),
            // Non-consecutive repeat: kept.
            rec(Some("2006-03-01 00:00:05"), Some("2"), "weather"),
            rec(Some("2006-03-01 00:00:06"), Some("1"), "weather"),
        ],
    );
    assert_eq!(log.report.collapsed, 1);

    // Without a user column, identical consecutive lines collapse.
    let dir = TempDir::new().unwrap();
    let p = write(&dir, "lines", b"a\na\nb\na\na\na\n");
    let log = read(&p);
    assert_eq!(log.queries().collect::<Vec<_>>(), ["a", "b", "a"]);
    assert_eq!(log.report.collapsed, 3);
    let all = read_all(&p);
    assert_eq!(all.records.len(), 6);
    assert_eq!(all.report.collapsed, 0);

    // The function on records: users compared, null users only equal null users.
    let (kept, removed) = collapse_repeats(vec![
        rec(None, Some("1"), "q"),
        rec(None, None, "q"),
        rec(None, None, "q"),
        rec(None, Some("1"), "q"),
        rec(None, Some("1"), "q"),
    ]);
    assert_eq!(removed, 2);
    assert_eq!(
        kept,
        [
            rec(None, Some("1"), "q"),
            rec(None, None, "q"),
            rec(None, Some("1"), "q"),
        ]
    );
}

#[test]
fn summary_names_file_format_and_counts() {
    let dir = TempDir::new().unwrap();
    let p = write(&dir, "aol.tsv", b"Query\na\na\nb\n");
    let s = read(&p).report.summary();
    assert!(
        s.starts_with(&format!("{}: query-column", p.display())),
        "{s}"
    );
    assert!(s.contains("3 lines"), "{s}");
    assert!(s.contains("2 records"), "{s}");
    assert!(s.contains("1 repeat collapsed"), "{s}");
    assert!(!s.contains("malformed"), "{s}");
}

fn query_strategy() -> impl Strategy<Value = String> {
    // Printable text without tabs or line breaks that is not blank.
    "[a-zA-Z0-9 .é漢-]{0,12}[a-z0-9]".prop_map(|s| s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn tsv_and_lines_round_trip(
        rows in prop::collection::vec(
            (0i64..4_000_000_000, 0u32..4, query_strategy()), 1..40),
        compressed in any::<bool>(),
    ) {
        let dir = TempDir::new().unwrap();
        let mut tsv = String::from("timestamp\tanon_id\tquery\n");
        let mut lines = String::new();
        let mut records = Vec::new();
        for (secs, user, q) in &rows {
            let ts = format_timestamp(secs * 1000);
            tsv.push_str(&format!("{ts}\t{user}\t{q}\n"));
            lines.push_str(q);
            lines.push('\n');
            records.push(LogRecord { ts: Some(secs * 1000), user: Some(user.to_string()), query: q.clone() });
        }
        let enc = |s: &str| if compressed { gzip(s.as_bytes()) } else { s.as_bytes().to_vec() };
        let t = read_all(&write(&dir, "t", &enc(&tsv)));
        prop_assert_eq!(t.report.format, LogFormat::Tsv);
        prop_assert_eq!(&t.records, &records);
        let collapsed = read(&write(&dir, "t", &enc(&tsv)));
        let (expected, removed) = collapse_repeats(records.clone());
        prop_assert_eq!(&collapsed.records, &expected);
        prop_assert_eq!(collapsed.report.collapsed, removed);

        let l = read_all(&write(&dir, "l", &enc(&lines)));
        let queries: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
        // A single line `Query` is a header, not a query: skip that corner case.
        if !queries[0].eq_ignore_ascii_case("query") {
            prop_assert_eq!(l.queries().collect::<Vec<_>>(), queries);
        }

        let p = dir.path().join("p.parquet");
        write_log_parquet(&p, &records).unwrap();
        prop_assert_eq!(read_all(&p).records, records);
    }
}

/// `$BALLOT_DATA/<name>` when `BALLOT_DATA` is set (failing if the file is missing), `None`
/// (skip) when it is not.
fn real_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("BALLOT_DATA")?;
    let path = Path::new(&dir).join(name);
    assert!(
        path.is_file(),
        "BALLOT_DATA is set but {} does not exist",
        path.display()
    );
    Some(path)
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn real_aol_1m_collapses_to_554541() {
    let Some(path) = real_file("aol-2006-1m-queries.txt.gz") else {
        eprintln!("BALLOT_DATA not set: skipping the real 1M AOL log");
        return;
    };
    let start = Instant::now();
    let log = read(&path);
    let elapsed = start.elapsed();
    eprintln!("{} in {elapsed:.2?}", log.report.summary());
    assert_eq!(log.report.format, LogFormat::QueryColumn);
    assert_eq!(log.report.lines, 999_999);
    assert_eq!(log.report.malformed, 0);
    assert_eq!(log.report.blank, 0);
    assert_eq!(log.records.len(), 554_541);
    assert_eq!(log.report.collapsed, 999_999 - 554_541);
    assert_eq!(log.records[0].query, "rentdirect.com");
    let all = read_all(&path);
    assert_eq!(all.records.len(), 999_999);
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn real_aol_tsv_reads_clean() {
    let Some(path) = real_file("aol-2006-top1000users-timeordered.tsv.gz") else {
        eprintln!("BALLOT_DATA not set: skipping the real time-ordered AOL log");
        return;
    };
    let start = Instant::now();
    let log = read_all(&path);
    eprintln!("{} in {:.2?}", log.report.summary(), start.elapsed());
    assert_eq!(log.report.format, LogFormat::Tsv);
    assert_eq!(log.report.lines, 318_023);
    assert_eq!(log.report.malformed, 0, "{}", log.report.summary());
    assert_eq!(log.records.len(), 318_023);
    assert!(log.has_timestamps());
    let lo = parse_datetime_ms("2006-03-01 00:00:00").unwrap();
    let hi = parse_datetime_ms("2006-06-01 00:00:00").unwrap();
    assert!(log
        .records
        .iter()
        .all(|r| r.ts.is_some_and(|t| (lo..hi).contains(&t))));
    assert!(log.records.windows(2).all(|w| w[0].ts <= w[1].ts));
    let collapsed = read(&path);
    eprintln!("{}", collapsed.report.summary());
    assert_eq!(collapsed.report.malformed, 0);
}

#[test]
fn a_long_read_reports_its_rows_every_report_interval() {
    use querylog::{RowsHook, ROWS_PER_REPORT};
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("long.txt");
    let rows = 2 * ROWS_PER_REPORT + 5;
    let mut text = String::with_capacity(rows as usize * 4);
    for i in 0..rows {
        text.push_str(&format!("q{}\n", i % 7));
    }
    std::fs::write(&path, text).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = {
        let seen = Arc::clone(&seen);
        RowsHook::new(move |n| seen.lock().unwrap().push(n))
    };
    let log = querylog::read_log(
        &path,
        &ReadOptions {
            keep_repeats: true,
            on_rows: hook,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(log.records.len() as u64, rows);
    assert_eq!(
        *seen.lock().unwrap(),
        [ROWS_PER_REPORT, 2 * ROWS_PER_REPORT]
    );
}
