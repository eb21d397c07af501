//! `ballot eval --breakdown`: replays the test part through the `table` policy once more
//! per cache size with a [`MissWatch`], and prints where the table's flash bytes go.

use anyhow::{Context, Result};
use balancer::policy::{build_policy, PolicyKind};
use cache_sim::sim::misses::{Breakdown, Bytes, MissWatch};
use cache_sim::sim::{replay, GridConfig, Trace};
use serde::Serialize;

/// One cache size's breakdown.
#[derive(Serialize)]
pub struct SizedBreakdown {
    /// The cache size, as a fraction of the distinct postings bytes.
    pub cache_frac: f64,
    /// What the replay saw.
    #[serde(flatten)]
    pub breakdown: Breakdown,
}

/// Runs and prints the breakdown of `cfg`'s table (which it has) at every cache size of
/// `cfg`, listing the `top_terms` terms that miss the most.
pub fn run(trace: &Trace, cfg: &GridConfig, top_terms: usize) -> Result<Vec<SizedBreakdown>> {
    let table = cfg.table.as_ref().context("a breakdown needs a table")?;
    let policy = build_policy(PolicyKind::Table, &cfg.policy_params(trace))?;
    let admission = cfg.admission_rule(trace)?;
    let load = cfg.loads.of(PolicyKind::Table);
    let mut out = Vec::new();
    for &cache_frac in &cfg.cache_fracs {
        let sim = cfg.sim_config(trace, cache_frac, load, admission.clone());
        let mut watch = MissWatch::new(trace, table);
        replay(trace, policy.as_ref(), &sim, &mut watch);
        let breakdown = watch.report(top_terms);
        print(cache_frac, &breakdown);
        out.push(SizedBreakdown {
            cache_frac,
            breakdown,
        });
    }
    Ok(out)
}

fn print(cache_frac: f64, b: &Breakdown) {
    let total = b.total.requested.max(1) as f64;
    let line = |name: &str, x: &Bytes| {
        println!(
            "  {name:<26} {:>9.4} {:>9.4} {:>9.3}",
            x.requested as f64 / total,
            x.missed as f64 / total,
            x.missed as f64 / x.requested.max(1) as f64
        )
    };
    println!("\nwhere the table's flash bytes go, cache_frac {cache_frac} (shares of the requested bytes):");
    println!(
        "  {:<26} {:>9} {:>9} {:>9}",
        "replica's role for the term", "requested", "missed", "miss rate"
    );
    for (name, x) in &b.by_role {
        line(name, x);
    }
    line("all", &b.total);
    println!(
        "  {:<26} {:>9} {:>9} {:>9}",
        "routing reason", "requested", "missed", "miss rate"
    );
    for (name, x) in &b.by_reason {
        line(name, x);
    }
    let shares: Vec<String> = b
        .top_shares
        .iter()
        .map(|(k, s)| format!("{k} terms {s:.3}"))
        .collect();
    println!(
        "  share of the missed bytes read by the terms missing the most: {}",
        shares.join(", ")
    );
    if !b.terms.is_empty() {
        println!(
            "  {:<20} {:>12} {:>8} {:>8} {:>8} {:>5}",
            "term", "bytes", "lookups", "misses", "replicas", "top"
        );
        for t in &b.terms {
            let top = t.top.map_or("-".to_owned(), |r| r.to_string());
            println!(
                "  {:<20} {:>12} {:>8} {:>8} {:>8} {:>5}",
                t.term, t.bytes, t.lookups, t.misses, t.replicas, top
            );
        }
    }
}
