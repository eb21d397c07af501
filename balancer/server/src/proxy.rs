//! The proxy path: `GET /search?q=...` is tokenized, routed, and forwarded with its whole
//! query string to the chosen replica over pooled keep-alive connections (each replica's
//! [`Pool`](crate::upstream::Pool)); the response streams back, with `x-ballot-replica`
//! and `x-ballot-reason` added when `routing_headers = true`.
//!
//! Failover follows HAProxy's `option redispatch` with `retries`: on a connect failure or a
//! timeout the replica is ejected passively and the query is routed again with the failed
//! replicas excluded, so it goes to the next-ranked live candidate; other upstream errors
//! (a connection reset mid-request) are retried the same way without ejecting. A replica
//! that sheds the query (503: past its `--max-inflight` or its in-flight byte budget) is
//! alive but full: the query is retried on another replica without ejecting it (HAProxy's
//! `retry-on 503`), and only the last attempt's 503 reaches the client. Only GET is
//! proxied, so every retry is safe. One deadline bounds the whole request, the relay of the
//! response body included.
//!
//! Before routing, a request must find a place among `max_in_flight` ([`admit`](crate::admit)):
//! past it the answer is 503 with `Retry-After: 1`. A request routed to a replica holding
//! `replica_max_in_flight` requests waits in that replica's queue (HAProxy's server
//! `maxconn` and `timeout queue`) for a place there, up to `queue_timeout_ms`, so a burst
//! waits here instead of being shed by the replicas, and each query still reaches the
//! replica its terms chose; it routes again only if that replica leaves (ejected, drained
//! or removed) while it waits. The client's end-to-end headers go to
//! the replica with `x-forwarded-for` and `x-request-id` added ([`forward`]),
//! and every answer echoes the request id.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use data::tokenizer::{Tokens, MAX_TERMS};
use metrics::{Counter, Histogram};

use crate::access;
use crate::admit::{Admission, InFlightGuard};
use crate::forward::{self, X_REQUEST_ID};
use crate::metrics as m;
use crate::replicas::Replica;
use crate::state::{Choice, NoReplica, State};
use crate::upstream::{Answer, Relay, RelayParts};
use balancer::policy::{hash_tokens, QueryKey};
use data::query::extract_q;

/// The proxy's handles.
pub struct Proxy {
    /// Shared state.
    pub state: Arc<State>,
    /// Client requests in flight, bounded by `max_in_flight`.
    pub admission: Admission,
    route_seconds: Histogram,
    retries: Counter,
    failures: Counter,
}

/// A JSON error response.
pub fn json_error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": msg.into() }))).into_response()
}

/// 503 with `Retry-After: 1` and `msg`, counted as a client error of `kind`: the answer
/// when the balancer is full (admission, or a replica's queue).
fn retry_later(kind: &'static str, msg: String) -> Response {
    metrics::counter!(m::CLIENT_ERRORS, "kind" => kind).increment(1);
    let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, msg);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

thread_local! {
    static BUF: RefCell<(Tokens, Vec<u64>)> =
        RefCell::new((Tokens::new(), Vec::with_capacity(MAX_TERMS)));
    /// Routing decisions made on this thread: every [`ROUTE_SAMPLE`]th one is timed.
    static ROUTED: Cell<u32> = const { Cell::new(0) };
}

/// One routing decision in this many is timed into `ballot_route_seconds`: timing each
/// would cost two clock reads and a histogram update per request, about as much as the
/// routing itself.
pub const ROUTE_SAMPLE: u32 = 16;

/// [`data::query::MISS_BYTES_HEADER`] as a header name (a `&str` name is parsed again at
/// every lookup).
static MISS_BYTES_NAME: HeaderName = HeaderName::from_static(data::query::MISS_BYTES_HEADER);
/// The response header naming the replica that answered.
static X_BALLOT_REPLICA: HeaderName = HeaderName::from_static("x-ballot-replica");
/// The response header giving the routing reason.
static X_BALLOT_REASON: HeaderName = HeaderName::from_static("x-ballot-reason");

/// How often a request waiting in a replica's queue checks that the replica still takes
/// requests.
const QUEUE_RECHECK: Duration = Duration::from_millis(100);

/// Why a request got no place on a replica.
enum Unplaced {
    /// No replica is left to try.
    NoReplica,
    /// The request waited in this replica's queue until `queue_timeout_ms` or its
    /// deadline, whichever came first.
    QueueTimeout(Arc<Replica>),
}

impl Proxy {
    /// The answer after a wait in `replica`'s queue timed out.
    fn queue_timeout(&self, replica: &Replica) -> Response {
        let c = &self.state.cfg.config;
        retry_later(
            "queue_timeout",
            format!(
                "queue timeout: replica {} held {} requests until the queue timeout ({} ms) \
                 or the request's deadline; retry later",
                replica.name, c.replica_max_in_flight, c.queue_timeout_ms
            ),
        )
    }

