//! `ballot eval --switch-table OLD NEW [--ramp QUERIES]`: simulates a live switch from one
//! voting table to another at the midpoint of the test part, and reports the miss bytes
//! ratio over time with the balancer's ramp and with an instant switch
//! ([`cache_sim::sim::switch`], which drives `balancer::ramp` with the query counter as its
//! clock). The peak is reported over the whole rest of the test part and over the
//! transition only (the switch to 5,000 queries after the ramp ends).
//!
//! The caches warm on the train part with OLD, as in a plain `eval`. Load bound, eps, load
//! window, eviction, cache size and seeds are `eval`'s options; `--switch-table` is a mode
//! of `eval` of its own and conflicts with `--policies` and `--table`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cache_sim::sim::switch::{
    simulate_switch, SwitchConfig, SwitchReport, DEFAULT_RAMP, DEFAULT_SWITCH_WINDOW,
};
use cache_sim::sim::SimConfig;
use clap::Args;
use data::table::VotingTable;
use serde_json::json;

use super::eval::{base_config, load_trace, validate, EvalArgs};
use crate::chart::{line_chart, Series};
use crate::json::write_json;
use crate::progress::Stage;

/// The table-switch and scale options of `ballot eval`.
#[derive(Args, Debug)]
pub struct SwitchArgs {
    /// Simulate a live switch from voting table OLD to NEW at the test part's midpoint,
    /// instant and ramped (caches warm with OLD); a mode of its own, instead of the policy
    /// grid.
    #[arg(
        long,
        num_args = 2,
        value_names = ["OLD", "NEW"],
        conflicts_with_all = ["policies", "table"]
    )]
    pub switch_table: Option<Vec<PathBuf>>,
    /// Simulate the replica count changing from --replicas to R2 at the test part's midpoint
    /// (or --at-query): the --table, trained with --virtual-homes, mapped onto the new
    /// replicas and ramped in as the balancer does; a mode of its own.
    #[arg(
        long,
        value_name = "R2",
        requires = "table",
        conflicts_with_all = ["policies", "switch_table"]
    )]
    pub scale_to: Option<usize>,
    /// With --scale-to: the test query at which the replicas change (default: the midpoint).
    #[arg(long, value_name = "N", requires = "scale_to")]
    pub at_query: Option<usize>,
    /// With --switch-table or --scale-to: queries over which the ramp moves every query to
    /// the new table (default 2000).
    #[arg(long)]
    pub ramp: Option<usize>,
    /// With --switch-table or --scale-to: reporting window, in test queries (default 2000).
    #[arg(long)]
    pub switch_window: Option<usize>,
}

impl SwitchArgs {
    /// The ramp length asked for, or the default.
    pub fn ramp(&self) -> usize {
        self.ramp.unwrap_or(DEFAULT_RAMP)
    }

    /// The reporting window asked for (at least 1), or the default.
    pub fn window(&self) -> Result<usize> {
        match self.switch_window {
            Some(0) => bail!("--switch-window must be at least 1"),
            Some(w) => Ok(w),
            None => Ok(DEFAULT_SWITCH_WINDOW),
        }
    }

    /// Fails if a transition option is given without a transition to simulate.
    pub fn check_unused(&self) -> Result<()> {
        if self.ramp.is_some() || self.switch_window.is_some() {
            bail!("--ramp and --switch-window need --switch-table or --scale-to");
        }
        Ok(())
    }
}

/// Reads one voting table of the switch, naming it in errors.
fn read_table(path: &Path) -> Result<VotingTable> {
    Ok(VotingTable::read_parquet(path, None)?)
}

