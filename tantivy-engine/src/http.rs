//! The server's HTTP API, tantivy-cli's `serve` shape: `GET /api/?q=<query>&nhits=<k>` (or
//! `k=`, ballot's name) answers `{"q", "num_hits", "hits": [{"score", "id"}]}`; `GET
//! /healthz` answers 200 while serving. A missing or empty `q` parameter, a bad `nhits` or a
//! query string that does not decode is a 400, another path a 404 and another method a 405,
//! each with a JSON `error`; a failed index read is a 500 (the balancer retries it
//! elsewhere).
//!
//! Searches block (page faults on the mapped index), so each runs on tokio's blocking pool,
//! whose size bounds the searches in flight; the async workers only parse and serialize.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::search::Engine;

/// Results per query when the request names none (tantivy-cli's default).
pub const DEFAULT_HITS: usize = 10;

/// The parameters of `/api/`.
#[derive(Debug, Deserialize)]
struct ApiParams {
    q: Option<String>,
    nhits: Option<String>,
    k: Option<String>,
}

/// The server's routes over `engine`.
pub fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/api", get(api))
        .route("/api/", get(api))
        .route(
            "/healthz",
            get(|| async { Json(json!({"status": "serving"})) }),
        )
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint (GET /api/?q=)") })
        .method_not_allowed_fallback(|| async {
            error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served")
        })
        .with_state(engine)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

async fn api(
    State(engine): State<Arc<Engine>>,
    params: Result<Query<ApiParams>, QueryRejection>,
) -> Response {
    let Query(params) = match params {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad query string: {e}")),
    };
    let Some(q) = params.q.filter(|q| !q.trim().is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "missing query parameter q");
    };
    let k = match params.nhits.or(params.k).map(|v| v.parse::<usize>()) {
        None => DEFAULT_HITS,
        Some(Ok(k)) if (1..=crate::search::MAX_HITS).contains(&k) => k,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "nhits must be a number from 1 to {}",
                    crate::search::MAX_HITS
                ),
            )
        }
    };
    let query = q.clone();
    match tokio::task::spawn_blocking(move || engine.search(&query, k)).await {
        Ok(Ok(answer)) => Json(json!({
            "q": q,
            "num_hits": answer.num_hits,
            "hits": answer.hits,
        }))
        .into_response(),
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("search failed: {e:#}"),
        ),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("search failed: {e}"),
        ),
    }
}
