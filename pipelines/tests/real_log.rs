//! The headline claims on the real AOL log (need `BALLOT_DATA`), each with a margin that
//! means something and a set of rivals that can never be empty:
//!
//! - the standard evaluation orders the policies where the independent prototype put them;
//! - at R = 8 with 5% caches the learned table misses at most 0.33 of the bytes, its busiest
//!   replica reads at most 1.2 / R of the flash bytes, it is at least 10% below term-vote and
//!   every other policy whose query imbalance is at most 1.05, it keeps that lead on test
//!   queries never seen in training, and its flash-bound throughput is at least 1.5x
//!   round-robin's;
//! - refinement improves on the METIS-only table by at least 10% on validation;
//! - the grid's closest rows (R = 4 with 5% caches, R = 8 with 2%) keep the 10% lead;
//! - trained on March and April of the time-ordered log, the table is at least 10% below every
//!   balanced policy on May, and 5% below term-vote on May's queries unseen in training;
//! - SIEVE caches, the replica's default, read at least 15% fewer flash bytes than LRU
//!   under every untrained policy;
//! - the table trained for 5% LRU caches stays below every other policy at 2% and 10%
//!   caches, LRU and SIEVE, and `eval --breakdown` accounts for every byte it misses;
//!   caching a list only at its homes (`eval --cache-admission 0.5`) takes it under 0.285;
//! - a refinement that replays a quarter of the fit part (`--refine-sample 100000`) gives a
//!   table within 0.01 miss bytes ratio of the full refinement's on the test part.

mod common;

use std::path::{Path, PathBuf};

use common::{ballot, num, read_json, real_data, stderr, stdout};
use serde_json::Value;

/// The standard evaluation's log and frequency table, or None (skip) when `BALLOT_DATA` is
/// unset; a missing file with `BALLOT_DATA` set fails the test.
fn standard_data() -> Option<(PathBuf, PathBuf)> {
    let pair = real_data("aol-2006-1m-queries.txt.gz").zip(real_data("wordfreq-large-en.tsv.gz"));
    if pair.is_none() {
        eprintln!("BALLOT_DATA is unset: skipping the real-log evaluation");
    }
    pair
}

/// Balanced, as the grid and the README define it: query imbalance at most 1 + eps.
const BALANCED: f64 = 1.05 + 1e-9;

/// One policy's row of a results array.
fn row<'a>(results: &'a [Value], policy: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy} row"))
}

/// The claims of one test: every one is checked and every failure reported together, so
/// a deliberate break shows each claim it breaks, not only the first.
#[derive(Default)]
struct Claims {
    failed: Vec<String>,
}

impl Claims {
    /// Records `claim` as failed unless `holds`.
    fn check(&mut self, holds: bool, claim: impl FnOnce() -> String) {
        if !holds {
            self.failed.push(claim());
        }
    }

    /// Fails the test listing every failed claim.
    fn finish(self) {
        assert!(
            self.failed.is_empty(),
            "{} claim(s) failed:\n- {}",
            self.failed.len(),
            self.failed.join("\n- ")
        );
    }
}

/// Flash bytes the busiest replica reads per query: when flash bandwidth is the
/// bottleneck, throughput is inversely proportional to it.
fn busiest_flash_bytes(r: &Value) -> f64 {
    num(r, "flash_bytes_per_query") * num(r, "flash_share_max")
}

/// Every policy other than the table whose query imbalance is within the bound, but
/// `cache-aware`, which reads fewer bytes than the table in simulation and is checked on
/// its own ([`check_cache_aware`]); the set must hold term-vote, the design's baseline, so
/// it is never empty.
fn balanced_rivals(results: &[Value]) -> Vec<&Value> {
    let rivals: Vec<&Value> = results
        .iter()
        .filter(|r| !["table", "cache-aware"].contains(&r["policy"].as_str().unwrap_or("")))
        .filter(|r| num(r, "imbalance") <= BALANCED)
        .collect();
    assert!(
        rivals.iter().any(|r| r["policy"] == "term-vote"),
        "term-vote left the balanced set: {:?}",
        row(results, "term-vote")["imbalance"]
    );
    rivals
}

