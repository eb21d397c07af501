//! The replica's HTTP API (axum 0.8): `GET /search`, `/healthz`, `/metrics`, `/stats`, served
//! by the shared hardened HTTP/1 loop of the `serving` crate.
//!
//! Query evaluation blocks (flash reads, emulated bandwidth), so each search runs on tokio's
//! blocking pool and the async workers only parse, admit and serialize. The pool has at most
//! [`search_threads`] threads (`--max-inflight`, capped at [`MAX_SEARCH_THREADS`]); admitted
//! searches beyond that queue for a thread, holding no lists. Admission control is load
//! shedding in the style of Google's SRE book ("Handling overload"), twice: past
//! `max_inflight` concurrent searches a request is refused at once with 503 rather than
//! queued, and a search whose lists would take the bytes held by searches in flight past
//! the budget waits briefly for them and is then refused with 503 ([`crate::budget`]), so a
//! balancer can retry elsewhere while latency and memory stay bounded. The query string is
//! decoded by [`data::query`], the balancer's decoder, so every malformed input gets its
//! own 400 with a JSON error and both servers agree on what the query was. A search may
//! carry the balancer's cache hint ([`data::query::CacheHint`]): the terms whose lists a
//! miss reads without caching.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use data::query::{CacheHint, MISS_BYTES_HEADER, NO_CACHE_HEADER, NO_CACHE_WITHIN_HEADER};
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;
use serde_json::json;

use crate::budget::InflightBudget;
use crate::metrics::StatsSnapshot;
use crate::query::{CacheCounts, Engine, QueryError, MAX_K, MAX_QUERY_BYTES};

/// Most threads of the blocking pool that runs searches, whatever `--max-inflight` says:
/// enough to keep a flash device's queue full, few enough that threads never number in the
/// hundreds.
pub const MAX_SEARCH_THREADS: u64 = 64;

/// Threads for the blocking pool of a replica admitting `max_inflight` searches (give it to
/// tokio's `max_blocking_threads`).
pub fn search_threads(max_inflight: u64) -> usize {
    max_inflight.clamp(1, MAX_SEARCH_THREADS) as usize
}

/// Serving state reported by `/healthz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Health {
    /// Not yet serving (503).
    Starting = 0,
    /// Serving (200).
    Serving = 1,
    /// Shutting down, finishing in-flight requests (503).
    Draining = 2,
}

/// Everything a handler needs.
pub struct AppState {
    /// The search engine.
    pub engine: Arc<Engine>,
    /// This replica's name, echoed in every answer.
    pub replica: String,
    /// Concurrent searches admitted before shedding.
    pub max_inflight: u64,
    /// Bytes of postings lists that searches in flight may hold.
    pub budget: InflightBudget,
    /// Prometheus rendering, when a recorder is installed.
    pub prometheus: Option<PrometheusHandle>,
    health: AtomicU8,
}

impl AppState {
    /// A state in [`Health::Starting`].
    pub fn new(
        engine: Arc<Engine>,
        replica: String,
        max_inflight: u64,
        budget: InflightBudget,
        prometheus: Option<PrometheusHandle>,
    ) -> Self {
        AppState {
            engine,
            replica,
            max_inflight,
            budget,
            prometheus,
            health: AtomicU8::new(Health::Starting as u8),
        }
    }

    /// Sets the health reported by `/healthz`.
    pub fn set_health(&self, h: Health) {
        self.health.store(h as u8, Ordering::SeqCst);
    }

    fn health(&self) -> Health {
        match self.health.load(Ordering::SeqCst) {
            1 => Health::Serving,
            2 => Health::Draining,
            _ => Health::Starting,
        }
    }

    fn snapshot(&self) -> StatsSnapshot {
        let cache = &self.engine.cache;
        StatsSnapshot {
            inflight_bytes: self.budget.held(),
            inflight_bytes_peak: self.budget.peak(),
            inflight_bytes_limit: self.budget.limit(),
            ..self
                .engine
                .stats
                .snapshot(cache.used_bytes(), cache.capacity())
        }
    }
}

