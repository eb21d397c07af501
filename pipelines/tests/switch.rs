//! `ballot eval --switch-table OLD NEW` end to end on the embedded synthetic default: two
//! tables trained with different seeds and cache sizes, switched in the middle of the test
//! part. The JSON has the documented shape, the ramp lowers the peak windowed miss bytes
//! ratio, and switching a table to itself is a plain `eval` of that table.

mod common;

use std::path::Path;

use common::{ballot, num, read_json, stderr, stdout};
use data::table::{TableRow, VotingTable};

const SYNTH: &str = "40000";

fn train(out: &Path, seed: &str, cache_frac: &str) {
    let run = ballot(&[
        "train",
        "--synth-queries",
        SYNTH,
        "--seed",
        seed,
        "--cache-frac",
        cache_frac,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "train: {}", stderr(&run));
}

#[test]
fn switch_between_two_trained_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        dir.path().join("old.parquet"),
        dir.path().join("new.parquet"),
    );
    train(&old, "1", "0.05");
    train(&new, "2", "0.02");
    let json = dir.path().join("switch.json");
    let svg = dir.path().join("switch.svg");
    let out = ballot(&[
        "eval",
        "--synth-queries",
        SYNTH,
        // The caches the tables were trained for (`train`'s default, the replica's);
        // `eval` defaults to LRU.
        "--eviction",
        "sieve",
        "--switch-table",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--ramp",
        "2000",
        "--switch-window",
        "500",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("peak after switch"),
        "{}",
        stdout(&out)
    );
    let doc = read_json(&json);
    let s = &doc["switch"];
    let test_queries = doc["config"]["test_queries"].as_u64().unwrap();
    assert_eq!(test_queries, 8000);
    assert_eq!(s["at"].as_u64(), Some(test_queries / 2));
    assert_eq!(s["ramp"].as_u64(), Some(2000));
    let windows = s["windows"].as_array().unwrap();
    assert_eq!(windows.len() as u64, test_queries.div_ceil(500));
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(w["start"].as_u64(), Some(i as u64 * 500));
        for key in ["instant", "ramp"] {
            assert!((0.0..=1.0).contains(&num(w, key)), "{w}");
        }
        // Before the switch both modes are the same replay.
        if (i + 1) * 500 <= 4000 {
            assert_eq!(num(w, "instant"), num(w, "ramp"), "{w}");
        }
    }
    for key in [
        "peak_instant",
        "peak_ramp",
        "overall_instant",
        "overall_ramp",
    ] {
        assert!((0.0..=1.0).contains(&num(s, key)), "{key} in {s}");
    }
    assert!(
        num(s, "peak_ramp") < num(s, "peak_instant"),
        "the ramp should lower the peak: {s}"
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("instant switch"));
}

#[test]
fn switching_a_table_to_itself_is_a_plain_eval() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.parquet");
    train(&table, "1", "0.05");
    let t = table.to_str().unwrap();
    let json = dir.path().join("switch.json");
    let out = ballot(&[
        "eval",
        "--synth-queries",
        SYNTH,
        "--switch-table",
        t,
        t,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = read_json(&json)["switch"].clone();
    let plain_json = dir.path().join("eval.json");
    let out = ballot(&[
        "eval",
        "--synth-queries",
        SYNTH,
        "--policies",
        "table",
        "--table",
        t,
        "--json",
        plain_json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plain = num(&read_json(&plain_json)["results"][0], "miss_bytes_ratio");
    assert_eq!(num(&s, "overall_instant"), plain);
    assert_eq!(num(&s, "overall_ramp"), plain);
    assert_eq!(num(&s, "peak_instant"), num(&s, "peak_ramp"));
}

#[test]
fn bad_switch_arguments_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, replicas: u16| {
        let path = dir.path().join(name);
        let rows = (0..replicas)
            .map(|r| TableRow {
                term: format!("t{r}"),
                replica: r,
                weight: 1.0,
            })
            .collect();
        VotingTable::new(replicas, rows, Default::default())
            .unwrap()
            .write_parquet(&path)
            .unwrap();
        path.display().to_string()
    };
    let (eight, four) = (write("eight.parquet", 8), write("four.parquet", 4));
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["--switch-table", &eight, &four],
            "four.parquet: voting table has 4 replicas",
        ),
        (
            vec!["--switch-table", &eight, &eight, "--policies", "all"],
            "cannot be used with",
        ),
        (vec!["--ramp", "10"], "--switch-table"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["eval", "--synth-queries", "2000"];
        args.extend(extra);
        let out = ballot(&args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: want {needle:?} in {err}");
    }
}
