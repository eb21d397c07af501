//! Query-log layouts on the committed fixtures (`tests/fixtures/logs/`): each preset and a
//! headerless three-column TSV read with the right queries, users and times; delimited or
//! TREC-looking files without `--format` are refused with their first line and the flags
//! that read them; a time column in a format that is not detected (iso, epoch-s, epoch-ms)
//! asks for `--time-format`; header names match in any case; Parquet columns are found by
//! name or alias.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampSecondArray};
use flate2::write::GzEncoder;
use flate2::Compression;
use parquet::arrow::ArrowWriter;
use querylog::time::{parse_datetime_ms, TimeFormat};
use querylog::{
    parse_columns, read_log, read_log_with, ColumnRef, LayoutSpec, LogError, LogFormat, LogRecord,
    QueryLog, ReadOptions, Shape,
};
use tempfile::TempDir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/logs")
        .join(name)
}

fn spec(format: Option<&str>, columns: Option<&str>, time_format: Option<&str>) -> LayoutSpec {
    LayoutSpec {
        format: format.map(|f| f.parse().unwrap()),
        columns: columns.map(|c| parse_columns(c).unwrap()),
        time_format: time_format.map(|t| t.parse().unwrap()),
        ..LayoutSpec::default()
    }
}

fn read_with(path: &Path, layout: LayoutSpec) -> Result<QueryLog, LogError> {
    read_log(
        path,
        &ReadOptions {
            keep_repeats: false,
            layout,
            ..Default::default()
        },
    )
}

fn ok(path: &Path, layout: LayoutSpec) -> QueryLog {
    match read_with(path, layout) {
        Ok(log) => log,
        Err(e) => panic!("{e}"),
    }
}

fn ms(t: &str) -> Option<i64> {
    Some(parse_datetime_ms(t).unwrap())
}

fn rec(ts: Option<i64>, user: Option<&str>, query: &str) -> LogRecord {
    LogRecord {
        ts,
        user: user.map(str::to_owned),
        query: query.to_owned(),
    }
}

fn gzip_copy(dir: &TempDir, path: &Path) -> PathBuf {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&std::fs::read(path).unwrap()).unwrap();
    let out = dir.path().join("copy.gz");
    std::fs::write(&out, enc.finish().unwrap()).unwrap();
    out
}

/// Reads expecting a refusal that names the file; returns the message.
fn refused(path: &Path) -> String {
    let e = match read_with(path, LayoutSpec::default()) {
        Ok(log) => panic!("expected a refusal, got {}", log.report.summary()),
        Err(e) => e,
    };
    assert!(matches!(e, LogError::Ambiguous { .. }), "{e}");
    let m = e.to_string();
    assert!(m.starts_with(&path.display().to_string()), "{m}");
    assert!(m.contains("refusing to guess"), "{m}");
    assert!(m.contains("first line: "), "{m}");
    assert!(m.contains("--format lines"), "{m}");
    m
}

