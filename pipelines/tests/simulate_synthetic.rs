//! `ballot simulate` end to end on the embedded synthetic default: the JSON it writes has
//! the documented shape and the numbers order as the design predicts, the sweep is drawn,
//! and bad arguments fail with an error that names them.

mod common;

use common::{ballot, read_json, stderr};

#[test]
fn simulate_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sim.json");
    let svg = dir.path().join("sim.svg");
    let out = ballot(&[
        "simulate",
        "--synth-queries",
        "20000",
        "--docs",
        "1000000",
        "--policies",
        "round-robin,term-vote",
        "--cpu-us",
        "200",
        "--sweep",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("queries/s in the timed phases"), "{stdout}");
    let doc = read_json(&json);
    assert_eq!(doc["config"]["simulator"]["replicas"], 8);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let get = |i: usize, phase: &str, key: &str| results[i][phase][key].as_f64().unwrap();
    for (i, r) in results.iter().enumerate() {
        assert!(get(i, "saturation", "throughput_qps") > 0.0);
        assert_eq!(r["saturation"]["ok"], 2000, "half the 4,000 test queries");
        assert_eq!(r["latency"]["ok"], 2000);
        let l = &r["latency"]["latency_ms"];
        assert!(l["p99"].as_f64() >= l["p50"].as_f64());
        assert_eq!(r["latency"]["utilisation"].as_array().unwrap().len(), 8);
        assert_eq!(r["sweep"].as_array().unwrap().len(), 3);
    }
    // One offered rate for every policy: 0.6 × the first policy's saturation.
    let rate = 0.6 * get(0, "saturation", "throughput_qps");
    for i in 0..2 {
        let offered = get(i, "latency", "offered_qps");
        assert!((offered / rate - 1.0).abs() < 1e-6, "{offered} vs {rate}");
    }
    // Term voting misses less and serves more than round-robin.
    assert_eq!(results[1]["policy"], "term-vote");
    assert!(get(1, "latency", "miss_bytes_ratio") < get(0, "latency", "miss_bytes_ratio"));
    assert!(get(1, "saturation", "throughput_qps") > get(0, "saturation", "throughput_qps"));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("term-vote"));
}

#[test]
fn bad_simulate_arguments_fail_cleanly() {
    for (args, needle) in [
        (vec!["--load", "queued"], "queued"),
        (vec!["--arrivals", "log"], "split-time"),
        (vec!["--max-inflight", "0"], "max_inflight"),
        (vec!["--saturate", "4000"], "--saturate"),
    ] {
        let mut all = vec![
            "simulate",
            "--synth-queries",
            "20000",
            "--policies",
            "ch-bl",
        ];
        all.extend(&args);
        let out = ballot(&all);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn the_demo_phases_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sim.json");
    let out = ballot(&[
        "simulate",
        "--synth-queries",
        "20000",
        "--docs",
        "1000000",
        "--policies",
        "ch-bl",
        "--load",
        "in-flight",
        "--warmup",
        "closed",
        "--warm",
        "500",
        "--saturate",
        "700",
        "--steady",
        "300",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = read_json(&json);
    let r = &doc["results"][0];
    assert_eq!(r["warmup"]["sent"], 500);
    assert_eq!(r["saturation"]["sent"], 700);
    assert_eq!(r["latency"]["sent"], 300);
    assert_eq!(doc["config"]["simulator"]["balancer"]["load"], "in-flight");
    // 32 clients over 8 replicas by requests in flight: the cap sits near the mean, so
    // ch-bl overflows often.
    assert!(r["saturation"]["overflow_share"].as_f64().unwrap() > 0.1);
}
