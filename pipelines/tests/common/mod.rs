//! Helpers shared by the `ballot` command tests: run the real binary (under a deadline,
//! with `e2e`'s process helpers), and locate the real logs through `BALLOT_DATA`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    e2e::stdout(out)
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    e2e::stderr(out)
}

/// `$BALLOT_DATA/<name>`: `None` when `BALLOT_DATA` is unset (the test then skips); panics
/// when it is set but the file is missing (the test must fail, not skip).
pub fn real_data(name: &str) -> Option<PathBuf> {
    e2e::real_data(name)
}

/// The longest any one `ballot` command of these tests may run (the real-log grid takes a
/// few minutes on a 2-core machine): a hang fails the test, naming the command.
const COMMAND_LIMIT: Duration = Duration::from_secs(20 * 60);

/// Runs `ballot` with `args` to completion, failing the test if it takes over
/// [`COMMAND_LIMIT`].
pub fn ballot(args: &[&str]) -> Output {
    e2e::output_within(
        Command::new(env!("CARGO_BIN_EXE_ballot")).args(args),
        COMMAND_LIMIT,
        &format!("ballot {}", args.join(" ")),
    )
}

/// Runs `ballot` with `args` and checks that it fails cleanly: exit code 1, no panic, and
/// every one of `needles` in its stderr.
pub fn assert_clean_failure(args: &[&str], needles: &[&str]) {
    assert_exit(args, 1, needles);
}

/// Like [`assert_clean_failure`] with exit code `code` (2 for a usage error from clap).
pub fn assert_exit(args: &[&str], code: i32, needles: &[&str]) {
    let out = ballot(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(
            err.contains(n),
            "{args:?}: stderr should mention {n:?}: {err}"
        );
    }
}

/// A JSON file the command wrote.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A number field of a JSON object, failing the test with the object when it is not one.
pub fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// 2006-03-01T00:00:00Z in unix ms.
const MARCH_1: i64 = 1_141_171_200_000;
const DAY_MS: i64 = 86_400_000;

/// Generates a synthetic log of `queries` queries (`dir/flat.parquet`) and writes it as
/// `days` daily partitions of equal size under `dir/lake` (`date=2006-03-01/part-0.parquet`,
/// ..., and a `_SUCCESS` marker); returns the frequency table's path.
pub fn partitioned_log(dir: &Path, queries: usize, days: usize) -> PathBuf {
    use querylog::{read_log, write_log_parquet, LogRecord, ReadOptions};
    assert!((1..=9).contains(&days), "one-digit days only");
    let flat = dir.join("flat.parquet");
    let n = queries.to_string();
    let run = ballot(&["gen", "--queries", &n, "--output", flat.to_str().unwrap()]);
    assert!(run.status.success(), "gen: {}", stderr(&run));
    let log = read_log(&flat, &ReadOptions::default()).expect("read the generated log");
    let per_day = log.records.len().div_ceil(days);
    for (d, chunk) in log.records.chunks(per_day).enumerate() {
        let day = MARCH_1 + d as i64 * DAY_MS;
        let records: Vec<LogRecord> = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| LogRecord {
                ts: Some(day + i as i64 * 1000),
                ..r.clone()
            })
            .collect();
        let folder = dir.join("lake").join(format!("date=2006-03-0{}", d + 1));
        std::fs::create_dir_all(&folder).unwrap();
        write_log_parquet(&folder.join("part-0.parquet"), &records).unwrap();
    }
    // A marker file as data lakes write them: skipped.
    std::fs::write(dir.join("lake").join("_SUCCESS"), "").unwrap();
    dir.join("flat.freq.tsv")
}
