//! Query-log layouts through the real `ballot` binary, on the committed fixtures of
//! `querylog/tests/fixtures/logs/`: a delimited or TREC-looking log without `--format` is
//! refused by every command that reads a log, with its first line and the flags that read
//! it; with them, the layout and the first two queries are printed before any work; `ballot
//! stats` shows the users and the time span; `ballot ingest` keeps users and times in
//! Parquet.

mod common;

use std::path::{Path, PathBuf};

use common::{ballot, stderr, stdout};
use querylog::{read_log, LayoutSpec, ReadOptions};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../querylog/tests/fixtures/logs")
        .join(name)
        .display()
        .to_string()
}

fn freq_file(dir: &Path) -> String {
    let p = dir.join("freq.tsv");
    std::fs::write(
        &p,
        "word\tfrequency_per_token\nlyrics\t0.0001\non\t0.01\ndemand\t0.0001\n",
    )
    .unwrap();
    p.display().to_string()
}

/// Runs `ballot args`, expecting success; returns (stdout, stderr).
fn run_ok(args: &[&str]) -> (String, String) {
    let out = ballot(args);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{args:?} failed:\n{e}");
    (o, e)
}

/// Runs `ballot args`, expecting a clean failure (exit 1, no panic); returns stderr.
fn run_err(args: &[&str]) -> String {
    let out = ballot(args);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
    assert!(!e.contains("panicked"), "{args:?}: {e}");
    e
}

/// The value of a `ballot stats` row.
fn row<'a>(stats: &'a str, label: &str) -> &'a str {
    stats
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix(label)
                .filter(|rest| rest.starts_with("  "))
        })
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{stats}"))
        .trim()
}

#[test]
fn every_command_that_reads_a_log_refuses_to_guess() {
    let dir = tempfile::tempdir().unwrap();
    let freq = freq_file(dir.path());
    let log = fixture("excite.log");
    let out_dir = dir.path().join("out").display().to_string();
    let table = dir.path().join("t.parquet").display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["stats", "--log", &log],
        vec!["eval", "--log", &log, "--freq", &freq],
        vec!["train", "--log", &log, "--freq", &freq, "-o", &table],
        vec!["grid", "--log", &log, "--freq", &freq, "--configs", "2:0.5"],
        vec!["sizes", "--log", &log, "--freq", &freq, "-o", &table],
        vec![
            "build-index",
            "--log",
            &log,
            "--freq",
            &freq,
            "-o",
            &out_dir,
        ],
        vec!["replay", "--log", &log, "--target", "http://127.0.0.1:9"],
        vec!["demo", "--log", &log, "--freq", &freq, "--out", &out_dir],
        vec!["ingest", &log, "-o", &table],
    ];
    for args in commands {
        let e = run_err(&args);
        for needle in [
            log.as_str(),
            "refusing to guess the layout: 33 of 33 sampled lines split into 3 tab-separated \
             columns, not one query per line",
            "first line: 2A9EABFB35F5B954\\t970916000350\\tkon min run",
            "read it with: --format tsv --columns ROLE,ROLE,ROLE",
            "or: --format excite",
            "--format lines",
        ] {
            assert!(e.contains(needle), "{args:?}: no {needle:?} in:\n{e}");
        }
        assert!(!Path::new(&table).exists(), "{args:?} wrote its output");
    }
}

