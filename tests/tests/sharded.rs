//! A sharded backend end to end: `ballot build-index --shards 2`, four real replicas (two
//! per shard) and `ballot balancer` with `[shards]`, against one replica of the same index
//! built in one shard, over real HTTP on loopback.
//!
//! - The balancer's merged answer equals the one-shard index's answer (the same first `k`
//!   doc ids and the same match count) for 1,000 queries of the log, and names both shards;
//!   replicas listed under the wrong shard are refused (502), not merged.
//! - One replica of shard 1 SIGKILLed in the middle of an open-loop replay fails no query:
//!   shard 1's other replica takes its part.
//! - With shard 1's last replica killed too, `missing = "error"` answers 502 naming shard
//!   1, and a balancer with `missing = "partial"` answers 200 with shard 0's part alone,
//!   flagged `partial` and equal to what shard 0's replica answers.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e::{
    ballot_within, bin, finish_replay, heavy, http_get, replica_queries, request, start_replay,
    start_replica, stderr, wait_until, Balancer,
};
use serde_json::Value;

const QUERIES: usize = 6000;
const DOCS: &str = "50000";
const TOKEN: &str = "sharded-admin";

fn build(out: &Path, shards: &str) {
    let built = ballot_within(
        &[
            "build-index",
            "--synth-queries",
            &QUERIES.to_string(),
            "--docs",
            DOCS,
            "--shards",
            shards,
            "-o",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(built.status.success(), "{}", stderr(&built));
}

/// A balancer over `replicas` (`(name, address, shard)`) with `missing` for a shard gone.
fn balancer(replicas: &[(String, String, usize)], missing: &str) -> Balancer {
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"{TOKEN}\"\n\
         request_timeout_ms = 2000\ndeadline_ms = 10000\nretries = 2\n\n\
         [health]\ninterval_ms = 200\ntimeout_ms = 200\nfall = 2\nrise = 2\n\n\
         [policy]\nname = \"ch-bl\"\n\n[shards]\nroute = \"same-column\"\nmissing = \"{missing}\"\n"
    );
    for (name, address, shard) in replicas {
        config += &format!(
            "\n[[replicas]]\nname = \"{name}\"\naddress = \"{address}\"\nshard = {shard}\n"
        );
    }
    let mut cmd = Command::new(bin("ballot"));
    cmd.arg("balancer");
    Balancer::start_with(cmd, tempfile::tempdir().unwrap(), &config)
}

/// `GET /admin/status` of `b` with the admin token: the page's HTML.
fn status_page(b: &Balancer) -> String {
    let bearer = format!("Bearer {TOKEN}");
    let r = request(
        b.admin_addr(),
        "GET",
        "/admin/status",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

/// `GET /search?q=..&k=10` on `addr`: status and JSON body.
fn search(addr: &str, q: &str) -> (u16, Value) {
    let target = format!("/search?q={}&k=10", encode(q));
    let (status, body) = http_get(addr, &target, Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no answer from {addr} to {target}"));
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
    (status, json)
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn sharded_answers_equal_one_index_and_survive_a_replica_and_a_shard_lost() {
    let _heavy = heavy();
    let tmp = tempfile::tempdir().unwrap();
    let (whole, sharded) = (tmp.path().join("whole"), tmp.path().join("sharded"));
    build(&whole, "1");
    build(&sharded, "2");
    let reference = start_replica(&whole, "whole", tmp.path());
    let mut servers = Vec::new();
    let mut members = Vec::new();
    for shard in 0..2 {
        for column in 0..2 {
            let name = format!("s{shard}r{column}");
            let server = start_replica(&sharded.join(format!("shard-{shard}")), &name, tmp.path());
            members.push((name, server.addr().to_string(), shard));
            servers.push(Some(server));
        }
    }
    let b = balancer(&members, "error");
    let (addr, reference_addr) = (b.addr().to_string(), reference.addr().to_string());

    // 1. The merged answers are the one-shard index's.
    let log = data::synth::generate(&data::synth::SynthConfig {
        queries: QUERIES,
        ..data::synth::SynthConfig::default()
    });
    let mut with_hits = 0;
    for q in log.queries.iter().take(1000) {
        let (s1, one) = search(&reference_addr, q);
        let (s2, merged) = search(&addr, q);
        assert_eq!((s1, s2), (200, 200), "{q:?}: {one} / {merged}");
        assert_eq!(
            merged["doc_ids"], one["doc_ids"],
            "{q:?}: {merged} vs {one}"
        );
        assert_eq!(merged["total_hits"], one["total_hits"], "{q:?}");
        assert_eq!(merged["shards"]["answered"], serde_json::json!([0, 1]));
        assert_eq!(merged["partial"], false);
        with_hits += usize::from(one["total_hits"].as_u64() > Some(0));
    }
    // The comparison means something only if many queries match documents.
    assert!(with_hits >= 300, "only {with_hits} of 1000 queries match");

    // A replica listed under another shard than its index's is refused, not merged.
    let swapped: Vec<(String, String, usize)> = members
        .iter()
        .map(|(n, a, s)| (n.clone(), a.clone(), 1 - s))
        .collect();
    let wrong = balancer(&swapped, "error");
    let (status, refused) = search(&wrong.addr().to_string(), &log.queries[0]);
    assert_eq!(status, 502, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("serves shard 1 of 2"), "{refused}");
    drop(wrong);

    // 2. One replica of shard 1 killed under load: no query fails.
    let mut replay = start_replay(&addr, QUERIES, 600, tmp.path());
    let victim_addr = members[3].1.clone();
    wait_until(Duration::from_secs(60), "s1r1 serving 300 queries", || {
        assert!(replay.try_wait().is_none(), "replay ended early");
        replica_queries(&victim_addr) >= 300
    });
    servers[3].take().unwrap().kill();
    let r = finish_replay(replay, tmp.path());
    assert_eq!(r["sent"], QUERIES, "{r}");
    assert_eq!(r["ok"], QUERIES, "every query answered: {r}");
    assert_eq!(r["error_total"], 0, "no query failed: {r}");
    assert!(
        b.series("ballot_fanout_total", "answer=\"full\"")
            .unwrap_or(0.0)
            >= QUERIES as f64,
        "every replayed query was answered by both shards"
    );

    // The status page lists every shard's replicas, each under its shard, and shows the
    // killed one ejected.
    wait_until(
        Duration::from_secs(20),
        "s1r1 ejected on the status page",
        || status_page(&b).contains("id=\"s1r1-state\" class=\"ejected\""),
    );
    let page = status_page(&b);
    assert!(page.contains("<th>shard</th>"), "a shard column");
    for (name, _, shard) in &members {
        assert!(
            page.contains(&format!("id=\"{name}-shard\">{shard}<")),
            "{name} under shard {shard}"
        );
    }

    // 3. Shard 1 gone: an error, or a partial answer.
    servers[2].take().unwrap().kill();
    let partial = balancer(&members, "partial");
    let q = log
        .queries
        .iter()
        .find(|q| search(&members[0].1, q).1["total_hits"].as_u64() > Some(0))
        .expect("a query with matches in shard 0");
    let shard0 = search(&members[0].1, q).1;
    wait_until(
        Duration::from_secs(20),
        "the error balancer refusing",
        || search(&addr, q).0 == 502,
    );
    let (status, refused) = search(&addr, q);
    assert_eq!(status, 502, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("shard 1"),
        "{refused}"
    );
    assert_eq!(refused["shards"]["answered"], serde_json::json!([0]));
    let paddr = partial.addr().to_string();
    wait_until(
        Duration::from_secs(20),
        "the partial balancer answering",
        || search(&paddr, q).1["partial"] == true,
    );
    let (status, got) = search(&paddr, q);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["partial"], true);
    assert_eq!(got["shards"]["missing"][0]["shard"], 1, "{got}");
    assert_eq!(got["doc_ids"], shard0["doc_ids"]);
    assert_eq!(got["total_hits"], shard0["total_hits"]);
}

/// Rebuilding into the same directory with fewer shards, then unsharded, leaves only what
/// the last build wrote: the earlier build's extra `shard-<s>` directories are removed, and
/// a directory of that name that is not an index shard is left alone.
#[test]
fn rebuilding_with_fewer_shards_removes_the_extra_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("index");
    build(&out, "3");
    let shard = |s: u32| out.join(format!("shard-{s}"));
    assert!((0..3).all(|s| shard(s).join("manifest.json").exists()));
    std::fs::create_dir_all(shard(5)).unwrap();
    std::fs::write(shard(5).join("notes.txt"), "mine").unwrap();
    build(&out, "2");
    assert!(shard(0).exists() && shard(1).exists());
    assert!(!shard(2).exists(), "shard-2 of the 3-shard build is gone");
    assert!(
        shard(5).join("notes.txt").exists(),
        "a foreign directory is kept"
    );
    build(&out, "1");
    assert!(out.join("manifest.json").exists());
    assert!(!shard(0).exists() && !shard(1).exists());
}