/// The router.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/search", get(search))
        .route("/healthz", get(healthz))
        .route("/metrics", get(prometheus))
        .route("/stats", get(stats))
        .with_state(state)
}

/// Serves on `listener` with the hardened HTTP/1 loop of [`serving`] (header and idle
/// timeouts, the connection cap of `gate`) until `stop` turns true: `/healthz` then answers
/// 503 `draining`, idle connections and half-sent requests close at once, and this returns
/// once the requests in flight have finished.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    gate: Arc<serving::Gate>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let svc = TowerToHyperService::new(router(state.clone()));
    state.set_health(Health::Serving);
    let drain_state = state.clone();
    let mut watch_stop = stop.clone();
    tokio::spawn(async move {
        if watch_stop.wait_for(|&s| s).await.is_ok() {
            drain_state.set_health(Health::Draining);
        }
    });
    serving::serve(gate, listener, move |_peer| svc.clone(), stop).await;
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    let msg = msg.into();
    (
        status,
        Json(json!({ "error": msg, "status": status.as_u16() })),
    )
        .into_response()
}

#[derive(Serialize)]
struct SearchResponse<'a> {
    query: String,
    terms: Vec<String>,
    total_hits: u64,
    doc_ids: Vec<u32>,
    cache: CacheCounts,
    took_us: u64,
    replica: &'a str,
    /// The shard of a document-partitioned index this replica serves (none: the whole
    /// index), which a sharded balancer checks against its config.
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<crate::index::Shard>,
}

/// `q` and `k` from a raw query string, or the reason they are invalid.
fn parse_params(raw: Option<&str>) -> Result<(String, usize), String> {
    let q = data::query::extract_q(raw, MAX_QUERY_BYTES).map_err(|e| e.to_string())?;
    let Some(k) = data::query::params(raw.unwrap_or("")).find(|p| p.key == "k") else {
        return Ok((q, data::query::DEFAULT_K));
    };
    let bad = || {
        let shown: String = k.raw.chars().take(24).collect();
        format!("k must be a number from 0 to {MAX_K}, got {shown:?}")
    };
    let n: usize = k.value(24).map_err(|_| bad())?.parse().map_err(|_| bad())?;
    if n > MAX_K {
        return Err(format!("k must be at most {MAX_K}, got {n}"));
    }
    Ok((q, n))
}

/// Releases an admission slot when the blocking search ends (even if the client left).
struct Admitted(Arc<Engine>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.stats.leave();
    }
}