/// The peer that wins in simulation: `cache-aware` (routing by the shadow caches, no load
/// bound) reads no more bytes than the table, at a busiest flash share above the table's
/// (docs/results.md, "The peers side by side"). A table that overtakes it, or a
/// `cache-aware` that loses its lead, changes what the docs say: the claim fails then.
fn check_cache_aware(claims: &mut Claims, results: &[Value], what: &str) {
    let (t, c) = (row(results, "table"), row(results, "cache-aware"));
    let (tm, cm) = (num(t, "miss_bytes_ratio"), num(c, "miss_bytes_ratio"));
    let (tf, cf) = (num(t, "flash_share_max"), num(c, "flash_share_max"));
    claims.check(cm <= tm && cf > tf, || {
        format!(
            "{what}: cache-aware reads {cm:.4} at a busiest share {cf:.3}, the table {tm:.4} at \
             {tf:.3}: the docs say cache-aware reads fewer bytes at a busier replica"
        )
    });
}

/// Claims the table is at least `lead` (a fraction) below every balanced rival.
fn check_lead(claims: &mut Claims, results: &[Value], lead: f64, what: &str) {
    let t = num(row(results, "table"), "miss_bytes_ratio");
    for r in balanced_rivals(results) {
        let o = num(r, "miss_bytes_ratio");
        claims.check(t <= (1.0 - lead) * o, || {
            format!(
                "{what}: table {t:.4} is not {:.0}% below {} {o:.4}",
                lead * 100.0,
                r["policy"]
            )
        });
    }
}

