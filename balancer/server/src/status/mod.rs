//! The status page, `GET /admin/status`: what an operator asks first ("is the table working
//! right now?") answered on one self-refreshing HTML page with small charts of the last ten
//! minutes, as HAProxy's stats page answers it for HAProxy.
//!
//! * [`prom_text`]: the balancer's own `/metrics` text read back, so the page shows the
//!   counters a scraper sees. [`history`]: a sample of them every five seconds, ten minutes
//!   kept. [`page`]: the HTML and SVG. [`login`]: the form that sets the admin cookie, so a
//!   browser can pass the token.
//! * The "now" figures span the last 15 s: a fresh sample at page time against the newest
//!   stored one at least that old (or the balancer's start, all zeros, while it is younger
//!   than that). Requests in
//!   flight and queued, health and the table are read from the routing state directly.
//! * Cost: one `/metrics` render every five seconds, one more per page view; nothing on the
//!   request path.

pub mod history;
pub mod login;
pub mod page;
pub mod prom_text;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State as AxState;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use self::history::{Interval, Sample, SAMPLE_EVERY};
use self::page::{Chart, Page, ReplicaRow, TableBox, Unit};
use crate::App;

/// Seconds the page's "now" figures span (the charts show the longer run).
const WINDOW: f64 = 15.0;

/// Unix time now, seconds.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A sample of the balancer's counters now.
pub fn take_sample(app: &App) -> Sample {
    Sample::from_text(unix_now(), &app.prom.render())
}

/// Records a sample into the page's history on a blocking thread (the background ticker
/// calls it every [`SAMPLE_EVERY`]).
pub fn record_sample(app: &Arc<App>) {
    let app = Arc::clone(app);
    tokio::task::spawn_blocking(move || app.status.record(take_sample(&app)));
}

/// `GET /admin/status`. Built on a blocking thread: reading the counters back and writing
/// the page take milliseconds that the request path's workers should not wait behind.
pub async fn status_page(AxState(app): AxState<Arc<App>>) -> Response {
    let html = match tokio::task::spawn_blocking(move || page::render(&build_page(&app))).await {
        Ok(html) => html,
        Err(e) => {
            return crate::proxy::json_error(
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

/// The page's data from the routing state, a fresh sample and the history.
pub fn build_page(app: &App) -> Page {
    let now = take_sample(app);
    let state = &app.state;
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
        let shares = window.flash_shares();
        // Every shard's replicas (one proxy without `[shards]`), shard by shard.
        let sharded = app.fanout.is_some();
        let replicas = app
            .proxies()
            .enumerate()
            .flat_map(|(shard, proxy)| {
                let state = &proxy.state;
                let members = state.members.load_full();
                let shares = &shares;
                let window = &window;
                let now = &now;
                (0..members.slots.len()).filter_map(move |i| {
                    let r = members.slots[i].as_ref()?;
                    let counters = now.of(&r.name);
                    let (flash_rate, _) = window.flash_rate(&r.name);
                    Some(ReplicaRow {
                        name: r.name.clone(),
                        shard: sharded.then_some(shard),
                        address: r.address.clone(),
                        state: if r.is_drained() {
                            "drained"
                        } else if r.is_healthy() {
                            "up"
                        } else {
                            "ejected"
                        },
                        in_flight: state.slots.counts.count(i),
                        queued: state.slots.queued(i),
                        rate: window.rate(&r.name),
                        flash_share: shares.as_ref().and_then(|(s, _)| {
                            s.iter().find(|(n, _)| *n == r.name).map(|(_, v)| *v)
                        }),
                        flash_rate,
                        reported_miss_total: counters.map(|c| c.reported_miss).filter(|&b| b > 0.0),
                        p99: window.p99(Some(&r.name)),
                        requests_total: counters.map_or(0.0, |c| c.requests),
                    })
                })
            })
            .collect::<Vec<_>>();
        let table = state.routing().table.as_ref().map(|t| TableBox {
            version: t.version,
            hash: crate::state::hash_hex(t.content_hash),
            age: now.table_loaded_at.map(|at| (now.at - at).max(0.0)),
            ramp_progress: t.progress(),
        });
        let live = replicas.iter().filter(|r| r.state == "up").count().max(1);
        Page {
            policy: state.kind.name().to_owned(),
            load: state.cfg.load.name().to_owned(),
            window: window.seconds(),
            refresh: SAMPLE_EVERY.as_secs(),
            flash_source: shares.as_ref().map(|(_, s)| s.name()),
            table,
            overflow: window.overflow_share(),
            reasons: window.reason_rates(),
            p99: window.p99(None),
            charts: charts(samples, &now, &replicas, live),
            replicas,
        }
    })
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
