//! The throughput a table would serve, predicted by the queueing simulator: the rule's
//! deciding figure.
//!
//! The trace replay counts bytes; the cluster's throughput also depends on when each
//! replica is busy. On the time-ordered AOL log the busiest replica's flash bytes per query
//! over the held-out day ranked eight candidate pairs against the live cluster no better
//! than chance, while this prediction followed the live throughput within a few percent
//! (docs/results.md, "The rule against the live cluster"). So each table serves the held-out day closed
//! loop in [`cache_sim::queueing`], after the train days warmed its caches without time, as
//! the live replicas' flash would serve it, once per evaluation seed.

use anyhow::{Context, Result};
use balancer::policy::RoutingPolicy;
use cache_sim::queueing::{Arrivals, BalancerModel, QueueConfig, ReplicaModel, Router, Simulator};
use cache_sim::sim::Trace;
use clap::Args;
use eviction::EvictionKind;
use serde::Serialize;

/// The serving cluster the prediction models (as the replicas and the load run).
#[derive(Args, Clone, Debug)]
pub struct ServingArgs {
    /// The replicas' flash bandwidth, MB/s each (the replica's --flash-read-mbps, or the
    /// device's): the prediction's bottleneck. Positive.
    #[arg(long, default_value_t = 4.0)]
    pub flash_read_mbps: f64,
    /// Latency of every flash read, µs (the replica's --flash-latency-us, or the device's).
    #[arg(long, default_value_t = 100.0)]
    pub flash_latency_us: f64,
    /// Queries in flight at saturation over the whole cluster (the clients' concurrency).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}

/// One table's predicted service of the held-out day: means over the evaluation seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Predicted {
    /// Answers per second, closed loop: the deciding figure.
    pub throughput_qps: f64,
    /// Each seed's throughput.
    pub throughput_by_seed: Vec<f64>,
    /// The busiest replica's flash bytes per query of the whole cluster.
    pub busiest_flash_bytes_per_query: f64,
    /// Flash bytes per query, all replicas together.
    pub flash_bytes_per_query: f64,
}

/// The cluster of `serving` with `replicas` replicas, caches of `capacity` bytes evicting
/// by `eviction`, and the balancer's load bound (`balancer`).
pub fn cluster(
    serving: &ServingArgs,
    replicas: usize,
    capacity: u64,
    eviction: EvictionKind,
    balancer: BalancerModel,
) -> QueueConfig {
    QueueConfig {
        eviction,
        balancer,
        replica: ReplicaModel {
            flash_read_mbps: Some(serving.flash_read_mbps),
            flash_latency_us: serving.flash_latency_us,
            ..ReplicaModel::default()
        },
        ..QueueConfig::new(replicas, capacity)
    }
}

/// `policy` over the trace's test part, closed loop with `serving.concurrency` clients,
/// after its train part warmed the caches; once per seed of `seeds`.
pub fn predict(
    trace: &Trace,
    policy: &dyn RoutingPolicy,
    cfg: &QueueConfig,
    concurrency: usize,
    seeds: impl Iterator<Item = u64>,
) -> Result<Predicted> {
    let mut by_seed = Vec::new();
    let (mut busiest, mut flash) = (0.0, 0.0);
    for seed in seeds {
        let cfg = QueueConfig {
            seed,
            ..cfg.clone()
        };
        let mut sim = Simulator::new(Some(trace), Router::Policy(policy), &cfg)
            .context("the prediction's cluster")?;
        sim.run(0..trace.train_len, &Arrivals::Instant)?;
        let day = sim.run(
            trace.train_len..trace.len(),
            &Arrivals::Closed {
                clients: concurrency,
            },
        )?;
        by_seed.push(day.throughput_qps);
        busiest += day.flash_share_max * day.flash_bytes_per_query;
        flash += day.flash_bytes_per_query;
    }
    let n = by_seed.len().max(1) as f64;
    Ok(Predicted {
        throughput_qps: by_seed.iter().sum::<f64>() / n,
        throughput_by_seed: by_seed,
        busiest_flash_bytes_per_query: busiest / n,
        flash_bytes_per_query: flash / n,
    })
}
