//! `ballot explain` names the replica a live balancer routes each query to (issue 32): a
//! table trained on the synthetic log, 1,000 of its queries (terms in the table and terms
//! not in it) sent one at a time through a real `balancer` (`ballot balancer`) in front of
//! four `e2e::Backend`s, each answer's `x-ballot-replica` and `x-ballot-reason` compared
//! with what `ballot explain` printed for the query offline. The balancer bounds by
//! requests in flight and each query waits until nothing is in flight, so its view is the
//! idle one `ballot explain` assumes by default; bad arguments fail with a clear error.

mod common;

use std::process::Command;

use common::{assert_clean_failure, ballot, stderr, stdout};
use data::synth::{generate, SynthConfig};
use e2e::{wait_until, Backend, Balancer, LIMIT};
use serde_json::Value;

#[test]
fn explain_names_the_replica_the_balancer_chooses_for_1000_queries() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).display().to_string();
    let small = ["--synth-queries", "20000"];
    let run = ballot(&[&["sizes"][..], &small, &["-o", &p("sizes.parquet")]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
    let run = ballot(
        &[
            &["train"][..],
            &small,
            &["--replicas", "4", "--sizes", &p("sizes.parquet")],
            &["-o", &p("table.parquet")],
        ]
        .concat(),
    );
    assert!(run.status.success(), "{}", stderr(&run));

    // The log's last 990 queries and ten of words no log has.
    let log = generate(&SynthConfig {
        queries: 20_000,
        ..SynthConfig::default()
    });
    let mut queries: Vec<String> = log.queries[log.queries.len() - 990..].to_vec();
    queries.extend((0..10).map(|i| format!("zzq{i} xqv{i}")));
    std::fs::write(p("queries.txt"), queries.join("\n")).unwrap();
    let run = ballot(&[
        "explain",
        "--table",
        &p("table.parquet"),
        "--sizes",
        &p("sizes.parquet"),
        "--queries",
        &p("queries.txt"),
        "--json",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let explained: Vec<Value> = stdout(&run)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(explained.len(), 1000);

    let backends: Vec<Backend> = (0..4).map(|i| Backend::start(&format!("r{i}"))).collect();
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"t\"\n\
         load = \"in-flight\"\nrouting_headers = true\n\n[policy]\nname = \"table\"\n\
         table = \"{}\"\nsizes = \"{}\"\n",
        p("table.parquet"),
        p("sizes.parquet")
    );
    for b in &backends {
        config += &format!(
            "\n[[replicas]]\nname = \"{}\"\naddress = \"{}\"\n",
            b.name(),
            b.address()
        );
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ballot"));
    cmd.arg("balancer");
    let balancer = Balancer::start_with(cmd, tempfile::tempdir().unwrap(), &config);
    let mut stand_in_only = 0;
    for (q, e) in queries.iter().zip(&explained) {
        wait_until(LIMIT, "nothing in flight", || {
            balancer.replicas().iter().all(|r| r["in_flight"] == 0)
        });
        let r = balancer.search(&q.replace(' ', "+"));
        assert_eq!(r.status, 200, "{q}: {}", r.text());
        assert_eq!(
            r.header("x-ballot-replica"),
            e["chosen"].as_str(),
            "{q}: {e}"
        );
        assert_eq!(r.header("x-ballot-reason"), e["rule"].as_str(), "{q}: {e}");
        let terms = e["terms"].as_array().unwrap();
        stand_in_only += usize::from(terms.iter().all(|t| t["in_table"] == false));
    }
    // Both kinds of query were compared: some with table votes, some with stand-ins only.
    assert!((10..1000).contains(&stand_in_only), "{stand_in_only}");
}

#[test]
fn explain_refuses_bad_arguments_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let table = e2e::write_votes(dir.path(), 2, &[("a", 0), ("b", 1)]);
    let t = table.display().to_string();
    assert_clean_failure(
        &["explain", "--table", &t, "--loads", "1,2,3", "a"],
        &["--loads has 3 values", "2 replicas"],
    );
    assert_clean_failure(
        &["explain", "--table", &t, "--down", "5", "a"],
        &["--down 5"],
    );
    assert_clean_failure(&["explain", "--table", &t], &["no query to explain"]);
    assert_clean_failure(
        &["explain", "--table", &t, "--queries", "/nonexistent/q.txt"],
        &["/nonexistent/q.txt"],
    );
    assert_clean_failure(
        &["explain", "--table", "/nonexistent/t.parquet", "a"],
        &["t.parquet"],
    );
    assert_clean_failure(
        &["explain", "--table", &t, "--homes", "2", "a"],
        &["--homes"],
    );
    // A replica over the bound: its votes overflow to the other replica.
    let run = ballot(&["explain", "--table", &t, "--loads", "9,0", "a"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let out = stdout(&run);
    assert!(out.contains("chosen: r1 by rule overflow"), "{out}");
}
