//! `ballot train`: learns a voting table from the train part of a log (the `learner`
//! crate does the work) and writes it as Parquet, with an optional JSON report and an SVG
//! chart of the miss bytes ratio per refinement iteration.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use cache_sim::sim::{capacity_of, distinct_bytes_of};
use clap::Args;
use eviction::EvictionKind;
use learner::refine::RefineConfig;
use learner::{train, Progress, TrainConfig};

use crate::chart::{line_chart, Series};
use crate::inputs::{LogArgs, SizeArgs, SplitArgs};
use crate::json::write_json;
use crate::progress::Stage;
use crate::routing_args::RoutingArgs;

/// Arguments of `ballot train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub sizes: SizeArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub routing: RoutingArgs,
    /// Number of replicas R.
    #[arg(long, default_value_t = 8)]
    pub replicas: usize,
    /// Per-replica cache size as a fraction of the log's distinct postings bytes.
    #[arg(long, default_value_t = 0.05)]
    pub cache_frac: f64,
    /// Eviction policy of the simulated caches: the one the replicas run (lru, sieve or
    /// s3fifo; the replica's default is sieve).
    #[arg(long, default_value_t = EvictionKind::SERVING_DEFAULT)]
    pub eviction: EvictionKind,
    /// Load-bound slack.
    #[arg(long, default_value_t = balancer::policy::DEFAULT_EPS)]
    pub eps: f64,
    /// Refinement iterations after the initial table.
    #[arg(long, default_value_t = RefineConfig::default().iterations)]
    pub iterations: usize,
    /// Seed of METIS and of simulated random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pruning thresholds to try, comma-separated: terms in fewer train queries abstain.
    #[arg(long, default_value = "2,3", value_delimiter = ',')]
    pub min_term_freqs: Vec<u32>,
    /// METIS imbalance tolerances (thousandths) to try, comma-separated; each partition is
    /// refined and the best on validation wins.
    #[arg(long, default_value = "10,30,60", value_delimiter = ',')]
    pub ufactors: Vec<i32>,
    /// Relative request advantage a replica needs before a term's home moves there.
    #[arg(long, default_value_t = RefineConfig::default().move_margin)]
    pub move_margin: f64,
    /// Exponent of the per-replica load-price update.
    #[arg(long, default_value_t = RefineConfig::default().price_step)]
    pub price_step: f64,
    /// Weight factor of secondary votes for replicas where a term also hits (0 = off).
    #[arg(long, default_value_t = RefineConfig::default().secondary)]
    pub secondary: f64,
    /// Stop refining after this many iterations without a validation improvement.
    #[arg(long, default_value_t = RefineConfig::default().patience)]
    pub patience: usize,
    /// Also balance the flash bytes each replica reads, with this weight (0 = off), and keep
    /// the table whose busiest replica reads the least flash per query (for clusters where
    /// flash bandwidth is the bottleneck).
    #[arg(long, default_value_t = RefineConfig::default().flash_price)]
    pub flash_price: f64,
    /// Replay at most this many fit queries (the most recent) per refinement iteration, so
    /// that long logs train in bounded time; 0 replays them all. The graph always covers
    /// the whole fit part.
    #[arg(long, default_value_t = learner::train::DEFAULT_REPLAY_FIT_MAX)]
    pub refine_sample: usize,
    /// Split each replica into this many virtual homes, so the table serves any replica
    /// count up to the homes (at most 64) without retraining: the balancer maps the homes
    /// onto the replicas it has (docs/learner.md, "Virtual homes"). Off by default.
    #[arg(long, value_name = "K")]
    pub virtual_homes: Option<u16>,
    /// Share of the train part held out for early stopping.
    #[arg(long, default_value_t = 0.1)]
    pub validation_frac: f64,
    /// Aggregate the fit part with an engine instead of in memory: `datafusion` (embedded)
    /// or `ballista://HOST:PORT` (a cluster, `ballot cluster`). Needs a directory of daily
    /// Parquet partitions; the newest day is the validation part, the days before it the
    /// fit part (docs/learner.md, "Aggregation on an engine"). Built with the `cluster`
    /// feature only.
    #[arg(
        long,
        value_name = "ENGINE",
        conflicts_with_all = ["split", "shuffle_seed", "split_time", "validation_frac"]
    )]
    pub engine: Option<crate::engine::Engine>,
    /// Output voting table (Parquet).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write the training report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Draw miss bytes ratio per iteration as SVG here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Runs `ballot train`.