    /// A proxy over `state`.
    pub fn new(state: Arc<State>) -> Self {
        Proxy {
            admission: Admission::new(state.cfg.config.max_in_flight),
            state,
            route_seconds: metrics::histogram!(m::ROUTE_SECONDS),
            retries: metrics::counter!(m::RETRIES),
            failures: metrics::counter!(m::UPSTREAM_FAILURES),
        }
    }

    /// Tokenizes and hashes `q`, then decides with `f` (timed as routing, one decision in
    /// [`ROUTE_SAMPLE`]).
    fn with_query<T>(&self, q: &str, f: impl FnOnce(&QueryKey<'_>) -> T) -> T {
        let timed = ROUTED.with(|n| {
            let next = n.get().wrapping_add(1);
            n.set(next);
            next % ROUTE_SAMPLE == 0
        });
        let start = timed.then(Instant::now);
        let out = BUF.with(|b| {
            let mut b = b.borrow_mut();
            let (tokens, hashes) = &mut *b;
            tokens.tokenize(q);
            let qh = hash_tokens(tokens, hashes);
            f(&QueryKey::new(qh, hashes))
        });
        if let Some(start) = start {
            self.route_seconds.record(start.elapsed().as_secs_f64());
        }
        out
    }

    /// Routes `q` (skipping `exclude`) and takes a place on the chosen replica, waiting in
    /// its queue while it is full. A first attempt counts in the `window` load and the
    /// slow-start clock once, when it is first routed, so queued queries count too.
    async fn place(
        &self,
        q: &str,
        exclude: u64,
        deadline: Instant,
    ) -> Result<(Choice, InFlightGuard), Unplaced> {
        // Read from the clock only if the request has to wait.
        let mut until = None;
        let mut counted = exclude != 0;
        loop {
            let routed = self.with_query(q, |key| {
                let choice = self.state.route(key, exclude)?;
                let guard = self.state.slots.try_start(choice.index);
                Ok((choice, guard))
            });
            let (choice, guard) = routed.map_err(|NoReplica| Unplaced::NoReplica)?;
            if !counted {
                self.state.routed(choice.index);
                counted = true;
            }
            if let Some(guard) = guard {
                return Ok((choice, guard));
            }
            let until = *until.get_or_insert_with(|| {
                deadline.min(Instant::now() + self.state.cfg.queue_timeout())
            });
            if let Some(guard) = self.wait_in_queue(&choice, until).await? {
                return Ok((choice, guard));
            }
        }
    }

    /// Waits in the chosen replica's queue for a place there (HAProxy's per-server
    /// queue): the place a finished request frees goes to the oldest waiter. Gives up at
    /// `until` (the queue timeout or the request's deadline, set once per attempt);
    /// returns `None` (route again) when a replica that took requests when it was chosen
    /// stops taking them meanwhile (ejected, drained or removed), even if a place was
    /// handed over.
    async fn wait_in_queue(
        &self,
        choice: &Choice,
        until: Instant,
    ) -> Result<Option<InFlightGuard>, Unplaced> {
        let r = &choice.replica;
        let takes_requests = || r.is_healthy() && !r.is_drained() && !r.is_removed();
        // Chosen as a last resort (every replica ejected): wait for it all the same.
        let was_taking = takes_requests();
        let left = || was_taking && !takes_requests();
        let mut waiter = match self.state.slots.enqueue(choice.index) {
            Ok(guard) => return Ok(Some(guard)),
            Err(waiter) => waiter,
        };
        loop {
            let look = until.min(Instant::now() + QUEUE_RECHECK);
            if let Some(guard) = waiter.wait_until(look.into()).await {
                // A place handed over by a request that failed on a replica now gone:
                // hand it on and route again.
                return Ok((!left()).then_some(guard));
            }
            if Instant::now() >= until {
                return Err(Unplaced::QueueTimeout(Arc::clone(r)));
            }
            if left() {
                return Ok(None);
            }
        }
    }

    /// Handles `GET /search` with the client's `headers`, from `peer`.
    pub async fn search(&self, uri: &Uri, headers: &HeaderMap, peer: IpAddr) -> Response {
        let start = Instant::now();
        let id = forward::request_id(headers);
        let mut access = self.state.cfg.config.access_log.then(|| access::Entry {
            start,
            request_id: id.clone(),
            replica: "-".to_owned(),
            reason: "-",
            status: 0,
            attempts: 0,
        });
        let mut resp = self
            .relay(uri, headers, peer, &id, start, &mut access)
            .await;
        resp.headers_mut().insert(X_REQUEST_ID.clone(), id);
        if let Some(mut a) = access {
            // Not relayed: an error answered here.
            a.status = resp.status().as_u16();
            a.log("done");
        }
        resp
    }

    /// The answer to one search: an error, or the relayed response (which then owns the
    /// access-log entry).
    async fn relay(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        peer: IpAddr,
        id: &HeaderValue,
        start: Instant,
        access: &mut Option<access::Entry>,
    ) -> Response {
        let cfg = &self.state.cfg;
        let q = match extract_q(uri.query(), cfg.config.max_query_bytes) {
            Ok(q) => q,
            Err(e) => {
                metrics::counter!(m::CLIENT_ERRORS, "kind" => e.kind()).increment(1);
                return json_error(StatusCode::BAD_REQUEST, e.to_string());
            }
        };
        let Some(slot) = self.admission.try_enter() else {
            return retry_later(
                "overloaded",
                format!(
                    "overloaded: {} requests in flight; retry later",
                    self.admission.max()
                ),
            );
        };
        let path_and_query = match uri.path_and_query() {
            Some(pq) => pq.clone(),
            None => PathAndQuery::from_static("/search"),
        };
        let deadline = start + cfg.deadline();
        let attempts = cfg.config.retries + 1;
        let mut exclude = 0u64;
        // Built only when an attempt fails: the success path allocates no error text.
        let mut last_error: Cow<'static, str> = Cow::Borrowed("no attempt made");
        for attempt in 0..attempts {
            // The first attempt starts when the request came in.
            let now = if attempt == 0 { start } else { Instant::now() };
            if now >= deadline {
                self.failures.increment(1);
                return json_error(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("deadline passed after {attempt} attempts: {last_error}"),
                );
            }
            let (choice, guard) = match self.place(&q, exclude, deadline).await {
                Ok(placed) => placed,
                Err(Unplaced::QueueTimeout(replica)) => return self.queue_timeout(&replica),
                Err(Unplaced::NoReplica) if attempt == 0 => {
                    metrics::counter!(m::CLIENT_ERRORS, "kind" => "no_replica").increment(1);
                    return json_error(StatusCode::SERVICE_UNAVAILABLE, "no live replica");
                }
                Err(Unplaced::NoReplica) => break,
            };
            let why = if attempt == 0 {
                m::RequestReason::of(choice.reason)
            } else {
                self.retries.increment(1);
                m::RequestReason::Failover
            };
            // An attempt has the request timeout, cut short by the request's deadline (after
            // a wait in a queue, or retries).
            let sent = Instant::now();
            let full = sent + cfg.request_timeout();
            let until = full.min(deadline);
            let timeout = until.saturating_duration_since(sent);
            if let Some(a) = access.as_mut() {
                a.attempts = attempt + 1;
            }
            let upstream = choice.replica.pool.get(
                &path_and_query,
                |out: &mut Vec<u8>| forward::write_upstream_headers(out, headers, peer, id),
                timeout,
            );
            match tokio::time::timeout_at(until.into(), upstream).await {
                Ok(Ok(answer))
                    if answer.status == StatusCode::SERVICE_UNAVAILABLE
                        && attempt + 1 < attempts =>
                {
                    // Shed by a live replica: try another one. A body still on the
                    // connection is dropped with it rather than read.
                    drop(answer);
                    drop(guard);
                    choice.replica.metrics.shed.increment(1);
                    last_error = format!("replica {}: 503, shed", choice.replica.name).into();
                }
                Ok(Ok(Answer {
                    status,
                    mut headers,
                    body,
                })) => {
                    choice
                        .replica
                        .metrics
                        .upstream
                        .record(sent.elapsed().as_secs_f64());
                    choice.replica.metrics.requests[why as usize].increment(1);
                    // A backend that does not report its flash bytes still costs the
                    // fixed part of the work.
                    let miss = headers
                        .get(&MISS_BYTES_NAME)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    self.state.record_work(choice.index, miss.unwrap_or(0));
                    forward::strip_hop_by_hop(&mut headers);
                    if cfg.config.routing_headers {
                        headers.insert(X_BALLOT_REPLICA.clone(), choice.replica.header.clone());
                        headers.insert(
                            X_BALLOT_REASON.clone(),
                            HeaderValue::from_static(why.name()),
                        );
                    }
                    // The request stays in flight until its body is streamed out; a
                    // streamed body's connection then goes back to the replica's pool.
                    let access = access.take().map(|mut a| {
                        a.replica.clone_from(&choice.replica.name);
                        a.reason = why.name();
                        a.status = status.as_u16();
                        a
                    });
                    let parts = RelayParts {
                        pool: Arc::clone(&choice.replica.pool),
                        guard,
                        slot,
                        deadline,
                        access,
                    };
                    let mut resp = Response::new(Body::new(Relay::new(body, parts)));
                    *resp.status_mut() = status;
                    *resp.headers_mut() = headers;
                    return resp;
                }
                Ok(Err(e)) => {
                    // Ejected before the place is handed on, so a request waiting for
                    // this replica sees it gone and routes again.
                    if e.is_connect() {
                        choice.replica.eject("connect failed");
                    }
                    drop(guard);
                    last_error = format!("replica {}: {e}", choice.replica.name).into();
                }
                Err(_) => {
                    // An attempt cut short by the request's deadline says nothing about
                    // the replica.
                    if until == full {
                        choice.replica.eject("request timed out");
                    }
                    drop(guard);
                    last_error = format!(
                        "replica {}: no response within {} ms",
                        choice.replica.name,
                        timeout.as_millis()
                    )
                    .into();
                }
            }
            exclude |= 1u64 << choice.index;
        }
        self.failures.increment(1);
        json_error(
            StatusCode::BAD_GATEWAY,
            format!("every attempt failed: {last_error}"),
        )
    }
}