#[test]
fn excite_is_refused_without_format_and_read_by_the_preset() {
    let path = fixture("excite.log");
    let m = refused(&path);
    assert!(
        m.contains("first line: 2A9EABFB35F5B954\\t970916000350\\tkon min run"),
        "{m}"
    );
    assert!(
        m.contains("33 of 33 sampled lines split into 3 tab-separated columns"),
        "{m}"
    );
    assert!(
        m.contains("read it with: --format tsv --columns ROLE,ROLE,ROLE"),
        "{m}"
    );
    assert!(m.contains("or: --format excite"), "{m}");
    // What each column holds is no longer guessed: the message shows the line.
    assert!(!m.contains("hex ids") && !m.contains("times ("), "{m}");

    let log = ok(&path, spec(Some("excite"), None, None));
    assert_eq!(log.report.format, LogFormat::Excite);
    assert_eq!(
        (log.report.lines, log.report.records, log.report.collapsed),
        (33, 32, 1)
    );
    assert_eq!(log.report.malformed, 0, "{}", log.report.summary());
    assert_eq!(
        log.records[..2],
        [
            rec(
                ms("1997-09-16 00:03:50"),
                Some("2A9EABFB35F5B954"),
                "kon min run"
            ),
            rec(
                ms("1997-09-16 00:05:12"),
                Some("BED75271605EBD0C"),
                "koten kokon kolon kosan koven kodin"
            ),
        ]
    );
    assert!(log.has_timestamps());
    assert!(log
        .records
        .iter()
        .all(|r| r.user.as_deref().is_some_and(|u| u.len() == 16)));
    assert!(log.queries().all(|q| !q.contains('\t')));

    // The same with explicit columns, and gzipped.
    let dir = TempDir::new().unwrap();
    let by_columns = ok(
        &path,
        spec(Some("tsv"), Some("user,time,query"), Some("%y%m%d%H%M%S")),
    );
    assert_eq!(by_columns.records, log.records);
    let gz = ok(&gzip_copy(&dir, &path), spec(Some("excite"), None, None));
    assert_eq!(gz.records, log.records);
    // Without --time-format, YYMMDDhhmmss is not guessed (twelve digits could be epoch-ms
    // too): the time column asks for the flag.
    let e = read_with(&path, spec(Some("tsv"), Some("user,time,query"), None)).unwrap_err();
    assert!(matches!(e, LogError::Layout { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("the time column (column 2 \"time\") holds \"970916000350\""),
        "{m}"
    );
    assert!(m.contains("--time-format '%y%m%d%H%M%S'"), "{m}");
}

#[test]
fn headerless_tsv_is_refused_then_read_with_columns() {
    let path = fixture("headerless.tsv");
    let m = refused(&path);
    assert!(
        m.contains("first line: 1141171304\\t4100001\\tkon min run"),
        "{m}"
    );
    assert!(
        m.contains("read it with: --format tsv --columns ROLE,ROLE,ROLE"),
        "{m}"
    );

    let log = ok(
        &path,
        spec(Some("tsv"), Some("time,user,query"), Some("epoch-s")),
    );
    assert_eq!(log.report.format, LogFormat::Tsv);
    assert_eq!((log.report.lines, log.report.records), (30, 30));
    assert_eq!(
        log.records[..2],
        [
            rec(Some(1_141_171_304_000), Some("4100001"), "kon min run"),
            rec(ms("2006-03-01 00:08:40"), Some("142"), "mikon3 mimin"),
        ]
    );
    // Without --format and --time-format: tab-separated and epoch seconds are read from the
    // content, the mapping from --columns.
    let sniffed = ok(&path, spec(None, Some("time,user,query"), None));
    assert_eq!(sniffed.records, log.records);
    // Column numbers instead of --columns.
    let numbered = ok(
        &path,
        LayoutSpec {
            format: Some(LogFormat::Tsv),
            query_column: Some(ColumnRef::Index(2)),
            user_column: Some(ColumnRef::Index(1)),
            time_column: Some(ColumnRef::Index(0)),
            ..LayoutSpec::default()
        },
    );
    assert_eq!(numbered.records, log.records);
    // Only the query: no user, no time.
    let bare = ok(&path, spec(Some("tsv"), Some("-,-,query"), None));
    assert_eq!(bare.records[0], rec(None, None, "kon min run"));
    // A wrong time format says what it expected, with the line.
    let e = read_with(
        &path,
        spec(Some("tsv"), Some("time,user,query"), Some("iso")),
    )
    .unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("line 1: bad time \"1141171304\": expected YYYY-MM-DD HH:MM:SS"),
        "{m}"
    );
    // --format tsv alone cannot know the columns: it says how.
    let e = read_with(&path, spec(Some("tsv"), None, None)).unwrap_err();
    assert!(matches!(e, LogError::Layout { .. }), "{e}");
    let m = e.to_string();
    assert!(m.contains("which column holds the queries"), "{m}");
    assert!(m.contains("--format tsv --columns ROLE,ROLE,ROLE"), "{m}");
}

#[test]
fn trec_topics_are_refused_then_read_without_their_ids() {
    let path = fixture("trec-topics.txt");
    let m = refused(&path);
    assert!(m.contains("`301:`"), "{m}");
    assert!(m.contains("read it with: --format trec-topics"), "{m}");
    let log = ok(&path, spec(Some("trec-topics"), None, None));
    assert_eq!(log.report.format, LogFormat::TrecTopics);
    assert_eq!(log.records.len(), 30);
    assert_eq!(
        log.records[0],
        rec(None, None, "international organized crime")
    );
    assert!(log
        .queries()
        .all(|q| !q.contains(':') && !q.starts_with(char::is_numeric)));

    let mq = ok(
        &fixture("trec-mq.txt"),
        spec(Some("trec-topics"), None, None),
    );
    assert_eq!(mq.report.layout.shape, Shape::TrecTopics { priority: true });
    assert_eq!(
        mq.queries().take(2).collect::<Vec<_>>(),
        ["obama family tree", "french lick resort and casino"]
    );
}

#[test]
fn aol_is_detected_and_the_preset_reads_it_the_same() {
    let path = fixture("anonid-query-time.tsv");
    let auto = ok(&path, LayoutSpec::default());
    assert_eq!(auto.report.format, LogFormat::Aol);
    assert!(auto.report.layout.detected && auto.report.layout.header);
    assert_eq!(
        (
            auto.report.lines,
            auto.report.records,
            auto.report.collapsed
        ),
        (38, 28, 10)
    );
    assert_eq!(
        auto.records[0],
        rec(ms("2006-03-01 07:17:12"), Some("4100001"), "kon min run")
    );
    let preset = ok(&path, spec(Some("aol"), None, None));
    assert_eq!(preset.records, auto.records);
    assert!(!preset.report.layout.detected);
}

#[test]
fn lines_and_csv_fixtures() {
    let lines = ok(&fixture("lines.txt"), LayoutSpec::default());
    assert_eq!(lines.report.format, LogFormat::Lines);
    assert_eq!(lines.records.len(), 30);
    assert_eq!(lines.records[0], rec(None, None, "kon min run"));
    let explicit = ok(&fixture("lines.txt"), spec(Some("lines"), None, None));
    assert_eq!(explicit.records, lines.records);

    let csv = ok(&fixture("queries.csv"), LayoutSpec::default());
    assert_eq!(csv.report.format, LogFormat::Csv);
    assert_eq!(csv.records.len(), 20);
    assert_eq!(
        csv.records[0],
        rec(
            ms("2006-05-01 12:00:00"),
            Some("1000"),
            "\"the godfather\" quotes"
        )
    );
    assert!(csv.queries().any(|q| q == "paris, france"));
}

#[test]
fn a_delimited_file_read_as_lines_only_when_asked() {
    // `--format lines` is obeyed: every line is a query, ids and all.
    let log = ok(&fixture("excite.log"), spec(Some("lines"), None, None));
    assert_eq!(log.report.format, LogFormat::Lines);
    assert!(log.records[0].query.starts_with("2A9EABFB35F5B954\t"));
}

#[test]
fn header_names_match_in_any_case() {
    let dir = TempDir::new().unwrap();
    for (header, q, u, t) in [
        ("QUERY\tANONID\tQUERYTIME", 0, 1, 2),
        ("Ts\tUser\tQuery", 2, 1, 0),
        ("anon_id\tquery_string\ttimestamp", 1, 0, 2),
        ("Query Time\tSession ID\tSearch Terms", 2, 1, 0),
    ] {
        let mut fields = [""; 3];
        fields[q] = "miran ruban";
        fields[u] = "42";
        fields[t] = "2006-03-01 00:01:44";
        let text = format!("{header}\n{}\n", fields.join("\t"));
        let path = dir.path().join("h.tsv");
        std::fs::write(&path, text).unwrap();
        let log = ok(&path, LayoutSpec::default());
        assert_eq!(log.report.format, LogFormat::Tsv, "{header}");
        assert_eq!(
            log.records,
            [rec(ms("2006-03-01 00:01:44"), Some("42"), "miran ruban")],
            "{header}"
        );
    }
    // A single `query` column, any case.
    let path = dir.path().join("q.txt");
    std::fs::write(&path, "QUERY\na\nb\n").unwrap();
    let log = ok(&path, LayoutSpec::default());
    assert_eq!(log.report.format, LogFormat::QueryColumn);
    assert_eq!(log.queries().collect::<Vec<_>>(), ["a", "b"]);
    // --query-column by a name of the header, any case.
    let path = dir.path().join("n.csv");
    std::fs::write(&path, "id,Text\n1,hello world\n").unwrap();
    let log = ok(
        &path,
        LayoutSpec {
            format: Some(LogFormat::Csv),
            query_column: Some(ColumnRef::Name("text".into())),
            ..LayoutSpec::default()
        },
    );
    assert_eq!(log.records, [rec(None, None, "hello world")]);
}

#[test]
fn time_formats_of_each_preset() {
    let cases: [(&str, TimeFormat, &str); 5] = [
        ("aol", TimeFormat::Iso, "2006-03-01 07:17:12"),
        ("excite", TimeFormat::excite(), "970916000350"),
        ("headerless epoch-s", TimeFormat::EpochS, "1141171304"),
        ("epoch-ms", TimeFormat::EpochMs, "1141171304000"),
        ("csv iso with Z", TimeFormat::Iso, "2006-05-01T12:00:00Z"),
    ];
    let expected = [
        "2006-03-01 07:17:12",
        "1997-09-16 00:03:50",
        "2006-03-01 00:01:44",
        "2006-03-01 00:01:44",
        "2006-05-01 12:00:00",
    ];
    for ((name, f, value), want) in cases.iter().zip(expected) {
        let got = f
            .parse_ms(value)
            .unwrap_or_else(|| panic!("{name}: {value}"));
        assert_eq!(querylog::time::format_timestamp(got), want, "{name}");
    }
}

#[test]
fn explicit_format_must_fit_the_file() {
    let dir = TempDir::new().unwrap();
    let e = read_with(&fixture("lines.txt"), spec(Some("parquet"), None, None)).unwrap_err();
    assert!(matches!(e, LogError::Layout { .. }), "{e}");
    assert!(e.to_string().contains("not Parquet"), "{e}");
    let pq = dir.path().join("log.parquet");
    querylog::write_log_parquet(&pq, &[rec(None, None, "a")]).unwrap();
    let e = read_with(&pq, spec(Some("tsv"), None, None)).unwrap_err();
    assert!(e.to_string().contains("the file is Parquet"), "{e}");
    // Flags that do not go together are refused before reading.
    let bad = LayoutSpec {
        format: Some(LogFormat::Lines),
        columns: Some(parse_columns("query").unwrap()),
        ..LayoutSpec::default()
    };
    let e = read_with(&fixture("lines.txt"), bad).unwrap_err();
    assert!(e.to_string().contains("--format lines"), "{e}");
}

#[test]
fn parquet_columns_by_alias_name_and_unit() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("aol.parquet");
    let batch = RecordBatch::try_from_iter(vec![
        (
            "AnonID",
            Arc::new(Int64Array::from(vec![4100001, 4100002])) as ArrayRef,
        ),
        (
            "Query",
            Arc::new(StringArray::from(vec!["kon min run", "mifen mizin"])) as ArrayRef,
        ),
        (
            "QueryTime",
            Arc::new(TimestampSecondArray::from(vec![
                1_141_171_304,
                1_141_171_395,
            ])) as ArrayRef,
        ),
        ("epoch", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
    ])
    .unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let log = ok(&path, LayoutSpec::default());
    assert_eq!(
        log.records[0],
        rec(Some(1_141_171_304_000), Some("4100001"), "kon min run")
    );
    let d = log.report.layout.describe();
    assert!(d.contains("query = column \"Query\""), "{d}");
    assert!(d.contains("user = column \"AnonID\" (Int64)"), "{d}");
    // An Int64 time column in seconds.
    let secs = ok(
        &path,
        LayoutSpec {
            time_column: Some(ColumnRef::Name("EPOCH".into())),
            time_format: Some(TimeFormat::EpochS),
            ..LayoutSpec::default()
        },
    );
    assert_eq!(secs.records[1].ts, Some(2_000));
    let e = read_with(
        &path,
        LayoutSpec {
            query_column: Some(ColumnRef::Name("nope".into())),
            ..LayoutSpec::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("a column `nope` for --query-column"),
        "{e}"
    );
}

#[test]
fn the_layout_and_first_records_come_before_the_rest() {
    let path = fixture("anonid-query-time.tsv");
    let mut seen = Vec::new();
    let log = read_log_with(&path, &ReadOptions::default(), &mut |layout, first| {
        seen.push((layout.format, first.to_vec()));
    })
    .unwrap();
    assert_eq!(seen.len(), 1, "called exactly once");
    assert_eq!(seen[0].0, LogFormat::Aol);
    assert_eq!(seen[0].1, log.records[..2]);
    let preview = log.report.layout.preview(&log.records[..2]);
    assert_eq!(preview.len(), 3);
    assert!(
        preview[0].starts_with("layout: aol (detected): tab-separated"),
        "{preview:?}"
    );
    assert_eq!(
        preview[1],
        "  query 1: \"kon min run\" (user 4100001, 2006-03-01 07:17:12)"
    );

    // A one-record log reports its one record at the end; a log with none still shows its
    // layout before failing.
    let dir = TempDir::new().unwrap();
    let one = dir.path().join("one.txt");
    std::fs::write(&one, "only query\n").unwrap();
    let mut firsts = Vec::new();
    read_log_with(&one, &ReadOptions::default(), &mut |_, f| {
        firsts.push(f.len())
    })
    .unwrap();
    assert_eq!(firsts, [1]);
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "timestamp\tanon_id\tquery\nyesterday\t1\tq\n").unwrap();
    let mut firsts = Vec::new();
    let iso = ReadOptions {
        layout: spec(None, None, Some("iso")),
        ..ReadOptions::default()
    };
    let e = read_log_with(&bad, &iso, &mut |_, f| firsts.push(f.len()));
    assert!(matches!(e, Err(LogError::AllMalformed { .. })));
    assert_eq!(firsts, [0]);
}

#[test]
fn malformed_lines_under_a_mapping_say_what_was_expected() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("excite.log");
    std::fs::write(
        &path,
        "AAAAAAAAAAAAAAAA\t970916000350\tgood\n\
         AAAAAAAAAAAAAAAA\t9709160003\tshort time\n\
         AAAAAAAAAAAAAAAA\t970916000351\n\
         \n\
         AAAAAAAAAAAAAAAA\t970916000352\ta\tb\n",
    )
    .unwrap();
    let log = ok(&path, spec(Some("excite"), None, None));
    assert_eq!(log.queries().collect::<Vec<_>>(), ["good"]);
    assert_eq!((log.report.malformed, log.report.blank), (3, 1));
    let s = log.report.summary();
    assert!(
        s.contains("line 2: bad time \"9709160003\": expected %y%m%d%H%M%S (e.g. 060301071712)"),
        "{s}"
    );
    assert!(
        s.contains("line 3: expected 3 tab-separated columns (user, time, query), found 2"),
        "{s}"
    );
    assert!(
        s.contains("line 5: expected 3 tab-separated columns"),
        "{s}"
    );
}

