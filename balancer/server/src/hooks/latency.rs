//! Each answer's speed, for the latency-driven policies (`ars`, `prequal`; a [`Hook`]): the
//! response time from the attempt to its answer's head, and the service time
//! (`request_cost.service_ms`) and queue (`named_metrics.backlog`) of the answer's ORCA load
//! report when the replica sends one, averaged per replica slot in the shard's
//! [`balancer::load::LatencyStats`]. A report that cannot be read adds only the response
//! time (the feedback hook counts malformed reports).

use axum::http::HeaderName;
use data::load_report;

use super::Hook;
use crate::ctx::{Attempt, Ctx};
use crate::shard::Shard;
use crate::upstream::Answer;

/// [`load_report::HEADER`] as a header name.
static REPORT_NAME: HeaderName = HeaderName::from_static(load_report::HEADER);

/// The latency hook.
pub struct LatencyFeed;

impl Hook for LatencyFeed {
    fn on_answer(&self, _ctx: &Ctx, shard: &Shard, attempt: &Attempt, answer: &Answer) {
        let report = answer.headers.get(&REPORT_NAME).map(|v| v.as_bytes());
        let entry = |name: &str| {
            let value = load_report::find(report?, name).ok().flatten()?;
            (value.is_finite() && value >= 0.0).then_some(value)
        };
        let response_ms = attempt.sent.elapsed().as_secs_f64() * 1e3;
        shard.latency.record(
            attempt.choice.index,
            response_ms,
            entry(load_report::SERVICE_MS),
            entry(load_report::BACKLOG),
        );
    }
}
