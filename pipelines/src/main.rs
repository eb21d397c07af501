//! `ballot`: the batch jobs of the ballot cache-aware load balancer — ingest query logs,
//! generate the synthetic default log, compute postings sizes, print log statistics,
//! evaluate every routing policy's cache hits by simulation, predict throughput and
//! latency with the queueing simulator, train voting tables, replay logs over HTTP and
//! run the demo. `ballot replica` and `ballot balancer` run the server
//! command lines, so the demo needs no binary besides this one.

mod chart;
mod client;
mod cmd;
mod engine;
mod inputs;
mod json;
mod progress;
mod routing_args;

use std::process::ExitCode;

/// The allocator of the batch jobs and of the servers `ballot replica` and `ballot
/// balancer` run: jemalloc, as in the `replica` and `balancer` binaries.
#[global_allocator]
static ALLOC: serving::alloc::Jemalloc = serving::alloc::Jemalloc;

/// jemalloc's options for the batch jobs: the balancer's (freed pages returned within about
/// a second). `ballot replica` re-executes itself with the replica's ([`server_allocator`]).
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: serving::alloc::MallocConf =
    serving::alloc::MallocConf::new(serving::alloc::BALANCER_CONF);

/// Gives a server command the allocator options its own binary is built with: jemalloc reads
/// them before `main`, so `ballot replica` re-executes itself with the replica's options in
/// the environment (followed by any an operator set there).
fn server_allocator(conf: &'static std::ffi::CStr) {
    if let Err(e) = serving::alloc::reexec_with_conf(conf) {
        eprintln!("warning: cannot re-execute with the server's allocator options: {e}");
    }
}

use clap::{Parser, Subcommand};

/// Cache-aware load balancing of search replicas: batch jobs.
#[derive(Parser, Debug)]
#[command(name = "ballot", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Convert a query log (lines, TSV, CSV, AOL, Excite, TREC topics, Parquet; gzip ok) to
    /// Parquet, keeping users and times.
    Ingest(cmd::data_cmds::IngestArgs),
    /// Generate the synthetic query log and its matching word-frequency table.
    Gen(cmd::data_cmds::GenArgs),
    /// Write the postings size (bytes) of every term of a log.
    Sizes(cmd::data_cmds::SizesArgs),
    /// Build a replica's on-flash index (postings, term directory, manifest, sizes), or with
    /// --shards one per document shard.
    BuildIndex(cmd::build_index::BuildIndexCli),
    /// Print a log's headline statistics.
    Stats(cmd::data_cmds::StatsArgs),
    /// Simulate every routing policy's cache misses and load balance on a log (or, with
    /// --switch-table, a live switch between two voting tables).
    Eval(EvalCli),
    /// Learn a voting table from a log (term-query graph, METIS, refinement by simulation).
    Train(cmd::train::TrainArgs),
    /// Count each distinct query of a Parquet log with an engine (embedded DataFusion or a
    /// Ballista cluster); `train --engine` trains from such counts.
    Aggregate(cmd::aggregate::AggregateArgs),
    /// Run a Ballista scheduler or executor for `--engine ballista://...` (built with the
    /// `cluster` feature).
    Cluster(ClusterCli),
    /// Retrain on the last days of a partitioned log, evaluate against the served table on
    /// the newest day, and push a better table to the balancers.
    Retrain(cmd::retrain::RetrainArgs),
    /// Explain how the table policy routes queries: each term's votes, the homes, the
    /// load view and the rule that chose the replica (as a balancer's /admin/explain).
    Explain(cmd::explain::ExplainArgs),
    /// Train and evaluate a table for several (replicas, cache size) configurations.
    Grid(cmd::grid::GridArgs),
    /// Predict throughput and tail latency per policy with the queueing simulator
    /// (replicas with flash, CPU and queues; closed and open loop; shards).
    Simulate(cmd::simulate::SimulateArgs),
    /// Replay a log against a live replica or balancer over HTTP (load generator).
    Replay(cmd::replay::ReplayArgs),
    /// Run the whole evaluation on the embedded default data, offline and live over HTTP,
    /// and write a report.
    Demo(cmd::demo::DemoArgs),
    /// Serve a search replica: the `replica` binary's command line (`ballot replica --help`).
    #[command(disable_help_flag = true)]
    Replica(PassThrough),
    /// Serve the HTTP load balancer: the `balancer` binary's command line
    /// (`ballot balancer --help`).
    #[command(disable_help_flag = true)]
    Balancer(PassThrough),
}

/// `ballot cluster`: Ballista's scheduler and executor (`engine::cluster`).
#[cfg(feature = "cluster")]
type ClusterCli = engine::cluster::ClusterArgs;

/// `ballot cluster` in a build without the engine: any arguments, one clear error.
#[cfg(not(feature = "cluster"))]
#[derive(clap::Args, Debug)]
struct ClusterCli {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<std::ffi::OsString>,
}

#[cfg(not(feature = "cluster"))]
impl ClusterCli {
    fn run(&self) -> anyhow::Result<()> {
        Err(engine::not_built().context("ballot cluster"))
    }
}

/// `ballot eval` as parsed: the grid of policies (`cmd::eval`), or (with `--switch-table`)
/// the simulation of a live table switch (`cmd::switch`), or (with `--scale-to`) of a
/// change of replica count (`cmd::scale`), which share every other option.
#[derive(clap::Args, Debug)]
struct EvalCli {
    #[command(flatten)]
    eval: cmd::eval::EvalArgs,
    #[command(flatten)]
    switch: cmd::switch::SwitchArgs,
}

impl EvalCli {
    /// Runs `ballot eval` in the mode its arguments ask for.
    fn run(&self) -> anyhow::Result<()> {
        if self.switch.switch_table.is_some() {
            cmd::switch::run(&self.eval, &self.switch)
        } else if let Some(to) = self.switch.scale_to {
            cmd::scale::run(&self.eval, &self.switch, to)
        } else {
            self.switch.check_unused()?;
            cmd::eval::run(&self.eval).map(|_| ())
        }
    }
}

/// Arguments handed unchanged to another command line.
#[derive(clap::Args, Debug)]
struct PassThrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<std::ffi::OsString>,
}

impl PassThrough {
    /// `name` followed by the arguments, as `main_from` takes them.
    fn argv(&self, name: &str) -> Vec<std::ffi::OsString> {
        std::iter::once(name.into())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A corrupt Parquet input (log or table) is reported as an error naming the file; the
    // decoder panic behind it need not print too (process-wide: data::parquet_guard).
    data::parquet_guard::quiet_decoder_panics();
    let result = match &cli.command {
        Command::Replica(a) => {
            server_allocator(serving::alloc::REPLICA_CONF);
            return replica::cli::main_from(a.argv("ballot replica"));
        }
        Command::Balancer(a) => balancer_ops::cli::main_from(a.argv("ballot balancer")),
        Command::Ingest(a) => cmd::data_cmds::ingest(a),
        Command::Gen(a) => cmd::data_cmds::gen(a),
        Command::Sizes(a) => cmd::data_cmds::sizes(a),
        Command::BuildIndex(a) => cmd::build_index::run_cli(a),
        Command::Stats(a) => cmd::data_cmds::stats(a),
        Command::Eval(a) => a.run(),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Train(a) => cmd::train::run(a),
        Command::Grid(a) => cmd::grid::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Retrain(a) => cmd::retrain::run(a),
        Command::Aggregate(a) => cmd::aggregate::run(a),
        Command::Cluster(a) => a.run(),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