async fn search(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let start = Instant::now();
    let stats = &state.engine.stats;
    let hint = CacheHint::read(
        headers.get(NO_CACHE_HEADER).map(HeaderValue::as_bytes),
        headers
            .get(NO_CACHE_WITHIN_HEADER)
            .map(HeaderValue::as_bytes),
        state.engine.cache.capacity(),
    );
    let parsed = hint.and_then(|hint| Ok((parse_params(raw.as_deref())?, hint)));
    let ((q, k), hint) = match parsed {
        Ok(p) => p,
        Err(msg) => {
            stats.error("bad_request");
            return error(StatusCode::BAD_REQUEST, msg);
        }
    };
    if hint.ignored() {
        stats.hint_ignored();
    }
    if !stats.enter(state.max_inflight) {
        stats.shed();
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("overloaded: {} searches in flight", state.max_inflight),
        );
    }
    let guard = Admitted(state.engine.clone());
    let plan = match state.engine.plan(&q, &hint) {
        Ok(plan) => plan,
        Err(e) => {
            stats.query();
            stats.error("bad_request");
            return error(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let reservation = match state.budget.reserve(plan.need()).await {
        Ok(r) => r,
        Err(e) => {
            stats.shed_over_budget();
            return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
        }
    };
    stats.query();
    let engine = state.engine.clone();
    let result = tokio::task::spawn_blocking(move || {
        let _guard = guard;
        let _reservation = reservation;
        let ran = Instant::now();
        engine.run(plan, k).map(|a| (a, ran.elapsed()))
    })
    .await;
    match result {
        Ok(Ok((a, service))) => {
            // The flash bytes this query read here, for a balancer that bounds work
            // (`load = "work"`): it reads the header without parsing the body.
            let miss_bytes = a.cache.miss_bytes;
            let mut resp = Json(SearchResponse {
                query: q,
                terms: a.terms,
                total_hits: a.total_hits,
                doc_ids: a.doc_ids,
                cache: a.cache,
                took_us: start.elapsed().as_micros() as u64,
                replica: &state.replica,
                shard: state.engine.store.directory().manifest.shard,
            })
            .into_response();
            // The same, and the backlog, as an ORCA load report (`endpoint-load-metrics`),
            // which any balancer that reads ORCA understands.
            let mut report = String::with_capacity(80);
            let service_ms = service.as_secs_f64() * 1e3;
            data::load_report::write_text(
                &mut report,
                miss_bytes,
                service_ms,
                stats.inflight_now(),
            );
            let headers = resp.headers_mut();
            headers.insert(MISS_BYTES_HEADER, HeaderValue::from(miss_bytes));
            if let Ok(v) = HeaderValue::from_str(&report) {
                headers.insert(data::load_report::HEADER, v);
            }
            resp
        }
        Ok(Err(QueryError::BadRequest(msg))) => {
            stats.error("bad_request");
            error(StatusCode::BAD_REQUEST, msg)
        }
        Ok(Err(e @ QueryError::Unavailable(_))) => {
            stats.error("unavailable");
            error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
        Err(e) => {
            stats.error("internal");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("search failed: {e}"),
            )
        }
    }
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    match state.health() {
        Health::Serving => (StatusCode::OK, "ok\n").into_response(),
        Health::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response(),
        Health::Draining => (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response(),
    }
}

async fn prometheus(State(state): State<Arc<AppState>>) -> Response {
    match &state.prometheus {
        Some(handle) => {
            let stats = &state.engine.stats;
            stats.cache_bytes(state.engine.cache.used_bytes());
            stats.inflight_bytes(state.budget.held(), state.budget.peak());
            (
                [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                handle.render(),
            )
                .into_response()
        }
        None => error(StatusCode::NOT_FOUND, "no metrics recorder installed"),
    }
}

async fn stats(State(state): State<Arc<AppState>>) -> Response {
    let snap = state.snapshot();
    let mut v = serde_json::to_value(&snap).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("replica".into(), json!(state.replica));
        obj.insert("eviction".into(), json!(state.engine.cache.kind().name()));
        obj.insert(
            "io_mode".into(),
            json!(state.engine.store.mode().to_string()),
        );
    }
    Json(v).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_validated() {
        assert_eq!(parse_params(Some("q=a+b%20c&k=3")), Ok(("a b c".into(), 3)));
        assert_eq!(parse_params(Some("q=x")), Ok(("x".into(), 10)));
        assert!(parse_params(None).unwrap_err().contains("missing"));
        assert!(parse_params(Some("q=")).unwrap_err().contains("empty"));
        assert!(parse_params(Some("q=%zz")).unwrap_err().contains("percent"));
        assert!(parse_params(Some("q=%e9")).unwrap_err().contains("UTF-8"));
        assert!(parse_params(Some("q=a&k=x"))
            .unwrap_err()
            .contains("number"));
        assert!(parse_params(Some("q=a&k=%zz"))
            .unwrap_err()
            .contains("number"));
        assert_eq!(parse_params(Some("k=3&k=x&q=a")), Ok(("a".into(), 3)));
        assert!(parse_params(Some("q=a&k=1001"))
            .unwrap_err()
            .contains("at most"));
        let long = format!("q={}", "a".repeat(MAX_QUERY_BYTES + 1));
        assert!(parse_params(Some(&long)).unwrap_err().contains("bytes"));
    }
}
