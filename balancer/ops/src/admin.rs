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
//! bytes nor its length (both sides padded to [`MAX_TOKEN_BYTES`], compared by `subtle`).
//! Bodies are read by the request path's own reader ([`balancer_server::body`]) up to a
//! limit (`admin_max_upload_bytes` for tables, 64 KiB otherwise; 413 past it). A `{"path":
//! ...}` reload only reads files inside `tables_dir` ([`balancer_server::tables`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path as UrlPath, RawQuery, Request, State as AxState};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use balancer_server::pipeline::json_error;
use balancer_server::reload::{check, reload, ReloadError, Source};
use balancer_server::shard::MembershipError;
use balancer_server::stats::Stats;
use balancer_server::tables::{read_in_dir, NOT_A_TABLE};
use hyper::body::Bytes;
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;

pub use balancer_server::config::MAX_TOKEN_BYTES;
use balancer_server::metrics as m;

use crate::status::login::{cookie_session, MAX_FORM_BYTES};
use crate::App;

/// The status page's path (a browser without the cookie is sent to the login form).
pub const STATUS_PATH: &str = "/admin/status";

/// Largest body of the small JSON admin requests.
const MAX_JSON_BODY: u64 = 64 << 10;
/// Longest an admin request's body may take to arrive (a 4 GiB table at 15 MB/s).
const BODY_TIMEOUT: Duration = Duration::from_secs(300);

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

    /// Whether `given` is the token: all [`MAX_TOKEN_BYTES`] bytes and the lengths are
    /// compared in constant time, so the time tells nothing about the token.
    pub fn matches(&self, given: &[u8]) -> bool {
        let mut other = [0u8; MAX_TOKEN_BYTES];
        let n = given.len().min(MAX_TOKEN_BYTES);
        other[..n].copy_from_slice(&given[..n]);
        let same_len = (given.len() as u64).ct_eq(&(self.len as u64));
        (self.padded.ct_eq(&other) & same_len).into()
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

/// Reads an admin request's body, at most `limit` bytes.
async fn read_body(body: Body, limit: u64) -> Result<Bytes, Response> {
    balancer_server::body::read(body, limit, Instant::now() + BODY_TIMEOUT)
        .await
        .map_err(|e| json_error(e.status(), e.to_string()))
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

/// Publishes the snapshot's per-replica figures to the recorder: gauges of the state now,
/// and the counters of [`balancer_server::stats`] as they stand.
fn publish(stats: &Stats) {
    metrics::gauge!(m::QUEUED).set(stats.queued() as f64);
    for r in &stats.replicas {
        let name = || r.counters.name.clone();
        metrics::gauge!(m::IN_FLIGHT, "replica" => name()).set(r.in_flight as f64);
        metrics::gauge!(m::REPLICA_QUEUED, "replica" => name()).set(r.queued as f64);
        let up = if r.is_up() { 1.0 } else { 0.0 };
        metrics::gauge!(m::REPLICA_UP, "replica" => name()).set(up);
        if let Some(bytes) = r.shadow_cached_bytes {
            metrics::gauge!(m::SHADOW_CACHED_BYTES, "replica" => name()).set(bytes as f64);
        }
        for (reason, &n) in m::RequestReason::ALL.iter().zip(&r.counters.by_reason) {
            metrics::counter!(m::REQUESTS, "replica" => name(), "reason" => reason.name())
                .absolute(n);
        }
        let c = &r.counters;
        metrics::counter!(m::REPORTED_MISS_BYTES, "replica" => name()).absolute(c.reported_miss);
        metrics::counter!(m::SHADOW_MISS_BYTES, "replica" => name()).absolute(c.shadow_miss);
    }
}

async fn metrics(AxState(app): AxState<Arc<App>>) -> Response {
    let stats = app.lb.stats();
    publish(&stats);
    let memory = app
        .lb
        .shards
        .iter()
        .filter_map(|s| s.shadow.as_ref())
        .map(|s| s.memory_bytes());
    if let Some(bytes) = memory.reduce(|a, b| a + b) {
        metrics::gauge!(m::SHADOW_MEMORY_BYTES).set(bytes as f64);
    }
    app.lb.router.tick();
    let mut text = app.prom.render();
    text.push_str(&format!(
        "# HELP {0} Upstream latency to response headers\n# TYPE {0} histogram\n",
        m::UPSTREAM_SECONDS
    ));
    for r in &stats.replicas {
        r.counters.write_latency(&mut text);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn table_json(stats: &Stats) -> serde_json::Value {
    match &stats.table {
        Some(t) => json!({
            "policy": stats.policy,
            "version": t.version,
            "content_hash": t.content_hash,
            "replicas": t.replicas,
            "virtual_homes": t.virtual_homes,
            "terms": t.terms,
            "votes": t.votes,
            "ramp_progress": t.ramp_progress,
            "ramp_queries": t.ramp_queries,
            "trained_cache_bytes": t.trained_cache_bytes,
            "cache_admission": stats.cache_admission,
        }),
        None => json!({ "policy": stats.policy, "table": null }),
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
    Json(table_json(&app.lb.stats())).into_response()
}

/// The newest table as the Parquet file it was validated from (re-encoded), so that a
/// retraining job can evaluate against exactly what serves.
async fn table_parquet(AxState(app): AxState<Arc<App>>) -> Response {
    match &app.lb.router.snapshot().table {
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
            format!(
                "policy `{}` serves no voting table",
                app.lb.router.kind.name()
            ),
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
    let cfg = &app.lb.cfg.config;
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

/// A table reload's source from its body: `{"path": ...}` (read from `tables_dir`) or the
/// Parquet bytes; with whether it came by path (then every refusal reads the same).
async fn table_source(
    app: &App,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<(Source, bool), Response> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
        || body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if is_json {
        let p = serde_json::from_slice::<TablePath>(&body).map_err(|e| {
            metrics::counter!(m::RELOAD_FAILURES).increment(1);
            let why = format!("expected {{\"path\": \"...\"}} or a Parquet body: {e}");
            json_error(StatusCode::BAD_REQUEST, why)
        })?;
        let bytes = read_table_file(app, p.path).await?;
        return Ok((Source::Bytes(bytes), true));
    }
    if body.is_empty() {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        let why = "empty body: send {\"path\": \"...\"} or a Parquet voting table";
        return Err(json_error(StatusCode::BAD_REQUEST, why));
    }
    Ok((Source::Bytes(body.to_vec()), false))
}

async fn post_table(
    AxState(app): AxState<Arc<App>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let check_it = match check_only(query.as_deref()) {
        Ok(c) => c,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e),
    };
    let lb = &app.lb;
    if lb.router.table_replicas().is_none() {
        metrics::counter!(m::RELOAD_FAILURES).increment(1);
        let e = ReloadError::NoTable(lb.router.kind.to_string());
        return json_error(StatusCode::CONFLICT, e.to_string());
    }
    let body = match read_body(body, lb.cfg.config.admin_max_upload_bytes).await {
        Ok(b) => b,
        Err(r) => {
            metrics::counter!(m::RELOAD_FAILURES).increment(1);
            return r;
        }
    };
    let (source, by_path) = match table_source(&app, &headers, body).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let result = if check_it {
        check(lb, source).await.map(|c| json!(c))
    } else {
        reload(lb, source)
            .await
            .map(|loaded| json!({ "loaded": loaded, "table": table_json(&lb.stats()) }))
    };
    match result {
        Ok(doc) => Json(doc).into_response(),
        Err(e @ ReloadError::NoTable(_)) => json_error(StatusCode::CONFLICT, e.to_string()),
        // The same answer as a missing file: the API tells nothing about what a path holds.
        Err(e) if by_path => {
            tracing::warn!("table reload by path rejected: {e}");
            json_error(StatusCode::UNPROCESSABLE_ENTITY, NOT_A_TABLE)
        }
        Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    }
}

async fn list_replicas(AxState(app): AxState<Arc<App>>) -> Response {
    let stats = app.lb.stats();
    let list: Vec<_> = stats
        .replicas
        .iter()
        .map(|r| {
            json!({
                "index": r.index,
                "shard": r.shard,
                "name": r.counters.name,
                "address": r.address,
                "healthy": r.healthy,
                "drained": r.drained,
                "checks": r.checks,
                "health_changed_at_check": r.health_changed_at_check,
                "in_flight": r.in_flight,
                "queued": r.queued,
                "others_backlog": r.others_backlog,
                "shadow_cached_bytes": r.shadow_cached_bytes,
            })
        })
        .collect();
    Json(json!({
        "shards": stats.shards,
        "slots": stats.slots,
        "replicas": list,
        "load": stats.load,
        "work_source": stats.work_source,
        "shadow": app.lb.shards[0].shadow.as_ref().map(|s| s.summary()),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewReplica {
    name: String,
    address: String,
}

/// The refusal of a membership change on a sharded balancer.
fn sharded() -> Response {
    json_error(
        StatusCode::CONFLICT,
        "a sharded balancer's replicas and shards are set in its config file",
    )
}

async fn add_replica(AxState(app): AxState<Arc<App>>, body: Body) -> Response {
    let body = match read_body(body, MAX_JSON_BODY).await {
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
    if app.lb.fanout.is_some() {
        return sharded();
    }
    match app.lb.add_replica(&new.name, &new.address) {
        Ok(index) => (
            StatusCode::CREATED,
            Json(json!({ "index": index, "name": new.name, "address": new.address })),
        )
            .into_response(),
        Err(e) => json_error(membership_status(&e), e.to_string()),
    }
}

async fn remove_replica(
    AxState(app): AxState<Arc<App>>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    if app.lb.fanout.is_some() {
        return sharded();
    }
    match app.lb.remove_replica(&name) {
        Ok(rep) => {
            metrics::gauge!(m::IN_FLIGHT, "replica" => rep.name.clone()).set(0.0);
            metrics::gauge!(m::REPLICA_UP, "replica" => rep.name.clone()).set(0.0);
            Json(json!({ "removed": name })).into_response()
        }
        Err(e) => json_error(membership_status(&e), e.to_string()),
    }
}

fn set_drained(app: &App, name: &str, drained: bool) -> Response {
    for shard in &app.lb.shards {
        if let Some((index, rep)) = shard.members.load().find(name) {
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
