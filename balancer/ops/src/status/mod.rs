//! The status page, `GET /admin/status`: what an operator asks first ("is the table working
//! right now?") answered on one self-refreshing HTML page with small charts of the last ten
//! minutes, as HAProxy's stats page answers it for HAProxy.
//!
//! * [`history`]: a sample of the balancer's typed counters
//!   ([`balancer_server::stats::Stats`]) every five seconds, ten minutes kept. [`page`]:
//!   the HTML and SVG. [`login`]: the form that sets the admin cookie, so a browser can pass
//!   the token.
//! * The "now" figures span the last 15 s: a fresh sample at page time against the newest
//!   stored one at least that old (or the balancer's start, all zeros, while it is younger
//!   than that). Requests in flight and queued, health and the table are the snapshot's.
//! * Cost: one snapshot every five seconds, one more per page view; nothing on the request
//!   path.

pub mod history;
pub mod login;
pub mod page;

use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use balancer_server::stats::{ReplicaStat, Stats};

use self::history::{Interval, Sample, SAMPLE_EVERY};
use self::page::{Chart, Page, ReplicaRow, TableBox, Unit};
use crate::App;

/// Seconds the page's "now" figures span (the charts show the longer run).
const WINDOW: f64 = 15.0;

/// Records a sample of the balancer's counters into the page's history (the background
/// ticker calls it every [`SAMPLE_EVERY`]).
pub fn record_sample(app: &Arc<App>) {
    app.status.record(Sample::of(&app.lb.stats()));
}

/// `GET /admin/status`. Built on a blocking thread: reading the counters back and writing
/// the page take milliseconds that the request path's workers should not wait behind.
pub async fn status_page(AxState(app): AxState<Arc<App>>) -> Response {
    let html = match tokio::task::spawn_blocking(move || page::render(&build_page(&app))).await {
        Ok(html) => html,
        Err(e) => {
            return balancer_server::pipeline::json_error(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("the status page failed: {e}"),
            )
        }
    };
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

/// The page's data from a fresh snapshot and the history.
pub fn build_page(app: &App) -> Page {
    let stats = app.lb.stats();
    let now = Sample::of(&stats);
    app.status.with(|samples| {
        let from = samples
            .iter()
            .rev()
            .find(|s| s.at <= now.at - WINDOW)
            .cloned()
            .unwrap_or_else(|| app.status.start());
        let window = Interval {
            from: &from,
            to: &now,
        };
        let replicas: Vec<ReplicaRow> = stats
            .replicas
            .iter()
            .map(|r| row(&stats, r, &window))
            .collect();
        let table = stats.table.as_ref().map(|t| TableBox {
            version: t.version,
            hash: t.content_hash.clone(),
            age: Some((now.at - t.loaded_at).max(0.0)),
            ramp_progress: t.ramp_progress,
        });
        let live = replicas.iter().filter(|r| r.state == "up").count().max(1);
        Page {
            policy: stats.policy.to_owned(),
            load: stats.load.to_owned(),
            window: window.seconds(),
            refresh: SAMPLE_EVERY.as_secs(),
            flash_source: window.flash_shares().map(|(_, s)| s.name()),
            table,
            overflow: window.overflow_share(),
            blind: window.blind_share(),
            reasons: window.reason_rates(),
            p99: window.p99(None),
            charts: charts(samples, &now, &replicas, live),
            replicas,
        }
    })
}

/// One replica's row over the page's window.
fn row(stats: &Stats, r: &ReplicaStat, window: &Interval<'_>) -> ReplicaRow {
    let c = &r.counters;
    let shares = window.flash_shares();
    ReplicaRow {
        name: c.name.clone(),
        shard: (stats.shards > 1).then_some(r.shard),
        address: r.address.clone(),
        state: r.state(),
        in_flight: r.in_flight,
        queued: r.queued,
        rate: window.rate(&c.name),
        flash_share: shares
            .and_then(|(s, _)| s.into_iter().find(|(n, _)| *n == c.name).map(|(_, v)| v)),
        flash_rate: window.flash_rate(&c.name).0,
        reported_miss_total: (c.reported_miss > 0).then_some(c.reported_miss as f64),
        p99: window.p99(Some(&c.name)),
        requests_total: c.requests() as f64,
    }
}

/// Each replica's flash share in every interval (shares computed once per interval).
fn flash_series(
    pairs: &[Interval<'_>],
    now: &Sample,
    replicas: &[ReplicaRow],
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = replicas
        .iter()
        .map(|r| (r.name.clone(), Vec::new()))
        .collect();
    for i in pairs {
        let Some((shares, _)) = i.flash_shares() else {
            continue;
        };
        for (name, share) in shares {
            if let Some((_, pts)) = series.iter_mut().find(|(n, _)| *n == name) {
                pts.push((now.at - i.to.at, share));
            }
        }
    }
    series
}

/// The ten-minute charts, one point per sampling interval.
fn charts(
    samples: &std::collections::VecDeque<Sample>,
    now: &Sample,
    replicas: &[ReplicaRow],
    live: usize,
) -> Vec<Chart> {
    let pairs: Vec<Interval<'_>> = samples
        .iter()
        .zip(samples.iter().skip(1))
        .map(|(from, to)| Interval { from, to })
        .collect();
    let age = |i: &Interval<'_>| now.at - i.to.at;
    let per_replica = |f: &dyn Fn(&Interval<'_>, &str) -> Option<f64>| {
        replicas
            .iter()
            .map(|r| {
                let pts = pairs
                    .iter()
                    .filter_map(|i| f(i, &r.name).map(|v| (age(i), v)))
                    .collect();
                (r.name.clone(), pts)
            })
            .collect::<Vec<_>>()
    };
    let whole = |name: &str, f: &dyn Fn(&Interval<'_>) -> Option<f64>| {
        let pts = pairs
            .iter()
            .filter_map(|i| f(i).map(|v| (age(i), v)))
            .collect();
        (name.to_owned(), pts)
    };
    vec![
        Chart {
            title: "Answers per second, by replica".into(),
            unit: Unit::Number,
            series: per_replica(&|i, n| Some(i.rate(n))),
            reference: None,
        },
        Chart {
            title: "Share of the flash bytes, by replica".into(),
            unit: Unit::Share,
            series: flash_series(&pairs, now, replicas),
            reference: Some((1.0 / live as f64, "an even share".into())),
        },
        Chart {
            title: "Upstream p99 (histogram bucket bound)".into(),
            unit: Unit::Seconds,
            series: vec![whole("all replicas", &|i| {
                i.p99(None).filter(|v| v.is_finite())
            })],
            reference: None,
        },
        Chart {
            title: "Overflow share of routed queries".into(),
            unit: Unit::Share,
            series: vec![
                whole("overflow (all)", &|i| i.overflow_share().map(|o| o.0)),
                whole("stall guard", &|i| i.overflow_share().map(|o| o.1)),
            ],
            reference: None,
        },
    ]
}
