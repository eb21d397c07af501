//! Latency against offered load: one fresh simulation per rate (warm-up, then the measured
//! queries open loop at that rate), run in parallel. One curve per policy is what
//! `ballot simulate --sweep` draws.

use std::ops::Range;

use rayon::prelude::*;
use serde::Serialize;

use super::config::{Arrivals, QueueConfig, QueueError, Router};
use super::result::LatencyMs;
use super::Simulator;
use crate::sim::Trace;

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The rate asked for, queries/s.
    pub rate: f64,
    /// Answers per simulated second.
    pub throughput_qps: f64,
    /// Latency from the intended send time.
    pub latency_ms: LatencyMs,
    /// Share of the queries shed.
    pub error_share: f64,
    /// Share of routing decisions made by overflow.
    pub overflow_share: f64,
    /// Busiest server's share of the flash bytes.
    pub flash_share_max: f64,
}

/// For each of `rates`: a cold cluster warmed by `warmup` queries arriving as
/// `warmup_arrivals`, then `measured` open loop at the rate (`poisson`: Poisson arrivals;
/// otherwise a fixed schedule).
pub fn latency_sweep(
    trace: &Trace,
    router: Router<'_>,
    cfg: &QueueConfig,
    warmup: (Range<usize>, &Arrivals),
    measured: Range<usize>,
    rates: &[f64],
    poisson: bool,
) -> Result<Vec<SweepPoint>, QueueError> {
    rates
        .par_iter()
        .map(|&rate| {
            let mut sim = Simulator::new(Some(trace), router, cfg)?;
            sim.run(warmup.0.clone(), warmup.1)?;
            let arrivals = if poisson {
                Arrivals::Poisson { rate }
            } else {
                Arrivals::Fixed { rate }
            };
            let r = sim.run(measured.clone(), &arrivals)?;
            Ok(SweepPoint {
                rate,
                throughput_qps: r.throughput_qps,
                latency_ms: r.latency_ms,
                error_share: r.error_share,
                overflow_share: r.overflow_share,
                flash_share_max: r.flash_share_max,
            })
        })
        .collect()
}
