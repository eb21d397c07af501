//! `ballot retrain` end to end against live balancers on loopback: a partitioned synthetic
//! log (one `date=` folder per day), balancers that serve a hash-placed table in front of
//! `e2e::Backend` replicas, and the real `ballot` binary for every process.
//!
//! - Every balancer or none: with a balancer whose admin token differs and an address that
//!   does not answer among four, the better table is checked on all, refused by those two
//!   (each named in the record and the error), and switched on none, while queries through
//!   the two live balancers keep succeeding. Without them it is switched on both: their
//!   `/admin/table` reports the new version and the content hash the check reported, and
//!   `/admin/table/parquet` returns the new table's rows.
//! - A switch that fails after another balancer switched (a stand-in balancer that passes
//!   the check and refuses the switch) rolls that one back to the table it served.
//! - The rule decides on the throughput the queueing simulator predicts (one run per
//!   evaluation seed, their mean in the record). A table trained on a single day from the
//!   served table's homes is refused against the served one, with both tables' numbers in
//!   the record, and nothing is pushed.
//! - A movement budget: trained from the served table's homes, the candidate moves at most
//!   `--max-move` of the train days' requested bytes; trained from scratch, it moves more
//!   and is refused with the figure named.
//! - Partition selection: `--from/--to` on the same directory read only the days inside.
//! - `ballot ingest --partition-by-day` writes such a directory from a flat log, with every
//!   record, and refuses a log without times.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{assert_clean_failure, ballot, num, partitioned_log, read_json, stderr, stdout};
use data::hash::term_hash;
use data::table::{TableRow, VotingTable};
use data::tokenizer::Tokens;
use e2e::{http_get, start_listening, Backend, Reply, Running};
use querylog::{read_log, ReadOptions};
use serde_json::Value;

const REPLICAS: u16 = 4;
const TOKEN: &str = "retrain-test-token";
const LIMIT: Duration = Duration::from_secs(30);

/// A table that places every term of the log on a replica by its hash: valid, balanced,
/// and blind to which terms are queried together.
fn hashed_table(dir: &Path, path: &Path) {
    let log = read_log(&dir.join("flat.parquet"), &ReadOptions::default()).unwrap();
    let mut tokens = Tokens::new();
    let mut terms = std::collections::BTreeSet::new();
    for r in &log.records {
        tokens.tokenize(&r.query);
        terms.extend(tokens.iter().map(str::to_owned));
    }
    let rows = terms
        .into_iter()
        .map(|t| TableRow {
            replica: (term_hash(&t) % u64::from(REPLICAS)) as u16,
            term: t,
            weight: 1.0,
        })
        .collect();
    VotingTable {
        replicas: REPLICAS,
        rows,
        metadata: Default::default(),
    }
    .write_parquet(path)
    .unwrap();
}

struct Balancer {
    _child: Running,
    _replicas: Vec<Backend>,
    admin: String,
    client: String,
}

/// A closed loopback port (bound, then released).
fn dead_address() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn start_balancer(dir: &Path, name: &str, table: &Path, token: &str) -> Balancer {
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{token}\"\n\
         ramp_queries = 0\n\n[policy]\nname = \"table\"\ntable = \"{}\"\n",
        table.display()
    );
    let replicas: Vec<Backend> = (0..REPLICAS)
        .map(|r| Backend::start(&format!("{name}-r{r}")))
        .collect();
    for (r, b) in replicas.iter().enumerate() {
        config += &format!(
            "\n[[replicas]]\nname = \"r{r}\"\naddress = \"{}\"\n",
            b.address()
        );
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    let (child, client, lines) = start_listening(
        Command::new(env!("CARGO_BIN_EXE_ballot"))
            .arg("balancer")
            .arg("--config")
            .arg(&path),
        &dir.join(format!("{name}.stderr")),
        LIMIT,
        name,
    );
    let admin = lines
        .recv_timeout(LIMIT)
        .ok()
        .and_then(|l| l.strip_prefix("admin on ").map(str::to_owned))
        .expect("the balancer prints `admin on ADDR`");
    std::thread::spawn(move || for _ in lines {});
    Balancer {
        _child: child,
        _replicas: replicas,
        admin,
        client,
    }
}