#[test]
fn parquet_writer_settings_pass_the_page_walk() {
    use parquet::basic::Compression as PqCompression;
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
    let dir = TempDir::new().unwrap();
    let n = 20_000;
    let queries: Vec<String> = (0..n)
        .map(|i| format!("query {} about {}", i, i % 97))
        .collect();
    let users: Vec<Option<String>> = (0..n)
        .map(|i| (i % 5 != 0).then(|| format!("user{}", i % 300)))
        .collect();
    let batch = RecordBatch::try_from_iter(vec![
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
        ),
        ("user", Arc::new(StringArray::from(users)) as ArrayRef),
        (
            "query",
            Arc::new(StringArray::from(queries.clone())) as ArrayRef,
        ),
    ])
    .unwrap();
    for (i, props) in [
        WriterProperties::builder().build(),
        WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_data_page_size_limit(4096)
            .build(),
        WriterProperties::builder()
            .set_compression(PqCompression::SNAPPY)
            .set_data_page_row_count_limit(100)
            .set_max_row_group_row_count(Some(3000))
            .set_write_batch_size(100)
            .build(),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("w{i}.parquet"));
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let log = read_log(
            &path,
            &ReadOptions {
                keep_repeats: true,
                ..ReadOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("writer settings {i}: {e}"));
        assert_eq!(log.records.len(), n, "writer settings {i}");
        assert_eq!(log.records[n - 1].query, queries[n - 1]);
        assert_eq!(log.records[7].user.as_deref(), Some("user7"));
    }
}

#[test]
fn text_flags_on_a_parquet_file_are_refused_not_ignored() {
    let dir = TempDir::new().unwrap();
    let pq = dir.path().join("log.parquet");
    querylog::write_log_parquet(&pq, &[rec(None, None, "a")]).unwrap();
    let e = read_with(&pq, spec(None, Some("user,query"), None)).unwrap_err();
    assert!(matches!(e, LogError::Layout { .. }), "{e}");
    assert!(
        e.to_string().contains("the file is Parquet: --columns"),
        "{e}"
    );
    let e = read_with(&pq, spec(None, None, Some("%y%m%d%H%M%S"))).unwrap_err();
    assert!(
        e.to_string().contains("the file is Parquet: --time-format"),
        "{e}"
    );
    assert!(read_with(&pq, spec(None, None, Some("epoch-s"))).is_ok());
}
