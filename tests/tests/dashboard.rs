//! The Grafana dashboard (`ops/grafana/ballot.json`) against live servers: every metric its
//! queries name is one that a running balancer (table policy, shadow caches) or a running
//! replica exports on `/metrics`, so a renamed metric fails here and not on an operator's
//! empty panel.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e::{ballot_within, bin, heavy, http_get, stderr, Balancer, Server};
use serde_json::Value;

/// Every `expr` of the dashboard's panels.
fn dashboard_queries(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    exprs
}

/// The metric names in a PromQL expression: identifiers with ballot's prefixes (`ballot_` for
/// the balancer, `replica_` for the replica). Label names (`replica`, `reason`), functions
/// and keywords carry neither prefix.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    let mut in_string = false;
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c == '"' {
            in_string = !in_string;
        }
        if !in_string && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            word.push(c);
            continue;
        }
        if word.starts_with("ballot_") || word.starts_with("replica_") {
            names.insert(std::mem::take(&mut word));
        }
        word.clear();
    }
    names
}

/// The metric names with a sample in a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect()
}

#[test]
fn the_parser_finds_metric_names_and_skips_labels_and_functions() {
    let names = metric_names(
        "sum by (replica) (rate(ballot_requests_total{reason=\"ballot_x\"}[1m])) \
         / ignoring(replica) group_left histogram_quantile(0.99, replica_query_seconds_bucket)",
    );
    let expected: BTreeSet<String> = ["ballot_requests_total", "replica_query_seconds_bucket"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let _heavy = heavy();
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let run = |args: &[&str]| {
        let out = ballot_within(args, Duration::from_secs(180));
        assert!(out.status.success(), "ballot {args:?}: {}", stderr(&out));
    };
    let index_s = index.to_str().unwrap();
    run(&[
        "build-index",
        "--synth-queries",
        "4000",
        "--docs",
        "20000",
        "-o",
        index_s,
    ]);
    let table = tmp.path().join("table.parquet");
    let sizes = index.join("sizes.parquet");
    run(&[
        "train",
        "--synth-queries",
        "4000",
        "--sizes",
        sizes.to_str().unwrap(),
        "--replicas",
        "2",
        "-o",
        table.to_str().unwrap(),
    ]);

    let replicas: Vec<Server> = (0..2)
        .map(|i| {
            let id = format!("r{i}");
            Server::start(
                Command::new(bin("ballot")).args([
                    "replica",
                    "--index",
                    index_s,
                    "--listen",
                    "127.0.0.1:0",
                    "--cache-bytes",
                    "1000000",
                    "--id",
                    &id,
                ]),
                tmp.path().join(format!("{id}.stderr")),
                &format!("replica {id}"),
            )
        })
        .collect();
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nwork_source = \"shadow\"\n\n\
         [policy]\nname = \"table\"\ntable = \"{}\"\nsizes = \"{}\"\n\n\
         [shadow]\ncache_bytes = 1000000\n",
        table.display(),
        sizes.display()
    );
    for (i, r) in replicas.iter().enumerate() {
        config += &format!(
            "\n[[replicas]]\nname = \"r{i}\"\naddress = \"{}\"\n",
            r.addr()
        );
    }
    let mut cmd = Command::new(bin("ballot"));
    cmd.arg("balancer");
    let balancer = Balancer::start_with(cmd, tempfile::tempdir().unwrap(), &config);

    // Some routed queries, and one without a query (a client error).
    for q in [
        "apple",
        "apple+pie",
        "river",
        "blue+river+bank",
        "cheap+flights",
    ] {
        for _ in 0..4 {
            assert_eq!(balancer.search(q).status, 200);
        }
    }
    assert_eq!(balancer.get("/search").status, 400);

    let mut have = exported(&balancer.metrics());
    for r in &replicas {
        let (status, text) = http_get(&r.addr().to_string(), "/metrics", Duration::from_secs(5))
            .expect("the replica answers /metrics");
        assert_eq!(status, 200);
        have.extend(exported(&text));
    }

    let dashboard = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ops/grafana/ballot.json");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let mut missing = Vec::new();
    let mut queried = BTreeSet::new();
    for expr in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no ballot metric in {expr:?}");
        for name in names {
            if !have.contains(&name) {
                missing.push(format!("{name} (in {expr})"));
            }
            queried.insert(name);
        }
    }
    assert!(missing.is_empty(), "not exported: {missing:#?}");
    // The dashboard covers both servers.
    assert!(queried.iter().any(|n| n.starts_with("ballot_")));
    assert!(queried.iter().any(|n| n.starts_with("replica_")));
}
