//! `ballot eval --table T --replicas R --scale-to R2 [--at-query N] [--ramp Q]`: simulates
//! the replica count changing from R to R2 in the middle of the test part, with a table over
//! virtual homes mapped onto the new replicas and ramped in as the balancer does when a
//! replica joins or leaves ([`cache_sim::sim::scale`]), and reports the miss bytes ratio and
//! the busiest replica's flash share per window: the transient. The caches warm on the
//! train part with R replicas; replicas that join start cold.

use anyhow::{bail, Context, Result};
use cache_sim::sim::scale::{simulate_scale, ScaleConfig, ScaleReport};
use data::table::VotingTable;
use serde_json::json;

use super::eval::{base_config, load_trace, validate, EvalArgs};
use super::switch::{change_config, SwitchArgs};
use crate::json::write_json;
use crate::progress::Stage;

/// Runs the scale mode of `ballot eval`.
pub fn run(args: &EvalArgs, switch: &SwitchArgs, to: usize) -> Result<()> {
    validate(args)?;
    let Some(path) = &args.table else {
        bail!("--scale-to needs --table, a table trained with --virtual-homes");
    };
    let cache_frac = match args.cache_frac.as_slice() {
        [f] => *f,
        _ => bail!("--scale-to simulates one cache size: give a single --cache-frac"),
    };
    if to == 0 {
        bail!("--scale-to must be at least 1");
    }
    let window = switch.window()?;
    let most = u16::try_from(args.replicas.max(to)).context("--scale-to is too large")?;
    let table = VotingTable::read_parquet(path, Some(most))?;
    let (label, trace) = load_trace(args)?;
    if trace.test_len() == 0 {
        bail!("{label}: the test part is empty");
    }
    let at = switch.at_query.unwrap_or(trace.test_len() / 2);
    if at >= trace.test_len() {
        bail!(
            "--at-query {at} is past the test part ({} queries)",
            trace.test_len()
        );
    }
    let cfg = ScaleConfig {
        change: change_config(args, &trace, cache_frac, at, switch.ramp(), window)?,
        to,
    };
    let stage = Stage::start(&format!("simulating {} -> {to} replicas", args.replicas));
    let report =
        simulate_scale(&trace, &table, &cfg).with_context(|| path.display().to_string())?;
    stage.finish("done");
    print_report(&report);
    if let Some(json_path) = &args.json {
        let mut config = base_config(args, &label, &trace)?;
        config["table"] = json!(path.display().to_string());
        config["capacity_bytes"] = json!(cfg.change.sim.capacity_bytes);
        write_json(json_path, &json!({ "config": config, "scale": &report }))?;
    }
    Ok(())
}

fn print_report(rep: &ScaleReport) {
    println!(
        "{} -> {} replicas at test query {}, ramp {} queries",
        rep.from, rep.to, rep.at, rep.ramp
    );
    println!(
        "{:>8} {:>9} {:>11} {:>10}",
        "start", "replicas", "miss_bytes", "flash_max"
    );
    for w in &rep.windows {
        println!(
            "{:>8} {:>9} {:>11.4} {:>10.4}",
            w.start, w.replicas, w.miss_bytes_ratio, w.flash_share_max
        );
    }
    println!(
        "miss bytes ratio: before {:.4}, transition {:.4}, after {:.4}; busiest flash share after {:.4} (1/R = {:.4})",
        rep.before,
        rep.transition,
        rep.after,
        rep.flash_share_max_after,
        1.0 / rep.to as f64
    );
}
