//! `ballot eval` end to end on the embedded synthetic default: the JSON it writes has the
//! documented shape, the routing policies order as the design predicts, and the SVG chart
//! is written.

mod common;

use common::{ballot, read_json, stderr};

#[test]
fn eval_on_the_embedded_default_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("eval.json");
    let svg = dir.path().join("eval.svg");
    let out = ballot(&[
        "eval",
        "--synth-queries",
        "60000",
        "--cache-frac",
        "0.02,0.05",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = read_json(&json);
    let results = doc["results"].as_array().unwrap();
    // Every policy but the table (no --table) x 2 cache sizes.
    let policies = balancer::PolicyKind::ALL.len() - 1;
    assert_eq!(results.len(), 2 * policies);
    for r in results {
        for key in [
            "policy",
            "cache_frac",
            "replicas",
            "eviction",
            "miss_bytes_ratio",
            "miss_ratio",
            "flash_bytes_per_query",
            "imbalance",
            "imbalance_p99_window",
            "queries",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
        let m = r["miss_bytes_ratio"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&m));
    }
    let mbr = |policy: &str, frac: f64| {
        results
            .iter()
            .find(|r| r["policy"] == policy && r["cache_frac"].as_f64() == Some(frac))
            .unwrap()["miss_bytes_ratio"]
            .as_f64()
            .unwrap()
    };
    let bound = |frac: f64| {
        doc["bounds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["cache_frac"].as_f64() == Some(frac))
            .unwrap()["miss_bytes_ratio"]
            .as_f64()
            .unwrap()
    };
    for frac in [0.02, 0.05] {
        assert!(
            mbr("round-robin", frac) > mbr("term-vote", frac),
            "term voting beats round-robin at {frac}"
        );
        assert!(
            mbr("term-vote", frac) > bound(frac),
            "one big cache is the bound at {frac}"
        );
    }
    assert!(
        mbr("round-robin", 0.02) > mbr("round-robin", 0.05),
        "a bigger cache misses less"
    );
    assert!(doc["lookups_per_sec"].as_f64().unwrap() > 0.0);
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("term-vote"));
}