/// Queries sent one after another to each of `clients` until stopped: the answers that
/// were not 200.
struct Queries {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl Queries {
    fn start(clients: Vec<String>) -> Queries {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (Arc::clone(&stop), Arc::clone(&sent));
        let thread = std::thread::spawn(move || {
            let mut bad = Vec::new();
            for i in 0.. {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let addr = &clients[i % clients.len()];
                let q = ["weather", "new+york", "cheap+flights", "google"][i % 4];
                match http_get(addr, &format!("/search?q={q}"), LIMIT) {
                    Some((200, _)) => {}
                    other => bad.push(format!("{addr} {q}: {other:?}")),
                }
                n.fetch_add(1, Ordering::SeqCst);
            }
            bad
        });
        Queries { stop, sent, thread }
    }

    /// Stops and returns (queries sent, failures).
    fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let bad = self.thread.join().unwrap();
        (self.sent.load(Ordering::SeqCst), bad)
    }
}

/// A stand-in for a balancer whose switch fails: it serves `table` for a rollback, passes
/// the check, and answers every switch with a 500.
fn refusing_switch(table: Vec<u8>) -> Backend {
    Backend::with_handler("refusing", move |r| {
        match (r.method.as_str(), r.target.as_str()) {
            ("GET", "/admin/table/parquet") => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.apache.parquet\r\n\
                 content-length: {}\r\n\r\n",
                    table.len()
                );
                let mut all = head.into_bytes();
                all.extend_from_slice(&table);
                Reply::raw(&[&all[..]], false)
            }
            ("POST", "/admin/table?check=true") => {
                Reply::Json(200, r#"{"checked":true,"content_hash":"0"}"#.to_owned())
            }
            _ => Reply::Json(500, r#"{"error":"switch refused"}"#.to_owned()),
        }
    })
}

/// The body of an authenticated `GET path` on a balancer's admin address.
fn admin_get(admin: &str, path: &str) -> Vec<u8> {
    let auth = format!("Bearer {TOKEN}");
    let addr = admin.parse().expect("an admin address");
    let r = e2e::http::request(addr, "GET", path, &[("Authorization", &auth)], b"");
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    r.body
}

/// The balancer's `/admin/table` JSON.
fn table_state(admin: &str) -> serde_json::Value {
    serde_json::from_slice(&admin_get(admin, "/admin/table")).unwrap()
}

/// The rows of the table a balancer serves, sorted.
fn served_rows(admin: &str) -> Vec<(String, u16, u32)> {
    let bytes = admin_get(admin, "/admin/table/parquet");
    rows(&VotingTable::from_parquet_bytes(bytes, Path::new("served"), None).unwrap())
}

fn rows(t: &VotingTable) -> Vec<(String, u16, u32)> {
    let mut r: Vec<_> = t
        .rows
        .iter()
        .map(|r| (r.term.clone(), r.replica, r.weight.to_bits()))
        .collect();
    r.sort();
    r
}