/// Runs the switch mode of `ballot eval`.
pub fn run(args: &EvalArgs, switch: &SwitchArgs) -> Result<()> {
    let [old_path, new_path] = match switch.switch_table.as_deref() {
        Some([old, new]) => [old, new],
        _ => bail!("--switch-table takes two files: OLD NEW"),
    };
    validate(args)?;
    let cache_frac = match args.cache_frac.as_slice() {
        [f] => *f,
        _ => bail!("--switch-table simulates one cache size: give a single --cache-frac"),
    };
    let window = switch.window()?;
    let old = read_table(old_path)?;
    let new = read_table(new_path)?;
    if new.replicas != old.replicas {
        bail!(
            "{}: voting table has {} replicas, but {} (the table it replaces) has {}",
            new_path.display(),
            new.replicas,
            old_path.display(),
            old.replicas
        );
    }
    if usize::from(old.replicas) != args.replicas {
        bail!(
            "{} and {}: voting tables have {} replicas but --replicas is {}",
            old_path.display(),
            new_path.display(),
            old.replicas,
            args.replicas
        );
    }

    let (label, trace) = load_trace(args)?;
    if trace.test_len() == 0 {
        bail!("{label}: the test part is empty");
    }
    let cfg = change_config(
        args,
        &trace,
        cache_frac,
        trace.test_len() / 2,
        switch.ramp(),
        window,
    )?;
    let stage = Stage::start("simulating the switch, instant and ramped");
    let report = simulate_switch(&trace, &old, &new, &cfg)
        .with_context(|| format!("{} -> {}", old_path.display(), new_path.display()))?;
    stage.finish("done");

    print_report(&report, trace.test_len());
    if let Some(path) = &args.json {
        let mut config = base_config(args, &label, &trace)?;
        config["switch_table"] = json!([
            old_path.display().to_string(),
            new_path.display().to_string()
        ]);
        config["capacity_bytes"] = json!(cfg.sim.capacity_bytes);
        let doc = json!({ "config": config, "switch": &report });
        write_json(path, &doc)?;
    }
    if let Some(path) = &args.svg {
        draw(path, &report, args.replicas)?;
    }
    Ok(())
}

/// The change `eval`'s options describe, at test query `at` (the switch's and the scale
/// mode's): the table's load, eps and home share, one cache size.
pub(crate) fn change_config(
    args: &EvalArgs,
    trace: &cache_sim::sim::Trace,
    cache_frac: f64,
    at: usize,
    ramp: usize,
    window: usize,
) -> Result<SwitchConfig> {
    Ok(SwitchConfig {
        sim: SimConfig {
            admission: None,
            replicas: args.replicas,
            capacity_bytes: trace.capacity_for(cache_frac),
            eviction: args.eviction,
            window: args.window,
            seed: args.seed,
            load: args.routing.sim_load_for(balancer::PolicyKind::Table)?,
        },
        eps: args.eps,
        homes: args.routing.homes,
        at,
        ramp,
        window,
    })
}

fn print_report(rep: &SwitchReport, test_len: usize) {
    println!(
        "switch at test query {} of {test_len}, ramp {} queries, windows of {} queries",
        rep.at, rep.ramp, rep.window
    );
    println!("{:>8} {:>10} {:>10}", "start", "instant", "ramp");
    for w in &rep.windows {
        let mark = if w.start <= rep.at && rep.at < w.start + rep.window {
            "  <- switch"
        } else if rep.ramp > 0
            && w.start <= rep.at + rep.ramp
            && rep.at + rep.ramp < w.start + rep.window
        {
            "  <- ramp done"
        } else {
            ""
        };
        println!("{:>8} {:>10.4} {:>10.4}{mark}", w.start, w.instant, w.ramp);
    }
    println!(
        "terms whose top vote moves: {:.1}% of requested test bytes",
        rep.moved_bytes_share * 100.0
    );
    println!(
        "peak after switch: instant {:.4}, ramp {:.4}",
        rep.peak_instant, rep.peak_ramp
    );
    println!(
        "peak over the transition (test queries {} to {}): instant {:.4}, ramp {:.4}",
        rep.at,
        rep.transition_end.min(test_len),
        rep.peak_transition_instant,
        rep.peak_transition_ramp
    );
    println!(
        "overall test miss bytes ratio: instant {:.4}, ramp {:.4}",
        rep.overall_instant, rep.overall_ramp
    );
}

fn draw(path: &Path, rep: &SwitchReport, replicas: usize) -> Result<()> {
    let line = |f: fn(&cache_sim::sim::switch::SwitchWindow) -> f64| {
        rep.windows
            .iter()
            .map(|w| (w.start as f64, f(w)))
            .collect::<Vec<_>>()
    };
    let top = rep
        .windows
        .iter()
        .map(|w| w.instant.max(w.ramp))
        .fold(0.0f64, f64::max);
    let mut series = vec![
        Series {
            name: "instant switch".into(),
            points: line(|w| w.instant),
            dashed: false,
        },
        Series {
            name: format!("ramp over {} queries", rep.ramp),
            points: line(|w| w.ramp),
            dashed: false,
        },
        Series {
            name: "switch".into(),
            points: vec![(rep.at as f64, 0.0), (rep.at as f64, top)],
            dashed: true,
        },
    ];
    line_chart(
        path,
        &format!(
            "Miss bytes ratio through a table switch (R = {replicas}, windows of {})",
            rep.window
        ),
        "test query (window start)",
        "miss bytes ratio",
        &mut series,
    )
}
