//! Calibration of the synthetic default dataset against the real AOL 2006 log.
//!
//! The synthetic default (200,000 queries, seed 1) must be within [`TOLERANCE`] (relative)
//! of the real log's headline statistics on each of five numbers. The real log's numbers are
//! pinned in [`REAL`]; when `BALLOT_DATA` is set, they are recomputed from
//! `$BALLOT_DATA/aol-2006-1m-queries.txt.gz` (consecutive identical lines collapsed), checked
//! against the pinned ones, and the synthetic log is compared with the recomputed ones. A
//! missing file then fails the test. Postings bytes (the size model over
//! `wordfreq-large-en.tsv.gz` for the real log, over the generated frequency table for the
//! synthetic one) are compared with a looser tolerance.
//!
//! The generator is `data::synth`; the test lives here, next to what it measures with (the
//! log statistics of `querylog::stats` and the frequency-file reader of `querylog::freq`).
//!
//! `cargo test --release -p querylog --test synth_calibration -- --nocapture` prints the table
//! that `data/CALIBRATION.md` shows. The ignored `sweep` test prints the statistics of any
//! config, for re-calibration: `BALLOT_SYNTH_SET="topics=300,query_zipf=0.8" cargo test
//! --release -p querylog --test synth_calibration -- --ignored --nocapture sweep`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use data::sizes::{FreqTable, SizeModel};
use data::synth::{generate, SynthConfig, SynthLog};
use querylog::stats::{log_stats, postings_stats, LogStats, PostingsStats};

/// Relative tolerance on each headline statistic.
const TOLERANCE: f64 = 0.10;
/// Relative tolerance on the postings-bytes statistics.
const BYTES_TOLERANCE: f64 = 0.25;

/// The five headline statistics compared.
const HEADLINE: [&str; 5] = [
    "terms per query",
    "top 1% of terms: share of occurrences",
    "queries with a top-1% term",
    "top 1% of queries: share of volume",
    "distinct / total queries",
];

fn headline(s: &LogStats) -> [f64; 5] {
    [
        s.terms_per_query,
        s.top1pct_terms_occurrence_share,
        s.queries_with_top1pct_term,
        s.top1pct_queries_volume_share,
        s.distinct_ratio,
    ]
}

/// The real log's statistics, measured with [`log_stats`] on the collapsed
/// `aol-2006-1m-queries.txt.gz`.
const REAL: Real = Real {
    queries: 554_541,
    headline: [2.853, 0.5612, 0.7744, 0.2049, 0.6600],
    total_bytes: 1_876_971_041.0,
    top1pct_bytes_share: 0.7034,
};

struct Real {
    queries: u64,
    headline: [f64; 5],
    total_bytes: f64,
    top1pct_bytes_share: f64,
}

fn relative_error(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

/// Reads a one-query-per-line gzip log with a header line, collapsing consecutive identical
/// lines.
fn read_collapsed(path: &Path) -> Vec<String> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| {
        panic!(
            "BALLOT_DATA is set but {} cannot be read: {e}",
            path.display()
        )
    });
    let reader = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(file));
    let mut out: Vec<String> = Vec::new();
    let mut first = true;
    for line in reader.split(b'\n') {
        let line = line.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        let line = String::from_utf8_lossy(line);
        if std::mem::take(&mut first) {
            assert_eq!(line, "Query", "unexpected header in {}", path.display());
            continue;
        }
        if out.last().map(String::as_str) != Some(&*line) {
            out.push(line.into_owned());
        }
    }
    out
}

fn data_dir() -> Option<PathBuf> {
    std::env::var_os("BALLOT_DATA").map(PathBuf::from)
}

fn synth_postings(log: &SynthLog) -> PostingsStats {
    let table = FreqTable::from_pairs(log.freq.iter().cloned());
    let model = SizeModel::default();
    postings_stats(log.queries.iter().map(String::as_str), |t| {
        model.bytes(table.get(t))
    })
}