/// Runs `ballot grid` and returns its JSON (one object per configuration).
fn grid(log: &Path, freq: Option<&Path>, extra: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("grid.json");
    let mut args = vec!["grid", "--log", log.to_str().unwrap()];
    if let Some(f) = freq {
        args.extend(["--freq", f.to_str().unwrap()]);
    }
    args.extend(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = ballot(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    eprintln!("{}", stdout(&out));
    let doc = read_json(&json);
    doc.as_array()
        .expect("one object per configuration")
        .clone()
}

fn config(doc: &[Value], replicas: u64, frac: f64) -> &[Value] {
    doc.iter()
        .find(|c| c["replicas"] == replicas && c["cache_frac"].as_f64() == Some(frac))
        .unwrap_or_else(|| panic!("no {replicas}:{frac} configuration"))["results"]
        .as_array()
        .unwrap()
}

/// Runs `ballot eval` on the standard setup (R = 8, 5% caches) with `extra` flags and
/// returns its JSON report.
fn eval_standard(log: &Path, freq: &Path, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("eval.json");
    let mut args = vec![
        "eval",
        "--log",
        log.to_str().unwrap(),
        "--freq",
        freq.to_str().unwrap(),
        "--replicas",
        "8",
        "--cache-frac",
        "0.05",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = ballot(&args);
    assert!(out.status.success(), "eval {extra:?}: {}", stderr(&out));
    read_json(&json)
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn standard_evaluation_orders_the_policies() {
    let Some((log, freq)) = standard_data() else {
        return;
    };
    let doc = eval_standard(&log, &freq, &["--policies", "round-robin,term-vote"]);
    assert_eq!(doc["config"]["queries"], 554_541, "collapsed AOL log size");
    let results = doc["results"].as_array().unwrap();
    let rr = num(row(results, "round-robin"), "miss_bytes_ratio");
    let tv = num(row(results, "term-vote"), "miss_bytes_ratio");
    let obc = num(&doc["bounds"][0], "miss_bytes_ratio");
    // Reference points of the prototype (DESIGN.md): 0.616 and 0.074, ±0.01. Term-vote is
    // hash-sensitive: 0.38-0.44 over hash seeds (DESIGN.md), so its band is that spread and
    // 0.01 either side; a hash that spreads terms worse than any seed did falls outside.
    assert!((rr - 0.616).abs() < 0.01, "round-robin {rr}");
    assert!((obc - 0.074).abs() < 0.01, "one-big-cache {obc}");
    assert!(
        (0.37..=0.45).contains(&tv),
        "term-vote {tv} is outside 0.37-0.45, the spread of hash seeds"
    );
    assert!(num(row(results, "term-vote"), "imbalance") <= BALANCED);
}

/// Why the replica caches with SIEVE by default (`EvictionKind::SERVING_DEFAULT`): on the
/// standard evaluation's log it reads at least 15% fewer flash bytes than LRU under every
/// untrained routing policy that spreads each list over every replica (measured: 20-25%
/// fewer, docs/results.md "SIEVE caches"), and at least 10% fewer under `cache-aware`,
/// which keeps a list where it is cached already (measured: 13.7%).
#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn sieve_caches_read_fewer_flash_bytes_than_lru_under_every_policy() {
    let Some((log, freq)) = standard_data() else {
        return;
    };
    // Without --table, every policy but the table.
    let lru = eval_standard(&log, &freq, &["--eviction", "lru"]);
    let sieve = eval_standard(&log, &freq, &["--eviction", "sieve"]);
    let (lru, sieve) = (
        lru["results"].as_array().unwrap(),
        sieve["results"].as_array().unwrap(),
    );
    assert!(lru.len() >= 8, "every untrained policy: {lru:?}");
    let mut claims = Claims::default();
    for r in lru {
        let policy = r["policy"].as_str().unwrap();
        let l = num(r, "miss_bytes_ratio");
        let s = num(row(sieve, policy), "miss_bytes_ratio");
        let lead = if policy == "cache-aware" { 0.10 } else { 0.15 };
        claims.check(s <= (1.0 - lead) * l, || {
            format!(
                "{policy}: sieve {s:.4} is not {:.0}% below lru {l:.4}",
                lead * 100.0
            )
        });
    }
    claims.finish();
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn learned_tables_lead_every_balanced_policy_on_the_grid() {
    let Some((log, freq)) = standard_data() else {
        return;
    };
    let doc = grid(&log, Some(&freq), &["--configs", "8:0.05,4:0.05,8:0.02"]);

    // The standard setup: every claim of the results table.
    let mut claims = Claims::default();
    let results = config(&doc, 8, 0.05);
    let table = row(results, "table");
    let t = num(table, "miss_bytes_ratio");
    claims.check(t <= 0.33, || {
        format!("table {t} misses more than 0.33 of the bytes")
    });
    let busiest = num(table, "flash_share_max");
    claims.check(busiest <= 1.2 / 8.0, || {
        format!("the table's busiest replica reads {busiest:.3} of the flash bytes (> 1.2 / R)")
    });
    check_lead(&mut claims, results, 0.10, "R = 8, 5% caches");
    check_cache_aware(&mut claims, results, "R = 8, 5% caches");
    let tv = row(results, "term-vote");
    let (t_novel, tv_novel) = (
        num(table, "novel_miss_bytes_ratio"),
        num(tv, "novel_miss_bytes_ratio"),
    );
    claims.check(
        num(table, "novel_queries") > 10_000.0 && t_novel <= 0.9 * tv_novel,
        || format!("on queries unseen in training: table {t_novel} vs term-vote {tv_novel}"),
    );
    let gain = busiest_flash_bytes(row(results, "round-robin")) / busiest_flash_bytes(table);
    claims.check(gain >= 1.5, || {
        format!("flash-bound throughput {gain:.2}x round-robin (< 1.5x)")
    });

    // Refinement earns its keep: the kept table is at least 10% better on validation than
    // the METIS-only table it started from.
    let report = &doc[0]["train_report"];
    let initial = num(&report["iterations"][0], "validation_miss_bytes_ratio");
    let kept = num(report, "validation_miss_bytes_ratio");
    claims.check(kept <= 0.9 * initial, || {
        format!("refinement: {kept} is not 10% below the initial {initial}")
    });

    // The grid's closest rows.
    check_lead(&mut claims, config(&doc, 4, 0.05), 0.10, "R = 4, 5% caches");
    check_lead(&mut claims, config(&doc, 8, 0.02), 0.10, "R = 8, 2% caches");
    for (r, frac) in [(4, 0.05), (8, 0.02)] {
        let busiest = num(row(config(&doc, r, frac), "table"), "flash_share_max");
        claims.check(busiest <= 1.2 / r as f64, || {
            format!("R = {r}, {frac}: busiest flash share {busiest}")
        });
    }
    claims.finish();
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn a_table_trained_on_the_past_leads_on_the_future() {
    let Some(log) = real_data("aol-2006-top1000users-timeordered.tsv.gz") else {
        eprintln!("BALLOT_DATA is unset: skipping the time split");
        return;
    };
    let freq = real_data("wordfreq-large-en.tsv.gz").unwrap();
    let doc = grid(
        &log,
        Some(&freq),
        &["--configs", "8:0.05", "--split-time", "2006-05-01T00:00:00"],
    );
    let mut claims = Claims::default();
    let results = config(&doc, 8, 0.05);
    // The lead over the best balanced policy measured 10.9%, 10.6% and 11.5% with training
    // seeds 1, 2 and 3 (docs/results.md, "Time split"): 10% is below every seed's, so
    // training's seed-to-seed spread does not flip it, while a broken table does.
    check_lead(&mut claims, results, 0.10, "time split");
    let table = row(results, "table");
    let busiest = num(table, "flash_share_max");
    claims.check(busiest <= 1.2 / 8.0, || {
        format!("time split: busiest flash share {busiest} (> 1.2 / R)")
    });
    // On May's queries never seen in March or April the lead measured 10.2%, 9.9% and
    // 10.8% (seeds 1-3); 5% is the claim, so a small drift in training does not flip it
    // while a broken table does.
    let novel = |p: &str| num(row(results, p), "novel_miss_bytes_ratio");
    claims.check(novel("table") <= 0.95 * novel("term-vote"), || {
        format!(
            "unseen May queries: table {} vs term-vote {}",
            novel("table"),
            novel("term-vote")
        )
    });
    claims.finish();
}

/// Trains at R = 8, 5%, LRU (the standard evaluation) with `extra` flags and returns the
/// table's test-part miss bytes ratio.
fn train_and_score(log: &Path, freq: &Path, dir: &Path, name: &str, extra: &[&str]) -> f64 {
    let table = dir.join(format!("{name}.parquet"));
    let mut args = vec![
        "train",
        "--log",
        log.to_str().unwrap(),
        "--freq",
        freq.to_str().unwrap(),
        "--replicas",
        "8",
        "--cache-frac",
        "0.05",
        "--eviction",
        "lru",
        "-o",
        table.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = ballot(&args);
    assert!(out.status.success(), "train {name}: {}", stderr(&out));
    let doc = eval_standard(
        log,
        freq,
        &["--policies", "table", "--table", table.to_str().unwrap()],
    );
    num(
        row(doc["results"].as_array().unwrap(), "table"),
        "miss_bytes_ratio",
    )
}

#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn a_sampled_refinement_matches_the_full_one() {
    let Some((log, freq)) = standard_data() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let full = train_and_score(&log, &freq, dir.path(), "full", &["--refine-sample", "0"]);
    let sampled = train_and_score(
        &log,
        &freq,
        dir.path(),
        "sampled",
        &["--refine-sample", "100000"],
    );
    assert!(
        (full - sampled).abs() <= 0.01,
        "sampled refinement {sampled:.4} against the full one {full:.4}"
    );
}

/// One table trained for the standard evaluation's 5% LRU caches stays ahead of every other
/// policy but `cache-aware` when the replicas get 2% or 10% caches, LRU or SIEVE: an
/// operator who changes the replicas' memory need not retrain to stay ahead (measured:
/// docs/results.md "Toward one big cache"). `cache-aware` reads fewer bytes than the table
/// at a busier replica (as `check_cache_aware` at 5%), except where the table caches a list
/// only at its homes at 2%: there the table leads every policy. With or without caching a list only at its homes (`--cache-admission
/// 0.5`, which holds up to the 5% the table was trained for). `--breakdown` accounts for
/// every byte the table misses. The admission rule takes the standard evaluation at least
/// 8% lower, under 0.285 (measured: 0.2788 against 0.3167).
#[test]
#[cfg_attr(
    not(ballot_data),
    ignore = "needs the real logs: set BALLOT_DATA to their folder (docs/testing.md)"
)]
fn one_table_leads_at_every_cache_size() {
    let Some((log, freq)) = standard_data() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table.parquet");
    let (log, freq, table) = (
        log.to_str().unwrap(),
        freq.to_str().unwrap(),
        table.to_str().unwrap(),
    );
    let out = ballot(&[
        "train",
        "--log",
        log,
        "--freq",
        freq,
        "--replicas",
        "8",
        "--cache-frac",
        "0.05",
        "--eviction",
        "lru",
        "-o",
        table,
    ]);
    assert!(out.status.success(), "train: {}", stderr(&out));
    let mut claims = Claims::default();
    // The table's miss bytes ratio by (eviction, rule on, cache fraction).
    let mut table_at = std::collections::BTreeMap::new();
    // With and without the cache admission rule, which holds at 2% (smaller than the
    // table's 5%) and steps aside at 10%.
    for (eviction, admission) in [
        ("lru", false),
        ("lru", true),
        ("sieve", false),
        ("sieve", true),
    ] {
        let json = dir.path().join(format!("eval-{eviction}-{admission}.json"));
        let mut args = vec![
            "eval",
            "--log",
            log,
            "--freq",
            freq,
            "--replicas",
            "8",
            "--cache-frac",
            "0.02,0.1",
            "--eviction",
            eviction,
            "--table",
            table,
            "--breakdown",
            "3",
            "--json",
            json.to_str().unwrap(),
        ];
        if admission {
            args.extend(["--cache-admission", "0.5"]);
        }
        let out = ballot(&args);
        assert!(out.status.success(), "eval {eviction}: {}", stderr(&out));
        let eviction = if admission {
            format!("{eviction} with admission")
        } else {
            eviction.to_owned()
        };
        let doc = read_json(&json);
        let results = doc["results"].as_array().unwrap();
        for frac in [0.02, 0.1] {
            let at: Vec<&Value> = results
                .iter()
                .filter(|r| r["cache_frac"].as_f64() == Some(frac))
                .collect();
            let table_row = at.iter().find(|r| r["policy"] == "table").unwrap();
            let t = num(table_row, "miss_bytes_ratio");
            table_at.insert((eviction.clone(), admission, frac.to_string()), t);
            assert!(at.len() >= 9, "every policy ran at {frac}");
            // Caching only at its homes, at caches smaller than it was trained for, takes
            // the table below cache-aware too.
            let peer_leads = !(admission && frac < 0.05);
            let peer = at.iter().find(|r| r["policy"] == "cache-aware").unwrap();
            let (pm, pf) = (num(peer, "miss_bytes_ratio"), num(peer, "flash_share_max"));
            let tf = num(table_row, "flash_share_max");
            claims.check(!peer_leads || (pm < t && pf > tf), || {
                format!(
                    "{eviction} {frac}: cache-aware reads {pm:.4} at a busiest share {pf:.3}, \
                     the table {t:.4} at {tf:.3}: the docs say cache-aware reads fewer bytes \
                     at a busier replica"
                )
            });
            let others = at.iter().filter(|r| {
                r["policy"] != "table" && (!peer_leads || r["policy"] != "cache-aware")
            });
            for r in others {
                let o = num(r, "miss_bytes_ratio");
                claims.check(t < o, || {
                    format!(
                        "{eviction} {frac}: table {t:.4} is not below {} {o:.4}",
                        r["policy"]
                    )
                });
            }
            let b = doc["breakdown"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["cache_frac"].as_f64() == Some(frac))
                .unwrap();
            let sum = |key: &str, field: &str| -> f64 {
                b[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| num(&p[1], field))
                    .sum()
            };
            let requested = num(&b["total"], "requested");
            for key in ["by_role", "by_reason"] {
                assert_eq!(
                    sum(key, "requested"),
                    requested,
                    "{key} covers every lookup"
                );
                let missed = sum(key, "missed") / requested;
                assert!(
                    (missed - t).abs() < 1e-9,
                    "{eviction} {frac}: {key} misses {missed} against the table's {t}"
                );
            }
            assert_eq!(b["terms"].as_array().unwrap().len(), 3);
        }
    }
    for eviction in ["lru", "sieve"] {
        let with =
            |frac: &str| table_at[&(format!("{eviction} with admission"), true, frac.to_owned())];
        let without = |frac: &str| table_at[&(eviction.to_owned(), false, frac.to_owned())];
        // Within the trained size the rule reads fewer bytes; above it the rule steps aside.
        claims.check(with("0.02") < without("0.02"), || {
            format!(
                "{eviction} 2%: the rule's {:.4} is not below {:.4}",
                with("0.02"),
                without("0.02")
            )
        });
        assert_eq!(
            with("0.1"),
            without("0.1"),
            "{eviction} 10%: the rule steps aside"
        );
    }
    let standard = |extra: &[&str]| {
        let json = dir.path().join("eval-standard.json");
        let mut args = vec![
            "eval",
            "--log",
            log,
            "--freq",
            freq,
            "--replicas",
            "8",
            "--cache-frac",
            "0.05",
            "--eviction",
            "lru",
            "--policies",
            "table",
            "--table",
            table,
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend(extra);
        let out = ballot(&args);
        assert!(out.status.success(), "eval {extra:?}: {}", stderr(&out));
        num(
            row(read_json(&json)["results"].as_array().unwrap(), "table"),
            "miss_bytes_ratio",
        )
    };
    let (plain, homes_only) = (standard(&[]), standard(&["--cache-admission", "0.5"]));
    claims.check(homes_only < 0.285 && homes_only <= 0.92 * plain, || {
        format!("cache admission 0.5: {homes_only:.4} against {plain:.4} without")
    });
    claims.finish();
}
