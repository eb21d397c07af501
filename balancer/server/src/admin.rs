//! The admin listener: the bearer-token admin API (table reload, replica membership, drain
//! and enable) plus the unauthenticated `/metrics` and `/healthz`, kept off the client port
//! the way HAProxy's stats socket and Envoy's admin interface are.
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz`, `GET /metrics` | liveness; Prometheus text |
//! | `GET /admin/table` | table version, size and ramp progress |
//! | `POST /admin/table` | `{"path": ...}` or a Parquet body: validate, then ramp in |
//! | `GET /admin/replicas` | members with health, drain and in-flight |
//! | `POST /admin/replicas` | `{"name": ..., "address": ...}`: add |
//! | `DELETE /admin/replicas/{name}` | remove |
//! | `POST /admin/replicas/{name}/drain`, `.../enable` | stop or resume new queries |

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path as UrlPath, State as AxState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper::body::Bytes;
use serde::Deserialize;
use serde_json::json;

use crate::metrics as m;
use crate::proxy::json_error;
use crate::reload::{reload, ReloadError, Source};
use crate::state::MembershipError;
use crate::App;

/// Largest accepted table upload.
const MAX_UPLOAD: usize = 1 << 30;

/// The 401 response for a request without the right token, or `None` if authorized.
fn unauthorized(app: &App, headers: &HeaderMap) -> Option<Response> {
    let Some(token) = app.state.cfg.admin_token.as_deref() else {
        return Some(json_error(
            StatusCode::UNAUTHORIZED,
            "the admin API is disabled: no admin token is configured",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Compare without an early exit on the first differing byte.
    let same = given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    (!same).then(|| json_error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token"))
}

/// The admin router.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route(
            "/admin/table",
            get(table_status)
                .post(post_table)
                .layer(DefaultBodyLimit::max(MAX_UPLOAD)),
        )
        .route("/admin/replicas", get(list_replicas).post(add_replica))
        .route(
            "/admin/replicas/{name}",
            axum::routing::delete(remove_replica),
        )
        .route("/admin/replicas/{name}/drain", post(drain))
        .route("/admin/replicas/{name}/enable", post(enable))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

/// JSON 404 for unknown paths.
pub async fn not_found() -> Response {
    json_error(StatusCode::NOT_FOUND, "no such path")
}

/// JSON 405 for a known path with the wrong method.
pub async fn method_not_allowed() -> Response {
    json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this path",
    )
}

async fn metrics(AxState(app): AxState<Arc<App>>) -> Response {
    for (i, rep) in app.state.members.load().slots.iter().enumerate() {
        let Some(rep) = rep else { continue };
        let in_flight = app.state.in_flight.count(i) as f64;
        metrics::gauge!(m::IN_FLIGHT, "replica" => rep.name.clone()).set(in_flight);
        let up = rep.is_healthy() && !rep.is_drained();
        metrics::gauge!(m::REPLICA_UP, "replica" => rep.name.clone()).set(if up {
            1.0
        } else {
            0.0
        });
    }
    app.state.tick();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.prom.render(),
    )
        .into_response()
}

fn table_json(app: &App) -> serde_json::Value {
    match &app.state.routing().table {
        Some(t) => json!({
            "policy": app.state.kind.name(),
            "version": t.version,
            "replicas": t.replicas,
            "terms": t.terms,
            "votes": t.votes,
            "ramp_progress": t.progress(),
            "ramp_queries": t.ramp.as_ref().map_or(0, |r| r.len()),
        }),
        None => json!({ "policy": app.state.kind.name(), "table": null }),
    }
}

/// The HTTP status of a refused membership change.
fn membership_status(e: &MembershipError) -> StatusCode {
    match e {
        MembershipError::Replica(_) => StatusCode::BAD_REQUEST,
        MembershipError::Exists(_) | MembershipError::NoSlot(_) | MembershipError::TooMany => {
            StatusCode::CONFLICT
        }
        MembershipError::NotFound(_) => StatusCode::NOT_FOUND,
        MembershipError::Policy(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

async fn table_status(AxState(app): AxState<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    Json(table_json(&app)).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TablePath {
    path: std::path::PathBuf,
}

async fn post_table(AxState(app): AxState<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
        || body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let source = if is_json {
        match serde_json::from_slice::<TablePath>(&body) {
            Ok(p) => Source::Path(p.path),
            Err(e) => {
                metrics::counter!(m::RELOAD_FAILURES).increment(1);
                return json_error(
                    StatusCode::BAD_REQUEST,
                    format!("expected {{\"path\": \"...\"}} or a Parquet body: {e}"),
                );
            }
        }
    } else if body.is_empty() {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        return json_error(
            StatusCode::BAD_REQUEST,
            "empty body: send {\"path\": \"...\"} or a Parquet voting table",
        );
    } else {
        Source::Bytes(body.to_vec())
    };
    match reload(Arc::clone(&app.state), source).await {
        Ok(loaded) => Json(json!({ "loaded": loaded, "table": table_json(&app) })).into_response(),
        Err(e @ ReloadError::NoTable(_)) => json_error(StatusCode::CONFLICT, e.to_string()),
        Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    }
}

async fn list_replicas(AxState(app): AxState<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    let members = app.state.members.load();
    let list: Vec<_> = members
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|r| (i, r)))
        .map(|(i, r)| {
            json!({
                "index": i,
                "name": r.name,
                "address": r.address,
                "healthy": r.is_healthy(),
                "drained": r.is_drained(),
                "in_flight": app.state.in_flight.count(i),
            })
        })
        .collect();
    Json(json!({ "slots": members.slots.len(), "replicas": list })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewReplica {
    name: String,
    address: String,
}

async fn add_replica(AxState(app): AxState<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    let new: NewReplica = match serde_json::from_slice(&body) {
        Ok(n) => n,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"name\": ..., \"address\": \"host:port\"}}: {e}"),
            )
        }
    };
    match app.state.add_replica(&new.name, &new.address) {
        Ok(index) => {
            if let Some((_, rep)) = app.state.members.load().find(&new.name) {
                crate::health::spawn(Arc::clone(rep), app.state.cfg.config.health.clone());
            }
            (
                StatusCode::CREATED,
                Json(json!({ "index": index, "name": new.name, "address": new.address })),
            )
                .into_response()
        }
        Err(e) => json_error(membership_status(&e), e.to_string()),
    }
}

async fn remove_replica(
    AxState(app): AxState<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    match app.state.remove_replica(&name) {
        Ok(rep) => {
            metrics::gauge!(m::IN_FLIGHT, "replica" => rep.name.clone()).set(0.0);
            metrics::gauge!(m::REPLICA_UP, "replica" => rep.name.clone()).set(0.0);
            Json(json!({ "removed": name })).into_response()
        }
        Err(e) => json_error(membership_status(&e), e.to_string()),
    }
}

fn set_drained(app: &App, headers: &HeaderMap, name: &str, drained: bool) -> Response {
    if let Some(r) = unauthorized(app, headers) {
        return r;
    }
    match app.state.members.load().find(name) {
        Some((index, rep)) => {
            rep.set_drained(drained);
            Json(json!({ "name": name, "index": index, "drained": drained })).into_response()
        }
        None => json_error(StatusCode::NOT_FOUND, format!("no replica named `{name}`")),
    }
}

async fn drain(
    AxState(app): AxState<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    set_drained(&app, &headers, &name, true)
}

async fn enable(
    AxState(app): AxState<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    set_drained(&app, &headers, &name, false)
}