fn timed_generate(cfg: &SynthConfig) -> (SynthLog, f64) {
    let start = Instant::now();
    let log = generate(cfg);
    (log, start.elapsed().as_secs_f64())
}

fn print_table(rows: &[(&str, String, String)]) {
    println!("| statistic | real AOL 2006 (collapsed) | synthetic default |");
    println!("|---|---:|---:|");
    for (name, real, synth) in rows {
        println!("| {name} | {real} | {synth} |");
    }
}

#[test]
fn synthetic_default_matches_the_real_log() {
    let (log, seconds) = timed_generate(&SynthConfig::default());
    let synth = log_stats(log.queries.iter().map(String::as_str));
    let synth_bytes = synth_postings(&log);
    println!("generated {} queries in {seconds:.3} s", log.queries.len());

    let (real_stats, real_bytes) = match data_dir() {
        Some(dir) => {
            let queries = read_collapsed(&dir.join("aol-2006-1m-queries.txt.gz"));
            let real = log_stats(queries.iter().map(String::as_str));
            let freq_path = dir.join("wordfreq-large-en.tsv.gz");
            let table = querylog::freq::read_freq_tsv(&freq_path).unwrap_or_else(|e| {
                panic!("BALLOT_DATA is set but the frequency table cannot be read: {e}")
            });
            let model = SizeModel::default();
            let bytes = postings_stats(queries.iter().map(String::as_str), |t| {
                model.bytes(table.get(t))
            });
            // The pinned numbers are what the real log gives.
            assert_eq!(real.queries, REAL.queries);
            for (i, (got, pinned)) in headline(&real).iter().zip(REAL.headline).enumerate() {
                assert!(
                    relative_error(*got, pinned) < 0.002,
                    "real {}: measured {got}, pinned {pinned}",
                    HEADLINE[i]
                );
            }
            assert!(relative_error(bytes.total_bytes as f64, REAL.total_bytes) < 0.002);
            assert!(relative_error(bytes.top1pct_bytes_share, REAL.top1pct_bytes_share) < 0.002);
            (Some(real), Some(bytes))
        }
        None => {
            println!("BALLOT_DATA unset: comparing with the pinned real-log numbers");
            (None, None)
        }
    };

    let real_headline = real_stats.as_ref().map_or(REAL.headline, headline);
    let mut rows = Vec::new();
    if let Some(real) = &real_stats {
        for ((name, r), (_, s)) in real.table_rows().into_iter().zip(synth.table_rows()) {
            rows.push((name, r, s));
        }
    } else {
        for (name, s) in synth.table_rows() {
            rows.push((name, "-".to_string(), s));
        }
    }
    let (real_total, real_share) = real_bytes
        .as_ref()
        .map_or((REAL.total_bytes, REAL.top1pct_bytes_share), |b| {
            (b.total_bytes as f64, b.top1pct_bytes_share)
        });
    match &real_bytes {
        Some(real) => {
            for ((name, r), (_, s)) in real.table_rows().into_iter().zip(synth_bytes.table_rows()) {
                rows.push((name, r, s));
            }
        }
        None => {
            for (name, s) in synth_bytes.table_rows() {
                rows.push((name, "-".to_string(), s));
            }
        }
    }
    print_table(&rows);

    let mut failures = Vec::new();
    for (i, (s, r)) in headline(&synth).iter().zip(real_headline).enumerate() {
        let err = relative_error(*s, r);
        println!(
            "{}: real {r:.4}, synthetic {s:.4}, error {:.1}%",
            HEADLINE[i],
            err * 100.0
        );
        if err > TOLERANCE {
            failures.push(HEADLINE[i]);
        }
    }
    for (name, s, r) in [
        ("postings bytes", synth_bytes.total_bytes as f64, real_total),
        (
            "top 1% bytes share",
            synth_bytes.top1pct_bytes_share,
            real_share,
        ),
    ] {
        let err = relative_error(s, r);
        println!(
            "{name}: real {r:.4}, synthetic {s:.4}, error {:.1}%",
            err * 100.0
        );
        if err > BYTES_TOLERANCE {
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "out of tolerance: {failures:?}");
}

#[test]
fn same_seed_same_default_log() {
    let cfg = SynthConfig {
        queries: 50_000,
        ..SynthConfig::default()
    };
    let a = generate(&cfg);
    assert_eq!(a, generate(&cfg));
    let b = generate(&SynthConfig { seed: 2, ..cfg });
    assert_ne!(a.queries, b.queries);
    assert_ne!(a.freq, b.freq);
}

#[test]
fn freq_table_covers_the_log() {
    let log = generate(&SynthConfig::default());
    let table = FreqTable::from_pairs(log.freq.iter().cloned());
    assert_eq!(table.len(), log.freq.len());
    let mut tokens = data::tokenizer::Tokens::new();
    for q in &log.queries {
        tokens.tokenize(q);
        for t in tokens.iter() {
            let f = table
                .get(t)
                .unwrap_or_else(|| panic!("{t} has no frequency"));
            assert!(f.is_finite() && f > 0.0 && f < 1.0, "{t}: {f}");
        }
    }
    // The table round-trips through the TSV writer and the size model's reader.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("freq.tsv");
    data::synth::write_freq_tsv(&path, &log.freq).unwrap();
    let read = querylog::freq::read_freq_tsv(&path).unwrap();
    assert_eq!(read.len(), log.freq.len());
    for (w, f) in &log.freq {
        assert_eq!(read.get(w), Some(*f));
    }
}

/// Prints the statistics of the default config with the knobs in `BALLOT_SYNTH_SET`
/// (`knob=value,...`) changed.
#[test]
#[ignore = "calibration tool"]
fn sweep() {
    let mut cfg = SynthConfig::default();
    if let Ok(set) = std::env::var("BALLOT_SYNTH_SET") {
        for kv in set.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv.split_once('=').expect("knob=value");
            cfg.set(k.trim(), v).unwrap();
        }
    }
    cfg.validate().unwrap();
    let (log, seconds) = timed_generate(&cfg);
    let s = log_stats(log.queries.iter().map(String::as_str));
    let b = synth_postings(&log);
    let h = headline(&s);
    let errs: Vec<String> = h
        .iter()
        .zip(REAL.headline)
        .map(|(s, r)| format!("{:+.1}%", (s / r - 1.0) * 100.0))
        .collect();
    println!(
        "time {seconds:.3}s terms {} | tpq {:.3} top1occ {:.4} qwtop {:.4} top1q {:.4} distinct {:.4} | bytes {:.3e} ({:+.1}%) top1bytes {:.4} ({:+.1}%) req/q {:.3e} | errs {}",
        s.distinct_terms,
        h[0],
        h[1],
        h[2],
        h[3],
        h[4],
        b.total_bytes as f64,
        (b.total_bytes as f64 / REAL.total_bytes - 1.0) * 100.0,
        b.top1pct_bytes_share,
        (b.top1pct_bytes_share / REAL.top1pct_bytes_share - 1.0) * 100.0,
        b.requested_bytes_per_query,
        errs.join(" ")
    );
    joint_top_by_length(&log.queries);
    bytes_profile(&log);
    bytes_by_rank(&log);
}

