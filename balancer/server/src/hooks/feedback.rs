//! The answer's feedback to the loads (a [`Hook`]): with `backlog_reports_ms`, the
//! replica's backlog in its ORCA report ([`crate::admit::Slots::record_report`]); with
//! `load = "work"`, what the query cost its replica in flash bytes, read from
//! the replica's `x-ballot-miss-bytes` header, from the `request_cost.miss_bytes` entry of
//! its ORCA load report ([`data::load_report`]), or estimated by the balancer's shadow cache
//! of that replica ([`balancer::shadow`]), as `work_source` says ([`WorkSource`]).
//!
//! Every answer is counted by where its bytes came from (`ballot_work_source_total`); a
//! report that cannot be read is ignored and counted (`ballot_load_reports_malformed_total`),
//! never failing the answer it came with. Bytes a replica reported, by either form, add up
//! per replica in `ballot_reported_miss_bytes_total`, beside the shadow estimate's
//! `ballot_shadow_miss_bytes_total`, so the two can be compared on any backend that reports.

use axum::http::{HeaderMap, HeaderName};
use balancer::load::{LoadKind, WorkSource};
use data::load_report;
use metrics::Counter;

use super::Hook;
use crate::config::Validated;
use crate::ctx::{Attempt, Ctx};
use crate::metrics as m;
use crate::shard::Shard;
use crate::stats::ReplicaStats;
use crate::upstream::Answer;

/// [`data::query::MISS_BYTES_HEADER`] as a header name.
static MISS_BYTES_NAME: HeaderName = HeaderName::from_static(data::query::MISS_BYTES_HEADER);
/// [`load_report::HEADER`] as a header name.
static REPORT_NAME: HeaderName = HeaderName::from_static(load_report::HEADER);

/// Where one answer's bytes came from, as `ballot_work_source_total{source}` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Header,
    Orca,
    Shadow,
    None,
}

impl Origin {
    const ALL: [Origin; 4] = [Origin::Header, Origin::Orca, Origin::Shadow, Origin::None];

    fn name(self) -> &'static str {
        match self {
            Origin::Header => "header",
            Origin::Orca => "orca",
            Origin::Shadow => "shadow",
            Origin::None => "none",
        }
    }
}

/// The feedback hook: each answer's work and backlog report.
pub struct Feedback {
    work: Option<WorkSource>,
    reports: bool,
    by_source: [Counter; Origin::ALL.len()],
    malformed: Counter,
}

impl Feedback {
    /// The hook of `cfg`.
    pub fn new(cfg: &Validated) -> Self {
        Feedback {
            work: (cfg.load == LoadKind::Work).then_some(cfg.config.work_source),
            reports: cfg.config.backlog_reports_ms > 0,
            by_source: Origin::ALL.map(|f| metrics::counter!(m::WORK_SOURCE, "source" => f.name())),
            malformed: metrics::counter!(m::LOAD_REPORTS_MALFORMED),
        }
    }

    /// The flash bytes of the answer with `headers` from `replica`, whose shadow cache
    /// estimated `shadow` (`None`: no shadow caches, or a query routed without terms);
    /// 0 when the chosen source has none.
    fn bytes(
        &self,
        source: WorkSource,
        headers: &HeaderMap,
        shadow: Option<u64>,
        replica: &ReplicaStats,
    ) -> u64 {
        let header = || {
            headers
                .get(&MISS_BYTES_NAME)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let orca = || self.report(headers);
        let (bytes, from) = match source {
            WorkSource::Header => (header(), Origin::Header),
            WorkSource::Orca => (orca(), Origin::Orca),
            WorkSource::Shadow => (shadow, Origin::Shadow),
            WorkSource::Auto => match header() {
                Some(b) => (Some(b), Origin::Header),
                None => match orca() {
                    Some(b) => (Some(b), Origin::Orca),
                    None => (shadow, Origin::Shadow),
                },
            },
        };
        let from = if bytes.is_some() { from } else { Origin::None };
        self.by_source[from as usize].increment(1);
        if matches!(from, Origin::Header | Origin::Orca) {
            replica.add_reported_miss(bytes.unwrap_or(0));
        }
        bytes.unwrap_or(0)
    }

    /// The replica's backlog in the answer's ORCA report (`named_metrics.backlog`), if it
    /// has a readable, non-negative one (a malformed report is counted once, by
    /// the feedback hook, when it reads the miss bytes).
    pub fn backlog(headers: &HeaderMap) -> Option<u64> {
        let value = headers.get(&REPORT_NAME)?;
        match load_report::find(value.as_bytes(), load_report::BACKLOG) {
            Ok(Some(v)) if v >= 0.0 && v.is_finite() => Some(v.round() as u64),
            _ => None,
        }
    }

    /// The miss bytes of the answer's ORCA report, if it has a readable one with them; a
    /// report that cannot be read is counted and ignored.
    fn report(&self, headers: &HeaderMap) -> Option<u64> {
        let value = headers.get(&REPORT_NAME)?;
        match load_report::find(value.as_bytes(), load_report::MISS_BYTES) {
            // Bytes are whole and non-negative: a fraction is rounded, a negative value
            // makes the report malformed. A binary report is not read (no report).
            Ok(Some(v)) if v >= 0.0 => Some(v.round() as u64),
            Ok(None) | Err(load_report::ReportError::Binary) => None,
            Ok(Some(_)) | Err(_) => {
                self.malformed.increment(1);
                None
            }
        }
    }
}

impl Hook for Feedback {
    fn on_answer(&self, _ctx: &Ctx, shard: &Shard, attempt: &Attempt, answer: &Answer) {
        let choice = &attempt.choice;
        if self.reports {
            if let Some(backlog) = Self::backlog(&answer.headers) {
                shard.slots.record_report(choice.index, backlog);
            }
        }
        if let Some(source) = self.work {
            // A backend with no bytes from the chosen source still costs the fixed part.
            let miss = self.bytes(
                source,
                &answer.headers,
                attempt.shadow_miss,
                &choice.replica.stats,
            );
            shard.record_work(choice.index, miss);
        }
    }
}