#[test]
fn retrain_promotes_a_better_table_to_every_balancer_and_refuses_a_worse_one() {
    let _heavy = e2e::heavy();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let freq = partitioned_log(d, 60_000, 4);
    let hashed = d.join("hashed.parquet");
    hashed_table(d, &hashed);
    let a = start_balancer(d, "a", &hashed, TOKEN);
    let b = start_balancer(d, "b", &hashed, TOKEN);
    let other_token = start_balancer(d, "c", &hashed, "another-token");
    let dead = dead_address();
    let token = d.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let lake = d.join("lake");
    let common_args = |days: &str, out: &str, record: &str| -> Vec<String> {
        [
            "retrain",
            "--log",
            lake.to_str().unwrap(),
            "--freq",
            freq.to_str().unwrap(),
            "--days",
            days,
            "--replicas",
            "4",
            "--token-file",
            token.to_str().unwrap(),
            "--balancer",
            &a.admin,
            "--balancer",
            &b.admin,
            "--output",
            d.join(out).to_str().unwrap(),
            "--record",
            d.join(record).to_str().unwrap(),
            "--push-attempts",
            "2",
            "--push-backoff",
            "0.1",
            // The hashed table places nothing worth keeping: the first learned table is
            // trained from scratch, whatever it moves.
            "--fresh",
            "--max-move",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run_with = |args: Vec<String>| {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        ballot(&argv)
    };

    // 1. Three train days against the hashed table, with a balancer whose token differs
    //    and a dead address among the four: promoted by the rule, refused by those two,
    //    switched on none; queries through the live balancers keep succeeding.
    let load = Queries::start(vec![a.client.clone(), b.client.clone()]);
    let mut args = common_args("3", "new.parquet", "none.json");
    args.extend(["--balancer", &other_token.admin, "--balancer", &dead].map(String::from));
    let run = run_with(args);
    let (sent, failed) = load.stop();
    assert!(
        sent > 0 && failed.is_empty(),
        "{} of {sent} failed: {failed:?}",
        failed.len()
    );
    assert!(!run.status.success(), "stdout:\n{}", stdout(&run));
    assert!(
        stderr(&run).contains("2 of 4 balancers refused it, so none serves it"),
        "{}",
        stderr(&run)
    );
    let rec = read_json(&d.join("none.json"));
    assert_eq!(rec["decision"], "promoted", "{rec}");
    let p = &rec["promotion"];
    assert_eq!(p["outcome"], "none", "{p}");
    assert_eq!(
        p["switches"],
        serde_json::json!([]),
        "no switch before every check: {p}"
    );
    let refused: Vec<&str> = p["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(refused.len(), 2, "{p}");
    assert!(
        refused[0].starts_with(&other_token.admin) && refused[0].contains("401"),
        "{p}"
    );
    assert!(
        refused[1].starts_with(&dead) && refused[1].contains("connect"),
        "{p}"
    );
    let checks = p["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4);
    assert!(checks[..2]
        .iter()
        .all(|c| c["ok"] == true && c["content_hash"].is_string()));
    assert_eq!(checks[3]["attempts"], 2, "a dead address is retried: {p}");
    let hashed_rows = rows(&VotingTable::read_parquet(&hashed, None).unwrap());
    for bal in [&a, &b] {
        assert_eq!(table_state(&bal.admin)["version"], 1);
        assert_eq!(served_rows(&bal.admin), hashed_rows);
    }

    // 1b. The two live balancers only: switched on both, each reporting the content hash
    //     the check reported.
    let run = run_with(common_args("3", "new.parquet", "promote.json"));
    assert!(run.status.success(), "{}", stderr(&run));
    let rec = read_json(&d.join("promote.json"));
    assert_eq!(rec["eviction"], "sieve", "the replicas' default");
    assert_eq!(rec["test_day"], "2006-03-04");
    assert_eq!(
        rec["train_days"],
        serde_json::json!(["2006-03-01", "2006-03-02", "2006-03-03"])
    );
    let (new, cur) = (&rec["new"], &rec["current"]);
    // The deciding figure: the predicted throughput, 2% higher at least (the mean of one
    // prediction per evaluation seed); the guard on all replicas' flash bytes per query.
    assert_eq!(rec["deciding"], "throughput_qps", "{rec}");
    let qps = |t: &Value| num(&t["predicted"], "throughput_qps");
    assert!(qps(new) >= qps(cur) * 1.02, "{rec}");
    for t in [new, cur] {
        let by_seed = t["predicted"]["throughput_by_seed"].as_array().unwrap();
        assert_eq!(by_seed.len(), 8, "{rec}");
        let mean = by_seed.iter().map(|v| v.as_f64().unwrap()).sum::<f64>() / 8.0;
        assert!((mean - qps(t)).abs() < 1e-6 * mean, "{rec}");
    }
    assert_eq!(rec["serving"]["concurrency"], 32, "{rec}");
    assert!(
        num(new, "flash_bytes_per_query") <= num(cur, "flash_bytes_per_query") * 1.05,
        "{rec}"
    );
    assert_eq!(
        rec["part_wins_needed"], 0,
        "the parts do not decide by default: {rec}"
    );
    // 15,000 test queries one second apart fill the first 5 of the day's 24 hours.
    assert_eq!(rec["parts"], 5, "{rec}");
    assert!(
        rec["parts_by"].as_str().unwrap().starts_with("time"),
        "{rec}"
    );
    assert_eq!(rec["by_part"].as_array().unwrap().len(), 24);
    assert!(cur["source"]
        .as_str()
        .unwrap()
        .ends_with("/admin/table/parquet"));
    assert_eq!(rec["current_version"], 1);
    let p = &rec["promotion"];
    assert_eq!(p["outcome"], "all", "{p}");
    let checked = p["checks"][0]["content_hash"].as_str().unwrap().to_owned();
    for s in p["switches"].as_array().unwrap() {
        assert_eq!(
            (&s["ok"], &s["version"]),
            (&serde_json::json!(true), &serde_json::json!(2))
        );
    }
    let new_rows = rows(&VotingTable::read_parquet(&d.join("new.parquet"), None).unwrap());
    for bal in [&a, &b] {
        let st = table_state(&bal.admin);
        assert_eq!(st["version"], 2, "{st}");
        assert_eq!(st["content_hash"], checked.as_str(), "{st}");
        assert_eq!(served_rows(&bal.admin), new_rows);
    }

    // 1c. A switch that fails after one balancer switched: that one is rolled back to the
    //     table it served.
    let e = start_balancer(d, "e", &hashed, TOKEN);
    let stand_in = refusing_switch(std::fs::read(&hashed).unwrap());
    let mut args = common_args("3", "new-again.parquet", "rollback.json");
    let ai = args.iter().position(|x| *x == a.admin).unwrap();
    args[ai] = e.admin.clone();
    let bpos = args.iter().position(|x| *x == b.admin).unwrap();
    args[bpos] = stand_in.address();
    let run = run_with(args);
    assert!(!run.status.success(), "stdout:\n{}", stdout(&run));
    let rec = read_json(&d.join("rollback.json"));
    let p = &rec["promotion"];
    assert_eq!(p["outcome"], "none", "{p}");
    assert_eq!(p["switches"][0]["ok"], true, "{p}");
    assert_eq!(p["switches"][1]["ok"], false, "{p}");
    assert_eq!(p["rollbacks"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["rollbacks"][0]["balancer"], e.admin.as_str(), "{p}");
    assert_eq!(p["rollbacks"][0]["ok"], true, "{p}");
    assert!(stderr(&run).contains("rolled back"), "{}", stderr(&run));
    let st = table_state(&e.admin);
    assert_eq!(st["version"], 3, "switched, then rolled back: {st}");
    assert_eq!(served_rows(&e.admin), hashed_rows);

    // 2. One train day against the three-day table now served, trained from its homes
    //    (the default): refused with the numbers; the balancers keep version 2.
    let stable = |mut args: Vec<String>| {
        let at = args.iter().position(|x| x == "--fresh").unwrap();
        args.drain(at..at + 3);
        args
    };
    let mut args = stable(common_args("1", "one-day.parquet", "refuse.json"));
    args.extend(["--eviction".to_string(), "lru".to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = ballot(&argv);
    assert!(
        run.status.success(),
        "refusing is a success: {}",
        stderr(&run)
    );
    let out = stdout(&run);
    assert!(out.contains("\nrefuse: "), "{out}");
    assert!(out.starts_with("moves the top vote of "), "{out}");
    assert!(out.contains("\nserved: predicted "), "{out}");
    let rec = read_json(&d.join("refuse.json"));
    assert_eq!(rec["decision"], "refused", "{rec}");
    assert_eq!(rec["eviction"], "lru");
    assert_eq!(rec["train_days"], serde_json::json!(["2006-03-03"]));
    assert_eq!(rec["current_version"], 2);
    let (new, cur) = (&rec["new"], &rec["current"]);
    // The figure the record names as deciding is the one that fails its margin.
    let figure = rec["deciding"].as_str().unwrap();
    assert_eq!(rec["trained"], "stable", "{rec}");
    assert!(num(&rec, "moved_share") <= 0.2, "the default budget: {rec}");
    assert_eq!(rec["eval_seeds"], 8, "{rec}");
    let qps = |t: &Value| num(&t["predicted"], "throughput_qps");
    let failed = match figure {
        "throughput_qps" => qps(new) < qps(cur) * 1.02,
        "flash_bytes_per_query" => num(new, figure) > num(cur, figure) * 1.05,
        "part_wins" => num(&rec, "part_wins") < num(&rec, "part_wins_needed"),
        other => panic!("unknown deciding figure {other}: {rec}"),
    };
    assert!(failed, "refused without reason: {rec}");
    assert!(rec["reason"]
        .as_str()
        .unwrap()
        .contains(&format!("{:.1}", qps(new))));
    assert_eq!(rec["promotion"]["outcome"], "skipped", "{rec}");
    assert_eq!(rec["promotion"]["checks"], serde_json::json!([]));
    for bal in [&a, &b] {
        assert_eq!(table_state(&bal.admin)["version"], 2);
        assert_eq!(served_rows(&bal.admin), new_rows);
    }
    // 3. Two train days against the served table with a budget of 5% of the requested
    //    bytes: trained from its homes, the candidate keeps within it (the record's figure,
    //    recomputed from both tables by the rule); trained from scratch, it moves more and
    //    is refused with that figure named, before any other.
    let budget = |fresh: bool, out: &str, record: &str| {
        let mut args = stable(common_args("2", out, record));
        args.extend(["--max-move", "0.05"].map(String::from));
        if fresh {
            args.push("--fresh".into());
        }
        run_with(args)
    };
    let run = budget(true, "fresh.parquet", "fresh.json");
    assert!(
        run.status.success(),
        "refusing is a success: {}",
        stderr(&run)
    );
    let rec = read_json(&d.join("fresh.json"));
    assert_eq!(rec["trained"], "fresh", "{rec}");
    let moved = num(&rec, "moved_share");
    assert!(moved > 0.05, "{rec}");
    assert_eq!(rec["decision"], "refused", "{rec}");
    assert_eq!(rec["deciding"], "moved_share", "{rec}");
    let reason = rec["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "{:.1}% of the train days' requested bytes",
            moved * 100.0
        )) && reason.contains("--max-move 5.0%"),
        "{reason}"
    );
    for bal in [&a, &b] {
        assert_eq!(table_state(&bal.admin)["version"], 2);
    }
    let run = budget(false, "kept.parquet", "kept.json");
    assert!(run.status.success(), "{}", stderr(&run));
    let rec = read_json(&d.join("kept.json"));
    assert_eq!(rec["trained"], "stable", "{rec}");
    assert!(num(&rec, "moved_share") <= 0.05, "{rec}");
    let m = &rec["movement"];
    assert!(
        num(m, "moved_bytes") <= 0.05 * num(m, "requested_bytes"),
        "{rec}"
    );
    // Promoted or not, by the rule's other figures: every balancer serves the same table.
    let version = if rec["decision"] == "promoted" { 3 } else { 2 };
    for bal in [&a, &b] {
        assert_eq!(table_state(&bal.admin)["version"], version, "{rec}");
    }
    // A budget, a seed count or a cluster out of range is refused before anything is read.
    for (flag, value, message) in [
        ("--max-move", "1.5", "--max-move 1.5 is not in [0, 1]"),
        ("--eval-seeds", "0", "--eval-seeds 0 is not in 1..=100"),
        (
            "--flash-read-mbps",
            "0",
            "--flash-read-mbps 0 must be a positive number of MB/s",
        ),
        ("--concurrency", "0", "--concurrency must be at least 1"),
    ] {
        let mut args = stable(common_args("2", "bad.parquet", "bad.json"));
        args.extend([flag, value].map(String::from));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_clean_failure(&argv, &[message]);
    }
    // The unused client port of each balancer stays up: nothing here touched it.
    let _ = http_get(&a.admin, "/healthz", LIMIT).expect("balancer a alive");
}

#[test]
fn from_and_to_select_partitions_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let freq = partitioned_log(d, 60_000, 4);
    let lake = d.join("lake");
    let stats = |extra: &[&str]| {
        let mut args = vec!["stats", "--log", lake.to_str().unwrap()];
        args.extend_from_slice(extra);
        let run = ballot(&args);
        assert!(run.status.success(), "stats {extra:?}: {}", stderr(&run));
        stderr(&run) + &stdout(&run)
    };
    let all = stats(&[]);
    assert!(
        all.contains("4 partitions read, 0 outside --from/--to skipped"),
        "{all}"
    );
    let two = stats(&["--from", "2006-03-02", "--to", "2006-03-03"]);
    assert!(
        two.contains("2 partitions read, 2 outside --from/--to skipped"),
        "{two}"
    );
    assert!(two.contains("partition 1: date=2006-03-02"), "{two}");
    // A time inside a day: that day's partition is read, its earlier records dropped.
    let half = stats(&["--from", "2006-03-04T01:00:00"]);
    assert!(
        half.contains("1 partitions read, 3 outside --from/--to skipped"),
        "{half}"
    );
    assert!(
        half.contains("records outside --from/--to dropped"),
        "{half}"
    );
    let lake_s = lake.to_str().unwrap();
    assert_clean_failure(
        &["stats", "--log", lake_s, "--from", "2007-01-01"],
        &["none of its 4 partitions is inside --from/--to"],
    );
    assert_clean_failure(
        &["stats", "--log", lake_s, "--to", "March"],
        &["--to \"March\" is not a date"],
    );
    let _ = freq;
}

#[test]
fn ingest_partitions_a_flat_log_by_day() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    partitioned_log(d, 60_000, 4);
    let lake = d.join("by-day");
    let run = ballot(&[
        "ingest",
        d.join("flat.parquet").to_str().unwrap(),
        "--partition-by-day",
        "-o",
        lake.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let days = std::fs::read_dir(&lake).unwrap().count();
    assert!(days > 1, "{days} partitions");
    assert!(
        stdout(&run).contains(&format!("daily partitions under {}", lake.display())),
        "{}",
        stdout(&run)
    );
    // Every record is in one of the days, in order.
    let flat = read_log(&d.join("flat.parquet"), &ReadOptions::default()).unwrap();
    let mut back = Vec::new();
    for f in querylog::list_partitions(&lake).unwrap() {
        let day = f.values[0].1.clone();
        for r in read_log(&f.path, &ReadOptions::default()).unwrap().records {
            assert_eq!(querylog::format_timestamp(r.ts.unwrap())[..10], day);
            back.push(r);
        }
    }
    assert_eq!(back, flat.records);
    assert_eq!(days, querylog::list_partitions(&lake).unwrap().len());

    let untimed = d.join("untimed.txt");
    std::fs::write(&untimed, "query one\nquery two\n").unwrap();
    let run = ballot(&[
        "ingest",
        untimed.to_str().unwrap(),
        "--partition-by-day",
        "-o",
        d.join("never").to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    assert!(
        stderr(&run).contains("untimed.txt: --partition-by-day needs a time on every record"),
        "{}",
        stderr(&run)
    );
}
