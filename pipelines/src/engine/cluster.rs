//! `ballot cluster scheduler|executor`: Ballista's own scheduler and executor, embedded,
//! so a cluster needs no binary besides `ballot`. Both use Ballista's pull scheduling
//! (executors poll the scheduler for tasks), so an executor needs one reachable port (its
//! Arrow Flight port, where other executors and the client fetch results) and the
//! scheduler one (gRPC). Run one scheduler and any number of executors, on one machine or
//! many; every executor must read the log files by the same paths (docs/learner.md,
//! "Aggregation on an engine").

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use ballista_core::config::TaskSchedulingPolicy;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use clap::{Args, Subcommand};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use super::count::block_on;

/// Arguments of `ballot cluster`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub role: Role,
}

/// Which process to run.
#[derive(Subcommand, Debug)]
pub enum Role {
    /// Run a Ballista scheduler; `--engine ballista://ADDRESS` sends it work.
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor that takes tasks from a scheduler.
    Executor(ExecutorArgs),
}

/// Arguments of `ballot cluster scheduler`.
#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// Address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub bind: SocketAddr,
}

/// Arguments of `ballot cluster executor`.
#[derive(Args, Debug)]
pub struct ExecutorArgs {
    /// The scheduler, `HOST:PORT`.
    #[arg(long, default_value = "127.0.0.1:50050")]
    pub scheduler: String,
    /// Address to bind the Arrow Flight port to.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_host: String,
    /// Host name or address the scheduler and the other executors reach this one by
    /// (default: the bind address).
    #[arg(long)]
    pub external_host: Option<String>,
    /// Arrow Flight port (results are fetched from it). It is announced to the scheduler,
    /// so it must be a real port, not 0.
    #[arg(long, default_value_t = 50051)]
    pub port: u16,
    /// Tasks run at once (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub vcores: usize,
    /// Directory for intermediate (shuffle) files; created if missing (default: a new
    /// folder under the system's temporary directory).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

impl ClusterArgs {
    /// Runs `ballot cluster`.
    pub fn run(&self) -> Result<()> {
        match &self.role {
            Role::Scheduler(a) => block_on(scheduler(a)),
            Role::Executor(a) => block_on(executor(a)),
        }
    }
}

async fn scheduler(args: &SchedulerArgs) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding the scheduler to {}", args.bind))?;
    let addr = listener.local_addr()?;
    let config = Arc::new(
        SchedulerConfig::default()
            .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
            .with_hostname(addr.ip().to_string())
            .with_port(addr.port()),
    );
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .context("setting up the scheduler's cluster state")?;
    let server = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config)
        .await
        .context("starting the scheduler")?;
    // One line on stdout, flushed: scripts and tests wait for it.
    println!("listening on {addr}");
    use std::io::Write;
    std::io::stdout().flush().ok();
    eprintln!("ballot cluster scheduler: send work with --engine ballista://{addr}");
    tokio::select! {
        served = start_grpc_service_with_listener(listener, server) => {
            served.context("serving the scheduler")?;
        }
        _ = stop_signal() => eprintln!("ballot cluster scheduler: stopping"),
    }
    Ok(())
}

async fn executor(args: &ExecutorArgs) -> Result<()> {
    let (host, port) = super::split_host_port(&args.scheduler)
        .with_context(|| format!("--scheduler {:?} is not HOST:PORT", args.scheduler))?;
    if args.port == 0 {
        anyhow::bail!(
            "--port 0: the executor announces its port to the scheduler; give a free port"
        );
    }
    let external = args
        .external_host
        .clone()
        .unwrap_or_else(|| args.bind_host.clone());
    if external
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        anyhow::bail!(
            "--bind-host {}: give --external-host, the name or address other machines reach this executor by",
            args.bind_host
        );
    }
    let work_dir = match &args.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "ballot-executor-{}-{}",
            args.port,
            std::process::id()
        )),
    };
    std::fs::create_dir_all(&work_dir)
        .with_context(|| format!("creating the work directory {}", work_dir.display()))?;
    let work_dir_text = work_dir
        .to_str()
        .with_context(|| format!("{}: the work directory is not UTF-8", work_dir.display()))?
        .to_owned();
    let config = ExecutorProcessConfig {
        bind_host: args.bind_host.clone(),
        external_host: Some(external),
        port: args.port,
        scheduler_host: host.to_owned(),
        scheduler_port: port,
        vcores: args.vcores,
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        work_dir: Some(work_dir_text),
        ..ExecutorProcessConfig::default()
    };
    eprintln!(
        "ballot cluster executor: flight on {}:{}, scheduler {}, work dir {}",
        args.bind_host,
        args.port,
        args.scheduler,
        work_dir.display()
    );
    // Ballista's executor stops by itself on Ctrl-C or SIGTERM.
    start_executor_process(Arc::new(config))
        .await
        .context("running the executor")?;
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}
