//! What one answered query cost its replica in flash bytes, for the `work` load: read from
//! the replica's `x-ballot-miss-bytes` header, from the `request_cost.miss_bytes` entry of
//! its ORCA load report ([`data::load_report`]), or estimated by the balancer's shadow cache
//! of that replica ([`crate::shadow`]), as `work_source` says ([`WorkSource`]).
//!
//! Every answer is counted by where its bytes came from (`ballot_work_source_total`); a
//! report that cannot be read is ignored and counted (`ballot_load_reports_malformed_total`),
//! never failing the answer it came with. Bytes a replica reported, by either form, add up
//! per replica in `ballot_reported_miss_bytes_total`, beside the shadow estimate's
//! `ballot_shadow_miss_bytes_total`, so the two can be compared on any backend that reports.

use axum::http::{HeaderMap, HeaderName};
use balancer::load::WorkSource;
use data::load_report;
use metrics::Counter;

use crate::metrics::{self as m, ReplicaMetrics};

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

/// Reads each answer's flash bytes from where `work_source` says.
pub struct WorkMeter {
    source: WorkSource,
    by_source: [Counter; Origin::ALL.len()],
    malformed: Counter,
}

impl WorkMeter {
    /// A meter for `source`.
    pub fn new(source: WorkSource) -> Self {
        WorkMeter {
            source,
            by_source: Origin::ALL.map(|f| metrics::counter!(m::WORK_SOURCE, "source" => f.name())),
            malformed: metrics::counter!(m::LOAD_REPORTS_MALFORMED),
        }
    }

    /// The flash bytes of the answer with `headers` from `replica`, whose shadow cache
    /// estimated `shadow` (`None`: no shadow caches, or a query routed without terms);
    /// 0 when the chosen source has none.
    pub fn bytes(&self, headers: &HeaderMap, shadow: Option<u64>, replica: &ReplicaMetrics) -> u64 {
        let header = || {
            headers
                .get(&MISS_BYTES_NAME)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let orca = || self.report(headers);
        let (bytes, from) = match self.source {
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
            replica.reported_miss_bytes.increment(bytes.unwrap_or(0));
        }
        bytes.unwrap_or(0)
    }

    /// The replica's backlog in the answer's ORCA report (`named_metrics.backlog`), if it
    /// has a readable, non-negative one (a malformed report is counted once, by
    /// [`WorkMeter::bytes`], when that reads it).
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