#[test]
fn excite_preset() {
    let log = fixture("excite.log");
    let (out, err) = run_ok(&["stats", "--log", &log, "--format", "excite"]);
    let layout = "layout: excite (from --format): tab-separated, no header, 3 columns; \
                  query = column 3, user = column 1, time = column 2 as %y%m%d%H%M%S";
    let q1 = "  query 1: \"kon min run\" (user 2A9EABFB35F5B954, 1997-09-16 00:03:50)";
    let q2 = "  query 2: \"koten kokon kolon kosan koven kodin\" \
              (user BED75271605EBD0C, 1997-09-16 00:05:12)";
    for text in [&out, &err] {
        assert!(text.contains(layout), "{text}");
        assert!(text.contains(q1), "{text}");
        assert!(text.contains(q2), "{text}");
    }
    assert!(
        err.contains("excite, 33 lines, 32 records, 1 repeat collapsed"),
        "{err}"
    );
    assert_eq!(row(&out, "queries"), "32");
    assert_eq!(row(&out, "distinct users"), "6");
    assert_eq!(
        row(&out, "time span"),
        "1997-09-16 00:03:50 to 1997-09-16 01:32:06"
    );
    // No id or time became a term: 70 terms, 2.53 per query (the lines layout has 108 and
    // 4.53).
    assert_eq!(row(&out, "distinct terms"), "70");
    assert_eq!(row(&out, "terms per query"), "2.53");
    let (lines, _) = run_ok(&["stats", "--log", &log, "--format", "lines"]);
    assert_eq!(row(&lines, "terms per query"), "4.53");
}

#[test]
fn headerless_tsv_with_columns() {
    let log = fixture("headerless.tsv");
    let e = run_err(&["stats", "--log", &log]);
    assert!(
        e.contains("read it with: --format tsv --columns ROLE,ROLE,ROLE"),
        "{e}"
    );
    let (out, err) = run_ok(&[
        "stats",
        "--log",
        &log,
        "--format",
        "tsv",
        "--columns",
        "time,user,query",
        "--time-format",
        "epoch-s",
    ]);
    assert!(
        err.contains(
            "layout: tsv (from --format): tab-separated, no header, 3 columns; \
             query = column 3, user = column 2, time = column 1 as epoch-s"
        ),
        "{err}"
    );
    assert!(
        out.contains("  query 1: \"kon min run\" (user 4100001, 2006-03-01 00:01:44)"),
        "{out}"
    );
    assert_eq!(row(&out, "queries"), "30");
    assert_eq!(row(&out, "distinct users"), "7");
    assert!(row(&out, "time span").starts_with("2006-03-01 00:01:44 to "));
    // The same by column numbers.
    let (by_number, _) = run_ok(&[
        "stats",
        "--log",
        &log,
        "--query-column",
        "3",
        "--user-column",
        "2",
        "--time-column",
        "1",
    ]);
    assert_eq!(row(&by_number, "distinct users"), "7");
    assert_eq!(row(&by_number, "time span"), row(&out, "time span"));
}

#[test]
fn trec_topics_preset() {
    let log = fixture("trec-topics.txt");
    let e = run_err(&["stats", "--log", &log]);
    assert!(
        e.contains("start with a query id and a colon (`301:`)"),
        "{e}"
    );
    assert!(e.contains("read it with: --format trec-topics"), "{e}");
    let (out, err) = run_ok(&["stats", "--log", &log, "--format", "trec-topics"]);
    assert!(
        err.contains("layout: trec-topics (from --format): qid:query per line"),
        "{err}"
    );
    assert!(
        out.contains("  query 1: \"international organized crime\"\n"),
        "{out}"
    );
    assert_eq!(row(&out, "queries"), "30");
    assert_eq!(row(&out, "distinct terms"), "78");
}

#[test]
fn aol_and_lines_are_detected() {
    let (out, err) = run_ok(&["stats", "--log", &fixture("anonid-query-time.tsv")]);
    assert!(
        err.contains(
            "layout: aol (detected): tab-separated, header line skipped, 3 to 5 columns; \
             query = column 2 \"Query\", user = column 1 \"AnonID\", \
             time = column 3 \"QueryTime\" as iso (YYYY-MM-DD HH:MM:SS)"
        ),
        "{err}"
    );
    assert!(
        err.contains("aol, 38 lines, 28 records, 10 repeats collapsed"),
        "{err}"
    );
    assert_eq!(row(&out, "distinct users"), "7");
    let (preset, _) = run_ok(&[
        "stats",
        "--log",
        &fixture("anonid-query-time.tsv"),
        "--format",
        "aol",
    ]);
    assert_eq!(row(&preset, "queries"), row(&out, "queries"));

    let (out, err) = run_ok(&["stats", "--log", &fixture("lines.txt")]);
    assert!(
        err.contains("layout: lines (detected): one query per line, no header"),
        "{err}"
    );
    assert!(err.contains("  query 1: \"kon min run\"\n"), "{err}");
    assert_eq!(row(&out, "queries"), "30");
    assert!(
        !out.contains("distinct users") && !out.contains("time span"),
        "{out}"
    );
}

