//! End to end over real processes on loopback, on a small synthetic log: replicas and the
//! balancer are the real servers (`ballot replica`, `ballot balancer`, the same code as the
//! `replica` and `balancer` binaries), queries go over real HTTP, and cache hits are read
//! from the replicas' own `/stats`.
//!
//! - `ballot demo` end to end: the learned table misses at most 0.8 of round-robin's
//!   measured miss bytes, the measurement agrees with the simulator within 0.05, and no
//!   request fails.
//! - Killing one of three replicas in the middle of a replay fails no client request; the
//!   killed replica had served traffic, the replay was still running at the kill, and the
//!   balancer counted the failover (an ejection).
//!
//! Each test bounds itself (small log, short replays, timeouts) and stops its processes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::{
    ballot_within, bin, heavy, http_get, stderr, stdout, wait_until, Balancer, Running, Server,
};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn demo_table_beats_round_robin_over_http() {
    let _heavy = heavy();
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("demo");
    let out = ballot_within(
        &[
            "demo",
            "--out",
            out_dir.to_str().unwrap(),
            "--synth-queries",
            "30000",
            "--docs",
            "200000",
            "--replicas",
            "4",
            "--cache-frac",
            "0.05",
            "--live-policies",
            "round-robin,table",
            "--live-warm",
            "2000",
            "--live-saturate",
            "2000",
            "--live-steady",
            "600",
            "--live-concurrency",
            "16",
            "--flash-read-mbps",
            "20",
        ],
        Duration::from_secs(600),
    );
    assert!(
        out.status.success(),
        "demo failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let live = read_json(&out_dir.join("live.json"));
    let rows = live["rows"].as_array().expect("rows");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["policy"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {live}"))
    };
    let measured = |name: &str| row(name)["measured_miss_bytes_ratio"].as_f64().unwrap();
    let (rr, table) = (measured("round-robin"), measured("table"));
    eprintln!(
        "measured miss bytes: table {table:.4}, round-robin {rr:.4} (ratio {:.3})",
        table / rr
    );
    // At this scale, with the replicas' default SIEVE caches, the table measured 0.65 of
    // round-robin's miss bytes (0.2850 against 0.4399; 0.71 with LRU); 0.8 is the claim, with room for the live run's spread, and a table of no
    // use (about 1.0) fails it.
    assert!(
        table <= 0.8 * rr,
        "table {table} is not at most 0.8 of round-robin's {rr} in measured miss bytes"
    );
    for r in rows {
        let sim = r["simulated_miss_bytes_ratio"].as_f64().unwrap();
        let got = r["measured_miss_bytes_ratio"].as_f64().unwrap();
        assert!(
            (got - sim).abs() <= 0.05,
            "{}: measured {got} is not within 0.05 of simulated {sim}",
            r["policy"]
        );
        assert_eq!(r["errors"], 0, "{}: failed requests", r["policy"]);
        assert!(r["sent"].as_u64().unwrap() >= 2600);
    }
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let live_md = report
        .split("## Live: real replicas and balancer over HTTP")
        .nth(1)
        .expect("a live section in report.md");
    // The section's first Markdown table: the header and separator rows have the same
    // number of cells, and every policy has a row. (Later tables, such as the queueing
    // prediction, have their own shapes.)
    let lines: Vec<&str> = live_md
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let cells = |l: &str| l.matches('|').count();
    assert!(lines.len() >= 4, "header, separator, 2 rows: {live_md}");
    assert!(lines[1].starts_with("|---"), "{}", lines[1]);
    for l in &lines[1..] {
        assert_eq!(cells(l), cells(lines[0]), "{l}");
    }
    for svg in [
        "eval.svg",
        "live-miss.svg",
        "live-throughput.svg",
        "live-p99.svg",
    ] {
        let text = std::fs::read_to_string(out_dir.join(svg)).unwrap();
        assert!(text.starts_with("<svg"), "{svg} is not an SVG");
    }
}

/// Starts `ballot <args>` (stderr to `stderr_log`) until it prints `listening on`.
fn start(args: &[&str], stderr_log: &Path) -> Server {
    Server::start(
        Command::new(bin("ballot")).args(args),
        stderr_log,
        &format!("ballot {}", args.join(" ")),
    )
}

/// `GET /stats` of a replica at `addr`: its `queries` counter (0 if it cannot be reached).
fn replica_queries(addr: &str) -> u64 {
    http_get(addr, "/stats", Duration::from_secs(2))
        .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
        .and_then(|v| v["queries"].as_u64())
        .unwrap_or(0)
}

#[test]
fn killing_a_replica_mid_replay_fails_no_request() {
    let _heavy = heavy();
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let built = ballot_within(
        &[
            "build-index",
            "--synth-queries",
            "6000",
            "--docs",
            "50000",
            "-o",
            index.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(built.status.success(), "{}", stderr(&built));

    let mut replicas = Vec::new();
    for i in 0..3 {
        let id = format!("r{i}");
        let log = tmp.path().join(format!("{id}.stderr"));
        replicas.push(start(
            &[
                "replica",
                "--index",
                index.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--cache-bytes",
                "2000000",
                "--id",
                &id,
            ],
            &log,
        ));
    }
    let mut config = String::from(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n\
         request_timeout_ms = 2000\ndeadline_ms = 10000\nretries = 2\n\n\
         [health]\ninterval_ms = 200\ntimeout_ms = 200\nfall = 2\nrise = 2\n\n\
         [policy]\nname = \"ch-bl\"\n",
    );
    for (i, r) in replicas.iter().enumerate() {
        let addr = r.addr();
        config += &format!("\n[[replicas]]\nname = \"r{i}\"\naddress = \"{addr}\"\n");
    }
    let mut cmd = Command::new(bin("ballot"));
    cmd.arg("balancer");
    let balancer = Balancer::start_with(cmd, tempfile::tempdir().unwrap(), &config);
    let addr = balancer.addr();
    let counter = |name: &str| balancer.metric(name).unwrap_or(0.0);

    // 6,000 queries at 600/s: ten seconds of open-loop load; replica r1 dies early in it.
    let report = tmp.path().join("replay.json");
    let replay = Command::new(bin("ballot"))
        .args([
            "replay",
            "--target",
            &format!("http://{addr}"),
            "--synth-queries",
            "6000",
            "--part",
            "all",
            "--rate",
            "600",
            "--timeout",
            "20s",
            "--json",
            report.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.path().join("replay.stderr")).unwrap())
        .spawn()
        .expect("replay starts");
    let mut replay = Running::new(replay, "ballot replay");
    // Kill r1 once the replay has been running through it for a while (at least 300 of its
    // queries answered), so the kill lands mid-replay however slow the start-up is.
    let mut victim = replicas.remove(1);
    let victim_addr = victim.addr().to_string();
    wait_until(Duration::from_secs(60), "r1 serving 300 queries", || {
        assert!(replay.try_wait().is_none(), "replay ended early");
        replica_queries(&victim_addr) >= 300
    });
    let ejections_before = counter("ballot_ejections_total");
    victim.kill();
    let status = replay.wait_within(Duration::from_secs(120));
    assert!(
        status.success(),
        "replay failed: {}",
        std::fs::read_to_string(tmp.path().join("replay.stderr")).unwrap_or_default()
    );
    let r = read_json(&report);
    assert_eq!(r["sent"], 6000, "{r}");
    assert_eq!(r["ok"], 6000, "every request answered: {r}");
    assert_eq!(r["error_total"], 0, "no request failed: {r}");
    // The failover happened: the balancer ejected the killed replica (passively after a
    // failed request, or by its health checks) while the replay ran.
    let ejections = counter("ballot_ejections_total") - ejections_before;
    assert!(
        ejections >= 1.0,
        "no ejection counted after the kill ({ejections})"
    );
}
