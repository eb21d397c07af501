//! The admin listener: the bearer-token admin API (table reload, replica membership, drain
//! and enable) plus the unauthenticated `/metrics` and `/healthz`, kept off the client port
//! the way HAProxy's stats socket and Envoy's admin interface are.
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz`, `GET /metrics` | liveness; Prometheus text |
//! | `GET /admin/table` | table version, content hash, size and ramp progress |
//! | `POST /admin/table` | `{"path": ...}` or a Parquet body: validate, then ramp in (`?check=true`: validate only) |
//! | `GET /admin/table/parquet` | the newest table as a Parquet file (`x-ballot-table-version`) |
//! | `GET /admin/replicas` | members with health, drain and in-flight |
//! | `POST /admin/replicas` | `{"name": ..., "address": ...}`: add |
//! | `DELETE /admin/replicas/{name}` | remove |
//! | `POST /admin/replicas/{name}/drain`, `.../enable` | stop or resume new queries |
//! | `GET /admin/status` | the status page ([`crate::status`]) |
//! | `GET /admin/explain?q=...` | how a query would be routed now ([`crate::explain`]) |
//! | `GET /admin/login`, `POST /admin/login`, `POST /admin/logout` | the browser's login |
//!
//! The `/admin/` routes but the login need `Authorization: Bearer <admin_token>` (or, for
//! `GET` and `HEAD`, the login cookie: [`crate::status::login`]), checked by a middleware
//! before any body byte is read (a request without the token gets its 401 at once, however
//! large its `Content-Length`), with a comparison whose time depends on neither the token's
//! bytes nor its length (both sides padded to [`MAX_TOKEN_BYTES`]). Bodies are read up to a
//! limit (`admin_max_upload_bytes` for tables, 64 KiB otherwise; 413 past it). A `{"path":
//! ...}` reload only reads files inside `tables_dir` ([`tables`](crate::tables)).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path as UrlPath, RawQuery, Request, State as AxState};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use serde::Deserialize;
use serde_json::json;

pub use crate::config::MAX_TOKEN_BYTES;
use crate::metrics as m;
use crate::proxy::json_error;
use crate::reload::{reload, ReloadError, Source};
use crate::state::MembershipError;
use crate::status::login::{cookie_session, MAX_FORM_BYTES};
use crate::tables::{read_in_dir, NOT_A_TABLE};
use crate::App;

/// The status page's path (a browser without the cookie is sent to the login form).
pub const STATUS_PATH: &str = "/admin/status";

/// Largest body of the small JSON admin requests.
const MAX_JSON_BODY: u64 = 64 << 10;

/// The admin token, padded once to [`MAX_TOKEN_BYTES`] for the comparison.
#[derive(Clone)]
pub struct Token {
    padded: [u8; MAX_TOKEN_BYTES],
    len: usize,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token `t` (at most [`MAX_TOKEN_BYTES`] bytes, checked by the config).
    pub fn new(t: &str) -> Option<Token> {
        let b = t.as_bytes();
        if b.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let mut padded = [0u8; MAX_TOKEN_BYTES];
        padded[..b.len()].copy_from_slice(b);
        Some(Token {
            padded,
            len: b.len(),
        })
    }

    /// Whether `given` is the token. Always compares all [`MAX_TOKEN_BYTES`] bytes and the
    /// lengths, without an early exit: its time tells nothing about the token.
    pub fn matches(&self, given: &[u8]) -> bool {
        let mut other = [0u8; MAX_TOKEN_BYTES];
        let n = given.len().min(MAX_TOKEN_BYTES);
        other[..n].copy_from_slice(&given[..n]);
        let mut diff = 0u8;
        for (a, b) in self.padded.iter().zip(other.iter()) {
            diff |= a ^ b;
        }
        let len_diff = (given.len() ^ self.len) as u64;
        std::hint::black_box(u64::from(std::hint::black_box(diff)) | len_diff) == 0
    }
}

/// Refuses an `/admin/` request without the right bearer token, before its body is read.
async fn require_token(AxState(app): AxState<Arc<App>>, req: Request, next: Next) -> Response {
    let Some(token) = &app.admin_token else {
        return json_error(
            StatusCode::UNAUTHORIZED,
            "the admin API is disabled: no admin token is configured",
        );
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let read_only = matches!(*req.method(), Method::GET | Method::HEAD);
    let authorized = match given {
        Some(given) => token.matches(given),
        // The login cookie opens the read-only views only (status::login).
        None if read_only => {
            cookie_session(req.headers()).is_some_and(|c| app.sessions.is_open(&c))
        }
        None => false,
    };
    if !authorized {
        if read_only && req.uri().path() == STATUS_PATH {
            return (StatusCode::SEE_OTHER, [(header::LOCATION, "/admin/login")]).into_response();
        }
        return json_error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    next.run(req).await
}

/// Reads `body` up to `limit` bytes: a declared `Content-Length` over the limit is refused
/// before anything is read.
async fn read_body(headers: &HeaderMap, body: Body, limit: u64) -> Result<Bytes, Response> {
    let too_large = || {
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let limited = http_body_util::Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(json_error(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )),
    }
}

/// The admin router.
pub fn router(app: Arc<App>) -> Router {
    let admin = Router::new()
        .route("/admin/table", get(table_status).post(post_table))
        .route("/admin/table/parquet", get(table_parquet))
        .route("/admin/replicas", get(list_replicas).post(add_replica))
        .route(
            "/admin/replicas/{name}",
            axum::routing::delete(remove_replica),
        )
        .route("/admin/replicas/{name}/drain", post(drain))
        .route("/admin/replicas/{name}/enable", post(enable))
        .route(STATUS_PATH, get(crate::status::status_page))
        .route("/admin/explain", get(crate::explain::explain_query))
        .route_layer(from_fn_with_state(Arc::clone(&app), require_token));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route(
            "/admin/login",
            get(crate::status::login::login_form)
                .post(crate::status::login::login)
                .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES)),
        )
        .route("/admin/logout", post(crate::status::login::logout))
        .merge(admin)
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
    let queued: u64 = app.proxies().map(|p| p.state.slots.queued_total()).sum();
    metrics::gauge!(m::QUEUED).set(queued as f64);
    for proxy in app.proxies() {
        let state = &proxy.state;
        for (i, rep) in state.members.load().slots.iter().enumerate() {
            let Some(rep) = rep else { continue };
            let in_flight = state.slots.counts.count(i) as f64;
            metrics::gauge!(m::IN_FLIGHT, "replica" => rep.name.clone()).set(in_flight);
            let queued = state.slots.queued(i) as f64;
            metrics::gauge!(m::REPLICA_QUEUED, "replica" => rep.name.clone()).set(queued);
            if let Some(shadow) = &proxy.shadow {
                let cached = shadow.cached_bytes(i) as f64;
                metrics::gauge!(m::SHADOW_CACHED_BYTES, "replica" => rep.name.clone()).set(cached);
            }
            let up = rep.is_healthy() && !rep.is_drained();
            metrics::gauge!(m::REPLICA_UP, "replica" => rep.name.clone()).set(if up {
                1.0
            } else {
                0.0
            });
        }
        state.tick();
    }
    let shadow_bytes: Option<u64> = app
        .proxies()
        .filter_map(|p| p.shadow.as_ref().map(|s| s.memory_bytes()))
        .reduce(|a, b| a + b);
    if let Some(bytes) = shadow_bytes {
        metrics::gauge!(m::SHADOW_MEMORY_BYTES).set(bytes as f64);
    }
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
            "content_hash": crate::state::hash_hex(t.content_hash),
            "replicas": t.replicas,
            "terms": t.terms,
            "votes": t.votes,
            "ramp_progress": t.progress(),
            "ramp_queries": t.ramp.as_ref().map_or(0, |r| r.len()),
            "trained_cache_bytes": t.current.trained_cache_bytes(),
            "cache_admission": app.state.cfg.cache_admission.map(|r| r.share()),
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

async fn table_status(AxState(app): AxState<Arc<App>>) -> Response {
    Json(table_json(&app)).into_response()
}

/// The newest table as the Parquet file it was validated from (re-encoded), so that a
/// retraining job can evaluate against exactly what serves.
async fn table_parquet(AxState(app): AxState<Arc<App>>) -> Response {
    match &app.state.routing().table {
        Some(t) => (
            [
                (
                    header::CONTENT_TYPE,
                    "application/vnd.apache.parquet".to_owned(),
                ),
                (
                    header::HeaderName::from_static("x-ballot-table-version"),
                    t.version.to_string(),
                ),
            ],
            Body::from(t.parquet.clone()),
        )
            .into_response(),
        None => json_error(
            StatusCode::NOT_FOUND,
            format!("policy `{}` serves no voting table", app.state.kind.name()),
        ),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TablePath {
    path: std::path::PathBuf,
}

/// A rejected path reload: counted, logged with its reason, answered with [`NOT_A_TABLE`].
fn not_a_table(requested: &std::path::Path, why: &str) -> Response {
    metrics::counter!(m::RELOAD_FAILURES).increment(1);
    tracing::warn!(
        path = %requested.display(),
        "table reload by path rejected, the old table keeps serving: {why}"
    );
    json_error(StatusCode::UNPROCESSABLE_ENTITY, NOT_A_TABLE)
}

/// Reads the table file of a `{"path": ...}` reload from `tables_dir`.
async fn read_table_file(app: &App, requested: std::path::PathBuf) -> Result<Vec<u8>, Response> {
    let cfg = &app.state.cfg.config;
    let Some(dir) = cfg.tables_dir.clone() else {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        return Err(json_error(
            StatusCode::FORBIDDEN,
            "reloads by path are off: no tables_dir is configured (send the table as the \
             request body instead)",
        ));
    };
    let limit = cfg.admin_max_upload_bytes;
    let path = requested.clone();
    match tokio::task::spawn_blocking(move || read_in_dir(&dir, &path, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(why)) => Err(not_a_table(&requested, &why)),
        Err(e) => Err(not_a_table(&requested, &format!("reader failed: {e}"))),
    }
}

/// Whether a `POST /admin/table` query string asks for a check only (`check=true`);
/// `Err` names what is wrong with it.
fn check_only(query: Option<&str>) -> Result<bool, String> {
    match query {
        None | Some("") => Ok(false),
        Some("check=true" | "check=1") => Ok(true),
        Some("check=false" | "check=0") => Ok(false),
        Some(other) => Err(format!(
            "unknown query `{other}`: POST /admin/table takes only check=true (validate, do \
             not switch)"
        )),
    }
}

async fn post_table(
    AxState(app): AxState<Arc<App>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let check = match check_only(query.as_deref()) {
        Ok(c) => c,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    if app.state.table_replicas().is_none() {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        let e = ReloadError::NoTable(app.state.kind.to_string());
        return json_error(StatusCode::CONFLICT, e.to_string());
    }
    if app
        .state
        .cfg
        .config
        .shards
        .iter()
        .any(|s| !s.tables.is_empty())
    {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        return json_error(
            StatusCode::CONFLICT,
            "each shard reads its own table ([shards] tables): replace the files and send \
             SIGHUP",
        );
    }
    let body = match read_body(&headers, body, app.state.cfg.config.admin_max_upload_bytes).await {
        Ok(b) => b,
        Err(r) => {
            metrics::counter!(m::RELOAD_FAILURES).increment(1);
            return r;
        }
    };
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
        || body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let (bytes, by_path) = if is_json {
        match serde_json::from_slice::<TablePath>(&body) {
            Ok(p) => match read_table_file(&app, p.path.clone()).await {
                Ok(bytes) => (bytes, Some(p.path)),
                Err(r) => return r,
            },
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
        (body.to_vec(), None)
    };
    drop(body);
    // Every shard takes the same table (without `[shards]`, the one): each compiles its
    // own copy of the bytes.
    let mut sources: Vec<Source> = app
        .proxies()
        .map(|_| Source::Bytes(bytes.clone()))
        .collect();
    drop(bytes);
    let source = sources.remove(0);
    if check {
        for (proxy, other) in app.proxies().skip(1).zip(sources) {
            if let Err(e) = crate::reload::check(Arc::clone(&proxy.state), other).await {
                return json_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
            }
        }
        return match crate::reload::check(Arc::clone(&app.state), source).await {
            Ok(checked) => Json(checked).into_response(),
            Err(e @ ReloadError::NoTable(_)) => json_error(StatusCode::CONFLICT, e.to_string()),
            Err(_) if by_path.is_some() => {
                json_error(StatusCode::UNPROCESSABLE_ENTITY, NOT_A_TABLE)
            }
            Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
        };
    }
    let first = reload(Arc::clone(&app.state), source).await;
    if first.is_ok() {
        for ((shard, proxy), other) in app.proxies().enumerate().skip(1).zip(sources) {
            // Shard 0 took the same bytes for the same replica count: a refusal here is
            // a fault of this balancer, not of the table.
            if let Err(e) = reload(Arc::clone(&proxy.state), other).await {
                tracing::error!("shard {shard} refused the table shard 0 took: {e}");
                return json_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("shard 0 took the table, shard {shard} refused it: {e}"),
                );
            }
        }
    }
    match first {
        Ok(loaded) => Json(json!({ "loaded": loaded, "table": table_json(&app) })).into_response(),
        Err(e @ ReloadError::NoTable(_)) => json_error(StatusCode::CONFLICT, e.to_string()),
        // The same answer as a missing file: the API tells nothing about what a path holds.
        Err(e) if by_path.is_some() => {
            if let Some(p) = &by_path {
                tracing::warn!(path = %p.display(), "table reload by path rejected: {e}");
            }
            json_error(StatusCode::UNPROCESSABLE_ENTITY, NOT_A_TABLE)
        }
        Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    }
}

async fn list_replicas(AxState(app): AxState<Arc<App>>) -> Response {
    let members = app.state.members.load();
    let mut list = Vec::new();
    for (shard, proxy) in app.proxies().enumerate() {
        let state = &proxy.state;
        let members = state.members.load();
        let present = members.slots.iter().enumerate();
        for (i, r) in present.filter_map(|(i, s)| s.as_ref().map(|r| (i, r))) {
            list.push(json!({
                "index": i,
                "shard": shard,
                "name": r.name,
                "address": r.address,
                "healthy": r.is_healthy(),
                "drained": r.is_drained(),
                "checks": r.checks(),
                "health_changed_at_check": r.health_changed_at_check(),
                "in_flight": state.slots.counts.count(i),
                "queued": state.slots.queued(i),
                "others_backlog": state.slots.others(i),
                "shadow_cached_bytes": proxy.shadow.as_ref().map(|s| s.cached_bytes(i)),
            }));
        }
    }
    Json(json!({
        "shards": app.fanout.as_ref().map_or(1, |f| f.count()),
        "slots": members.slots.len(),
        "replicas": list,
        "load": app.state.cfg.load.name(),
        "work_source": app.state.cfg.config.work_source.name(),
        "shadow": app.proxy.shadow.as_ref().map(|s| s.summary()),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewReplica {
    name: String,
    address: String,
}

async fn add_replica(AxState(app): AxState<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let body = match read_body(&headers, body, MAX_JSON_BODY).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let new: NewReplica = match serde_json::from_slice(&body) {
        Ok(n) => n,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"name\": ..., \"address\": \"host:port\"}}: {e}"),
            )
        }
    };
    if app.fanout.is_some() {
        return json_error(
            StatusCode::CONFLICT,
            "a sharded balancer's replicas and shards are set in its config file",
        );
    }
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
) -> Response {
    if app.fanout.is_some() {
        return json_error(
            StatusCode::CONFLICT,
            "a sharded balancer's replicas and shards are set in its config file",
        );
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

fn set_drained(app: &App, name: &str, drained: bool) -> Response {
    for proxy in app.proxies() {
        if let Some((index, rep)) = proxy.state.members.load().find(name) {
            rep.set_drained(drained);
            return Json(json!({ "name": name, "index": index, "drained": drained }))
                .into_response();
        }
    }
    json_error(StatusCode::NOT_FOUND, format!("no replica named `{name}`"))
}

async fn drain(AxState(app): AxState<Arc<App>>, UrlPath(name): UrlPath<String>) -> Response {
    set_drained(&app, &name, true)
}

async fn enable(AxState(app): AxState<Arc<App>>, UrlPath(name): UrlPath<String>) -> Response {
    set_drained(&app, &name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comparison_checks_bytes_and_length() {
        let t = Token::new("s3cret").expect("short token");
        assert!(t.matches(b"s3cret"));
        for bad in [
            &b""[..],
            b"s3cre",
            b"s3cret\0",
            b"s3creT",
            b"s3cretX",
            &[b'x'; 300],
        ] {
            assert!(!t.matches(bad), "{bad:?}");
        }
        let long = "a".repeat(MAX_TOKEN_BYTES);
        let t = Token::new(&long).expect("longest token");
        assert!(t.matches(long.as_bytes()));
        assert!(!t.matches(format!("{long}a").as_bytes()));
        assert!(Token::new(&format!("{long}a")).is_none());
    }
}