pub fn run(args: &TrainArgs) -> Result<()> {
    crate::inputs::check_fraction("--cache-frac", args.cache_frac)?;
    if !(args.flash_price.is_finite() && args.flash_price >= 0.0) {
        bail!("--flash-price {} must be a number >= 0", args.flash_price);
    }
    if let Some(engine) = &args.engine {
        #[cfg(feature = "cluster")]
        return run_counted(args, engine);
        #[cfg(not(feature = "cluster"))]
        return Err(crate::engine::not_built().context(format!("--engine {engine}")));
    }
    let dataset = args.log.load_reported()?;
    let sizes = args.sizes.load(&dataset)?;
    let order = args.split.apply(&dataset)?;
    // Capacity exactly as `ballot eval` defines it: a fraction of the distinct postings
    // bytes of the whole log (its distinct texts hold every term).
    let capacity = capacity_of(
        distinct_bytes_of(dataset.queries.distinct_texts(), &sizes),
        args.cache_frac,
    );
    let train_queries: Vec<&str> = order
        .train()
        .iter()
        .map(|&i| dataset.queries.get(i as usize))
        .collect();
    let cfg = train_config(args, capacity)?;
    eprintln!(
        "training on {} queries: R = {}, capacity {} bytes per replica",
        train_queries.len(),
        args.replicas,
        capacity
    );
    let out = train_reported(&train_queries, &sizes, &cfg)?;
    write_outputs(args, &out)
}

/// `ballot train --engine`: trains from the counts the engine aggregated
/// ([`crate::engine::fit`]) with `learner::train::train_counted`.
#[cfg(feature = "cluster")]
fn run_counted(args: &TrainArgs, engine: &crate::engine::Engine) -> Result<()> {
    use learner::train::{train_counted, CountedLog};
    let Some(dir) = args.log.log.as_deref().filter(|p| p.is_dir()) else {
        bail!("--engine trains on a directory of daily Parquet partitions (--log DIR, date=YYYY-MM-DD/...)");
    };
    let range = querylog::TimeRange::parse(args.log.from.as_deref(), args.log.to.as_deref())
        .map_err(anyhow::Error::msg)?;
    let fit = crate::engine::fit::read_fit(
        crate::engine::fit::FitSpec {
            dir,
            range,
            layout: args.log.layout.spec()?,
            keep_repeats: args.log.keep_repeats,
            refine_sample: args.refine_sample,
        },
        engine,
    )?;
    let replay: Vec<&str> = fit
        .replay
        .iter()
        .flat_map(|q| (0..q.len()).map(move |i| q.get(i)))
        .collect();
    let validation: Vec<&str> = (0..fit.validation.len())
        .map(|i| fit.validation.get(i))
        .collect();
    let sizes = args.sizes.load_for(&dir.display().to_string())?;
    let fit_counts = fit.counts.as_refs();
    // The capacity as `ballot eval` defines it, over the distinct texts this run sees.
    let capacity = capacity_of(
        distinct_bytes_of(
            fit_counts
                .iter()
                .map(|&(q, _)| q)
                .chain(validation.iter().copied()),
            &sizes,
        ),
        args.cache_frac,
    );
    let cfg = train_config(args, capacity)?;
    eprintln!(
        "training on {} fit records of {} days ({} distinct, the newest {} read for the replay) and {} validation records: R = {}, capacity {} bytes per replica",
        fit.counts.records(),
        fit.fit_days,
        fit_counts.len(),
        replay.len(),
        validation.len(),
        args.replicas,
        capacity
    );
    let log = CountedLog {
        fit_counts: &fit_counts,
        replay: &replay,
        validation: &validation,
    };
    let out =
        reported(|on_stage, on_progress| train_counted(&log, &sizes, &cfg, on_stage, on_progress))?;
    write_outputs(args, &out)
}

/// The training configuration `args` ask for, with a per-replica `capacity`.
fn train_config(args: &TrainArgs, capacity: u64) -> Result<TrainConfig> {
    Ok(TrainConfig {
        load: args.routing.sim_load_for(balancer::PolicyKind::Table)?,
        homes: args.routing.homes,
        eviction: args.eviction,
        eps: args.eps,
        seed: args.seed,
        min_term_freqs: args.min_term_freqs.clone(),
        ufactors: args.ufactors.clone(),
        validation_frac: args.validation_frac,
        refine: RefineConfig {
            iterations: args.iterations,
            patience: args.patience,
            move_margin: args.move_margin,
            price_step: args.price_step,
            secondary: args.secondary,
            flash_price: args.flash_price,
            ..RefineConfig::default()
        },
        replay_fit_max: (args.refine_sample > 0).then_some(args.refine_sample),
        virtual_homes: args.virtual_homes,
        ..TrainConfig::new(args.replicas, args.cache_frac, capacity)
    })
}