/// Prints the median postings bytes and the bytes sum of the terms in popularity-rank
/// buckets (the real log: ranks 0-10 median 9,962,517; 10-30 1,150,480; 30-100 464,389;
/// 100-300 354,192; 300-1000 167,292; 1000-3000 58,346; 3000-10000 13,103; 10000-30000
/// 1,183; beyond 21).
fn bytes_by_rank(log: &SynthLog) {
    use std::collections::HashMap;
    let table = FreqTable::from_pairs(log.freq.iter().cloned());
    let model = SizeModel::default();
    let mut tokens = data::tokenizer::Tokens::new();
    let mut counts: HashMap<String, u64> = HashMap::new();
    for q in &log.queries {
        tokens.tokenize(q);
        for t in tokens.iter() {
            *counts.entry(t.to_owned()).or_default() += 1;
        }
    }
    let mut by_count: Vec<(&String, &u64)> = counts.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let edges = [
        0,
        10,
        30,
        100,
        300,
        1000,
        3000,
        10000,
        30000,
        by_count.len(),
    ];
    let mut out = Vec::new();
    for w in edges.windows(2) {
        let (lo, hi) = (w[0], w[1].min(by_count.len()));
        if lo >= hi {
            break;
        }
        let mut b: Vec<u64> = by_count[lo..hi]
            .iter()
            .map(|(t, _)| model.bytes(table.get(t)))
            .collect();
        b.sort_unstable();
        out.push(format!(
            "{lo}-{hi}: {} ({:.2e})",
            b[b.len() / 2],
            b.iter().sum::<u64>() as f64
        ));
    }
    println!("  by rank: {}", out.join(", "));
}