#[test]
fn ingest_keeps_users_and_times() {
    let dir = tempfile::tempdir().unwrap();
    let out_path: PathBuf = dir.path().join("excite.parquet");
    let out = out_path.display().to_string();
    let (stdout, err) = run_ok(&[
        "ingest",
        &fixture("excite.log"),
        "--format",
        "excite",
        "-o",
        &out,
    ]);
    assert!(err.contains("layout: excite (from --format)"), "{err}");
    assert!(
        stdout.contains(&format!(
            "wrote 32 queries (all with user, all with time) to {out}"
        )),
        "{stdout}"
    );
    let expected = read_log(
        Path::new(&fixture("excite.log")),
        &ReadOptions {
            keep_repeats: false,
            layout: LayoutSpec {
                format: Some("excite".parse().unwrap()),
                ..LayoutSpec::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    let written = read_log(&out_path, &ReadOptions::default()).unwrap();
    assert_eq!(written.records, expected.records);

    let (stats, err) = run_ok(&["stats", "--log", &out]);
    assert!(
        err.contains(
            "layout: parquet (detected): query = column \"query\", user = column \"user\" (Utf8), \
             time = column \"ts\" (Timestamp(ms))"
        ),
        "{err}"
    );
    assert_eq!(row(&stats, "distinct users"), "6");
    assert_eq!(
        row(&stats, "time span"),
        "1997-09-16 00:03:50 to 1997-09-16 01:32:06"
    );

    // The headerless TSV: every record keeps its user and time too.
    let out2 = dir.path().join("h.parquet").display().to_string();
    let (stdout, _) = run_ok(&[
        "ingest",
        &fixture("headerless.tsv"),
        "--columns",
        "time,user,query",
        "-o",
        &out2,
    ]);
    assert!(
        stdout.contains("wrote 30 queries (all with user, all with time)"),
        "{stdout}"
    );
    let lines = dir.path().join("l.parquet").display().to_string();
    let (stdout, _) = run_ok(&["ingest", &fixture("lines.txt"), "-o", &lines]);
    assert!(
        stdout.contains("wrote 30 queries (no user, no time)"),
        "{stdout}"
    );
}

#[test]
fn eval_prints_the_layout_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let freq = freq_file(dir.path());
    let (_, err) = run_ok(&[
        "eval",
        "--log",
        &fixture("excite.log"),
        "--format",
        "excite",
        "--freq",
        &freq,
        "--policies",
        "round-robin",
        "--replicas",
        "2",
    ]);
    let layout = err.find("layout: excite").expect("layout printed");
    let first = err
        .find("  query 1: \"kon min run\"")
        .expect("query printed");
    let tokenizing = err.find("tokenizing:").expect("tokenizing stage");
    assert!(layout < first && first < tokenizing, "{err}");
}

#[test]
fn bad_layout_flags_are_clear_errors() {
    let log = fixture("lines.txt");
    let cases: [(&[&str], &str); 7] = [
        (&["--format", "json"], "unknown query-log format `json`"),
        (
            &["--format", "lines", "--columns", "query"],
            "--format lines has a single query field",
        ),
        (&["--columns", "user,time"], "name exactly one query column"),
        (
            &["--format", "excite", "--columns", "user,time,query"],
            "--format excite fixes its columns",
        ),
        (
            &["--time-format", "%H:%M"],
            "does not read back as a date and time",
        ),
        (&["--query-column", "0"], "columns are numbered from 1"),
        (&["--format", "parquet"], "the file is not Parquet"),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["stats", "--log", &log];
        args.extend_from_slice(flags);
        let e = run_err(&args);
        assert!(e.contains(needle), "{flags:?}: no {needle:?} in:\n{e}");
    }
    // Layout flags without --log (the synthetic default) are refused.
    let e = run_err(&["stats", "--format", "excite"]);
    assert!(e.contains("pass --log"), "{e}");
}