/// Writes the table, and the report and chart when asked, and prints the summary line.
fn write_outputs(args: &TrainArgs, out: &learner::TrainOutput) -> Result<()> {
    out.table
        .write_parquet(&args.output)
        .context("writing the voting table")?;
    let r = &out.report;
    println!(
        "wrote {} ({} voting terms, {} rows): best iteration {}, validation miss bytes ratio {:.4}, imbalance {:.3}",
        args.output.display(),
        r.voting_terms,
        out.table.rows.len(),
        r.best_iteration,
        r.validation_miss_bytes_ratio,
        r.validation_imbalance
    );
    if let Some(h) = &r.virtual_homes {
        println!(
            "{} virtual homes ({} per replica), the heaviest carries {:.4} of the work",
            h.homes, h.per_replica, h.heaviest_work_share
        );
    }
    if let Some(path) = &args.report {
        write_json(path, &serde_json::to_value(r)?)?;
    }
    if let Some(path) = &args.svg {
        let mut series = vec![
            Series {
                name: "train (fit part)".into(),
                points: r
                    .iterations
                    .iter()
                    .map(|i| (i.iteration as f64, i.train_miss_bytes_ratio))
                    .collect(),
                dashed: false,
            },
            Series {
                name: "validation".into(),
                points: r
                    .iterations
                    .iter()
                    .map(|i| (i.iteration as f64, i.validation_miss_bytes_ratio))
                    .collect(),
                dashed: false,
            },
        ];
        line_chart(
            path,
            "Training: miss bytes ratio per refinement iteration",
            "iteration (0 = METIS table)",
            "miss bytes ratio",
            &mut series,
        )?;
    }
    Ok(())
}

/// [`learner::train()`] with progress on stderr: each candidate's METIS run and refinement
/// iterations as lines, the current step on the spinner, and every stage's time.
pub fn train_reported(
    queries: &[&str],
    sizes: &data::sizes::Sizes,
    cfg: &TrainConfig,
) -> Result<learner::TrainOutput> {
    reported(|on_stage, on_progress| train(queries, sizes, cfg, on_stage, on_progress))
}

/// Runs a training entry point with progress on stderr (see [`train_reported`]).
fn reported(
    run: impl FnOnce(
        &mut dyn FnMut(&learner::report::StageTime),
        &mut (dyn FnMut(&Progress<'_>) + Send),
    ) -> Result<learner::TrainOutput, learner::TrainError>,
) -> Result<learner::TrainOutput> {
    let stage = Stage::start("training");
    let out = run(
        &mut |t| stage.println(&format!("{}: {:.1}s", t.stage, t.seconds)),
        &mut |event| {
            match event {
            Progress::Partitioning {
                min_term_freq,
                ufactor,
                vertices,
            } => {
                stage.set_message(format!(
                    "training: METIS on candidate min freq {min_term_freq} ufactor {ufactor} ({vertices} vertices)"
                ));
                stage.println(&format!(
                    "min freq {min_term_freq} ufactor {ufactor}: METIS partitions {vertices} vertices"
                ));
            }
            Progress::Partitioned {
                min_term_freq,
                ufactor,
                seconds,
                edge_cut,
            } => stage.println(&format!(
                "min freq {min_term_freq} ufactor {ufactor}: METIS done in {seconds:.1}s, edge cut {edge_cut}"
            )),
            Progress::Iteration(it) => {
                stage.set_message(format!(
                    "training: candidate min freq {} ufactor {}, iteration {}",
                    it.min_term_freq, it.ufactor, it.iteration
                ));
                stage.println(&format!(
                    "min freq {} ufactor {} iteration {}: train {:.4}, validation {:.4}, imbalance {:.3}, overflow {:.3}, moved {}",
                    it.min_term_freq,
                    it.ufactor,
                    it.iteration,
                    it.train_miss_bytes_ratio,
                    it.validation_miss_bytes_ratio,
                    it.validation_imbalance,
                    it.validation_overflow,
                    it.moved_terms
                ));
            }
        }
        },
    )?;
    stage.finish("done");
    Ok(out)
}