/// Prints how many distinct terms have at least 9e6, 5e6, 1e6, … postings bytes and their
/// share of all bytes (the real log: 13/6.7%, 50/19.9%, 251/42.6%, 2,755/79.4%,
/// 12,339/95.9%, 30,696/99.4%).
fn bytes_profile(log: &SynthLog) {
    let table = FreqTable::from_pairs(log.freq.iter().cloned());
    let model = SizeModel::default();
    let mut bytes: Vec<u64> = log
        .freq
        .iter()
        .map(|(w, _)| model.bytes(table.get(w)))
        .collect();
    bytes.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = bytes.iter().sum();
    let mut out = Vec::new();
    for threshold in [9e6, 5e6, 1e6, 1e5, 1e4, 1e3] {
        let n = bytes.iter().take_while(|&&b| b as f64 >= threshold).count();
        let share = bytes[..n].iter().sum::<u64>() as f64 / total as f64;
        out.push(format!(">={threshold:.0e}: {n}/{:.1}%", share * 100.0));
    }
    println!("  bytes: {}", out.join(", "));
}

/// Prints, per query length, the distribution of the number of top-1% terms (the real log:
/// one-term queries 66/34, two-term 25/51/24, three-term 8/26/49/17).
fn joint_top_by_length(queries: &[String]) {
    use std::collections::HashMap;
    let mut tokens = data::tokenizer::Tokens::new();
    let mut counts: HashMap<String, u64> = HashMap::new();
    for q in queries {
        tokens.tokenize(q);
        for t in tokens.iter() {
            *counts.entry(t.to_owned()).or_default() += 1;
        }
    }
    let mut by_count: Vec<(&String, &u64)> = counts.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let k = querylog::stats::top1pct_count(by_count.len());
    let top: std::collections::HashSet<&str> =
        by_count[..k].iter().map(|(t, _)| t.as_str()).collect();
    let mut joint = [[0u64; 5]; 5];
    for q in queries {
        tokens.tokenize(q);
        let len = tokens.len().min(4);
        let m = tokens.iter().filter(|t| top.contains(t)).count().min(4);
        joint[len][m] += 1;
    }
    for (len, row) in joint.iter().enumerate().skip(1) {
        let total: u64 = row.iter().sum();
        let shares: Vec<String> = row[..=len]
            .iter()
            .map(|&c| format!("{:.2}", c as f64 / total.max(1) as f64))
            .collect();
        println!(
            "  len {len}{}: volume {:.3}, P(top terms = 0..) {}",
            if len == 4 { "+" } else { "" },
            total as f64 / queries.len() as f64,
            shares.join(" ")
        );
    }
}
