//! The proxy path: a request that took a route ([`routes`]: ballot's `GET /search?q=...`
//! by default) has its body read whole if it has one ([`body`]), its query text read by
//! its route, tokenized and routed, and is forwarded with its method, whole target and body
//! to the chosen replica over pooled keep-alive connections (each replica's
//! [`Pool`](crate::upstream::Pool)); the response streams back, with `x-ballot-replica`
//! and `x-ballot-reason` added when `routing_headers = true`. A request that took no route,
//! or whose query cannot be read, is refused with a 4xx JSON error or, under a `fallback`
//! policy, routed without a query ([`FallbackRouter`]); both are counted by kind in
//! `ballot_client_errors_total`. A body over `max_body_bytes` is always refused (413).
//!
//! Failover follows HAProxy's `option redispatch` with `retries`: on a connect failure or a
//! timeout the replica is ejected passively and the query is routed again with the failed
//! replicas excluded, so it goes to the next-ranked live candidate; other upstream errors
//! (a connection reset mid-request) are retried the same way without ejecting. A replica
//! that sheds the query (503: past its `--max-inflight` or its in-flight byte budget) is
//! alive but full: the query is retried on another replica without ejecting it (HAProxy's
//! `retry-on 503`), and only the last attempt's 503 reaches the client. Every request that
//! took a route may be sent twice: a route is for a read-only search endpoint, whatever
//! its method (the operator's promise). A `POST` that took no route (forwarded by the
//! fallback) is retried only when nothing of it reached a replica (the connection could
//! not be made). One deadline bounds the whole request, the body's arrival and the relay
//! of the response body included.
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
use axum::http::request::Parts;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use data::tokenizer::{Tokens, MAX_TERMS};
use hyper::body::Incoming;
use metrics::{Counter, Histogram};

use crate::access;
use crate::admit::{Admission, InFlightGuard};
use crate::body;
use crate::cache_hint;
use crate::fallback::FallbackRouter;
use crate::forward::{self, X_REQUEST_ID};
use crate::metrics as m;
use crate::replicas::Replica;
use crate::routes::{self, method_bit, Fallback, Unreadable};
use crate::shadow::Shadow;
use crate::state::{Choice, NoReplica, State};
use crate::upstream::{self, Answer, Outgoing, Relay, RelayParts};
use crate::work::WorkMeter;
use balancer::load::LoadKind;
use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use balancer::policy::{hash_tokens, PolicyError, QueryKey};

/// The proxy's handles.
pub struct Proxy {
    /// Shared state.
    pub state: Arc<State>,
    /// Client requests in flight, bounded by `max_in_flight`.
    pub admission: Admission,
    /// Routes requests without a query, under `fallback = "<policy>"`.
    fallback: Option<FallbackRouter>,
    /// The shadow caches (`[shadow]`), fed with every query sent to a replica.
    pub shadow: Option<Shadow>,
    /// Each answer's flash bytes, for the `work` load.
    work: WorkMeter,
    route_seconds: Histogram,
    sampled_chosen: Counter,
    sampled_round_robin: Counter,
    /// `ballot_ramp_queries_total` for the old and the new table.
    ramp_old: Counter,
    ramp_new: Counter,
    /// `ballot_cache_hints_total`: queries forwarded with a no-cache hint, and its terms.
    hinted_queries: Counter,
    hinted_terms: Counter,
    retries: Counter,
    failures: Counter,
}

/// A client request on its way to the proxy: the head, the body still to read, the index
/// of the route it took (`None`: no route), and the client's address.
pub struct ClientRequest {
    /// Method, target and headers.
    pub parts: Parts,
    /// The body, unread.
    pub body: Incoming,
    /// The route [`Routes::find`](crate::routes::Routes::find) gave it.
    pub route: Option<usize>,
    /// The client.
    pub peer: IpAddr,
}

/// What a request is routed by.
#[derive(Clone, Copy)]
pub(crate) enum Key<'q> {
    /// Its query text.
    Query(&'q str),
    /// Nothing: the fallback policy routes it.
    Fallback,
}

/// A JSON error response.
pub fn json_error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": msg.into() }))).into_response()
}

/// An error answer for the client, made where the request failed upstream.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    /// Its status.
    pub status: StatusCode,
    /// Its message.
    pub message: String,
    /// Sent with `Retry-After: 1`.
    pub retry_after: bool,
}

impl Refusal {
    /// An error answer of `status` saying `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
            retry_after: false,
        }
    }

    /// 503 with `Retry-After: 1` and `msg`, counted as a client error of `kind`: the
    /// answer when the balancer is full (admission, or a replica's queue).
    fn retry_later(kind: &'static str, message: String) -> Self {
        metrics::counter!(m::CLIENT_ERRORS, "kind" => kind).increment(1);
        Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message,
            retry_after: true,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = json_error(self.status, self.message);
        if self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

thread_local! {
    static BUF: RefCell<(Tokens, Vec<u64>)> =
        RefCell::new((Tokens::new(), Vec::with_capacity(MAX_TERMS)));
    /// Routing decisions made on this thread: every [`ROUTE_SAMPLE`]th one is timed.
    static ROUTED: Cell<u32> = const { Cell::new(0) };
    /// First attempts fed to the shadow caches on this thread: every [`ROUTE_SAMPLE`]th is
    /// priced on every live replica's cache too.
    static SHADOW_SAMPLED: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` on the hashed terms of `q` (this thread's buffers: no allocation).
fn hashed<T>(q: &str, f: impl FnOnce(&QueryKey<'_>) -> T) -> T {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        let (tokens, hashes) = &mut *b;
        tokens.tokenize(q);
        let qh = hash_tokens(tokens, hashes);
        f(&QueryKey::new(qh, hashes))
    })
}

/// Runs `f` on the terms of `q` (this thread's buffers: no allocation).
fn tokenized<T>(q: &str, f: impl FnOnce(&Tokens) -> T) -> T {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        let tokens = &mut b.0;
        tokens.tokenize(q);
        f(tokens)
    })
}

/// The table's cache admission rule with the table it reads, while `[policy]
/// cache_admission` is set and a table routes.
type CacheRule = (CacheAdmission, Arc<TableVotes>);

/// One routing decision in this many is timed into `ballot_route_seconds`: timing each
/// would cost two clock reads and a histogram update per request, about as much as the
/// routing itself.
pub const ROUTE_SAMPLE: u32 = 16;

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
    fn queue_timeout(&self, replica: &Replica) -> Refusal {
        let c = &self.state.cfg.config;
        Refusal::retry_later(
            "queue_timeout",
            format!(
                "queue timeout: replica {} held {} requests until the queue timeout ({} ms) \
                 or the request's deadline; retry later",
                replica.name, c.replica_max_in_flight, c.queue_timeout_ms
            ),
        )
    }

    /// A proxy over `state`, with `shadow` caches if configured (fails only if the
    /// fallback policy cannot be built).
    pub fn new(state: Arc<State>, shadow: Option<Shadow>) -> Result<Self, PolicyError> {
        let fallback = match state.cfg.fallback {
            Fallback::Refuse => None,
            Fallback::Policy(kind) => Some(FallbackRouter::new(kind)?),
        };
        Ok(Proxy {
            admission: Admission::new(state.cfg.config.max_in_flight),
            fallback,
            shadow,
            work: WorkMeter::new(state.cfg.config.work_source),
            state,
            route_seconds: metrics::histogram!(m::ROUTE_SECONDS),
            sampled_chosen: metrics::counter!(m::SAMPLED_MISS_BYTES, "route" => "chosen"),
            sampled_round_robin: metrics::counter!(m::SAMPLED_MISS_BYTES, "route" => "round-robin"),
            ramp_old: metrics::counter!(m::RAMP_QUERIES, "table" => "old"),
            ramp_new: metrics::counter!(m::RAMP_QUERIES, "table" => "new"),
            hinted_queries: metrics::counter!(m::CACHE_HINTS, "what" => "queries"),
            hinted_terms: metrics::counter!(m::CACHE_HINTS, "what" => "terms"),
            retries: metrics::counter!(m::RETRIES),
            failures: metrics::counter!(m::UPSTREAM_FAILURES),
        })
    }

    /// The refusal of a request that `why` left without a query, counted by its kind: a
    /// 405 with `Allow` when no route took the request but some route (or the fallback)
    /// takes its path with other methods.
    pub(crate) fn refuse(&self, why: &Unreadable, path: &str) -> Response {
        metrics::counter!(m::CLIENT_ERRORS, "kind" => why.kind()).increment(1);
        let allow = match why {
            Unreadable::NoRoute if self.fallback.is_some() => Some("GET,HEAD,POST"),
            Unreadable::NoRoute => self.state.cfg.routes.allow(path),
            _ => None,
        };
        match allow {
            Some(allow) => {
                let mut r = json_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method not allowed on this path",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(allow));
                r
            }
            None => json_error(why.status(), why.to_string()),
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
        let out = hashed(q, f);
        if let Some(start) = start {
            self.route_seconds.record(start.elapsed().as_secs_f64());
        }
        out
    }

    /// The replica slot this proxy's policy picks for `q` now, and why, without taking a
    /// place there (a sharded balancer's column; `None`: no replica is left).
    pub(crate) fn column(&self, q: &str) -> Option<(usize, balancer::policy::Reason)> {
        self.with_query(q, |query| self.state.route(query, 0))
            .ok()
            .map(|c| (c.index, c.reason))
    }

    /// Feeds the query `key` sent to `choice` into that replica's shadow cache: the flash
    /// bytes it estimates the replica reads for it (`None`: no shadow caches, or no query).
    ///
    /// At a first attempt, one query in [`ROUTE_SAMPLE`] is also priced on every live
    /// replica's shadow cache first, without feeding them: the chosen replica's bytes and
    /// their mean (round-robin's expected bytes) go to `ballot_sampled_miss_bytes_total`.
    ///
    /// The chosen replica's shadow cache keeps a missed list as the replica does: under the
    /// `admission` rule, all but the lists of the terms its cache hint names (`hint`), when
    /// the rule applies at the shadow's size.
    fn feed_shadow(
        &self,
        key: Key<'_>,
        choice: &Choice,
        first: bool,
        admission: Option<&CacheRule>,
        hint: Option<&cache_hint::Hint>,
    ) -> Option<u64> {
        let (Key::Query(q), Some(shadow)) = (key, &self.shadow) else {
            return None;
        };
        let applies = admission
            .is_some_and(|(_, votes)| CacheAdmission::applies(votes, shadow.cache_bytes()));
        let no_cache = hint.filter(|_| applies).map_or(&[][..], |h| h.hashes());
        let admits = |h: u64| !no_cache.contains(&h);
        let sampled = first
            && SHADOW_SAMPLED.with(|n| {
                let next = n.get().wrapping_add(1);
                n.set(next);
                next.is_multiple_of(ROUTE_SAMPLE)
            });
        let missed = hashed(q, |query| {
            let round_robin = sampled.then(|| {
                let members = self.state.members.load();
                let (mut sum, mut live) = (0u64, 0u64);
                for (i, rep) in members.slots.iter().enumerate() {
                    let Some(rep) = rep.as_ref().filter(|r| r.is_healthy() && !r.is_drained())
                    else {
                        continue;
                    };
                    sum += shadow.peek(i, rep, query.term_hashes);
                    live += 1;
                }
                sum / live.max(1)
            });
            let missed = shadow.access(choice.index, &choice.replica, query.term_hashes, admits);
            if let Some(rr) = round_robin {
                // The chosen replica's bytes are what feeding its cache just missed.
                self.sampled_chosen.increment(missed);
                self.sampled_round_robin.increment(rr);
            }
            missed
        });
        choice.replica.metrics.shadow_miss_bytes.increment(missed);
        Some(missed)
    }

    /// The cache hint for the query `key` sent to `choice` ([`crate::cache_hint`]; `None`:
    /// no rule, or the replica caches every list). Counted in `ballot_cache_hints_total`.
    fn cache_hint(
        &self,
        key: Key<'_>,
        choice: &Choice,
        admission: Option<&CacheRule>,
    ) -> Option<cache_hint::Hint> {
        let (Key::Query(q), Some((rule, votes))) = (key, admission) else {
            return None;
        };
        let hint = tokenized(q, |tokens| {
            cache_hint::hint(*rule, votes, tokens, choice.index)
        })?;
        self.hinted_queries.increment(1);
        self.hinted_terms.increment(hint.hashes().len() as u64);
        Some(hint)
    }

    /// Counts a query routed while a table ramps in by the side of the ramp that scored it.
    fn count_ramp_side(&self, key: Key<'_>) {
        let Key::Query(q) = key else { return };
        let routing = self.state.routing();
        let Some(ramp) = routing.table.as_ref().and_then(|t| t.ramp.as_ref()) else {
            return;
        };
        let new = hashed(q, |query| {
            ramp.ramp()
                .at(ramp.progress())
                .query_follows_new(query.term_hashes)
        });
        if new {
            self.ramp_new.increment(1);
        } else {
            self.ramp_old.increment(1);
        }
    }

    /// Routes by `key` (skipping `exclude`; the `pin` slot when it is live) and takes a
    /// place on the chosen replica,
    /// waiting in its queue while it is full. A first attempt counts in the `window` load
    /// and the slow-start clock once, when it is first routed, so queued queries count too.
    async fn place(
        &self,
        key: Key<'_>,
        pin: Option<(usize, balancer::policy::Reason)>,
        exclude: u64,
        deadline: Instant,
    ) -> Result<(Choice, InFlightGuard), Unplaced> {
        // Read from the clock only if the request has to wait.
        let mut until = None;
        let mut counted = exclude != 0;
        loop {
            let routed = match (key, &self.fallback) {
                (Key::Query(q), _) => self.with_query(q, |query| {
                    let choice = self.state.route_pinned(query, pin, exclude)?;
                    let guard = self.state.slots.try_start(choice.index);
                    Ok((choice, guard))
                }),
                (Key::Fallback, Some(fallback)) => {
                    fallback.route(&self.state, exclude).map(|choice| {
                        let guard = self.state.slots.try_start(choice.index);
                        (choice, guard)
                    })
                }
                (Key::Fallback, None) => Err(NoReplica),
            };
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

    /// Handles a client request other than `/healthz`, from `peer`: `route` is the index
    /// of the route its method and path took (`None`: no route).
    pub async fn search(
        &self,
        req: Request<Incoming>,
        route: Option<usize>,
        peer: IpAddr,
    ) -> Response {
        let (parts, body) = req.into_parts();
        let (start, id, mut access) = self.begin(&parts);
        let req = ClientRequest {
            parts,
            body,
            route,
            peer,
        };
        let resp = self.relay(req, &id, start, &mut access).await;
        end(resp, id, access)
    }

    /// A client request's arrival: its time, its request id (the client's when plausible)
    /// and its access-log line when the access log is on.
    pub(crate) fn begin(&self, parts: &Parts) -> (Instant, HeaderValue, Option<access::Entry>) {
        let start = Instant::now();
        let id = forward::request_id(&parts.headers);
        let access = self
            .state
            .cfg
            .config
            .access_log
            .then(|| access::Entry::new(start, id.clone()));
        (start, id, access)
    }

    /// The answer to one request: an error, or the relayed response (which then owns the
    /// access-log entry).
    async fn relay(
        &self,
        req: ClientRequest,
        id: &HeaderValue,
        start: Instant,
        access: &mut Option<access::Entry>,
    ) -> Response {
        let ClientRequest {
            parts,
            body,
            route,
            peer,
        } = req;
        let deadline = start + self.state.cfg.deadline();
        let body = match self.read_body(&parts, body, route, deadline).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let text = self.query_text(&parts, &body, route);
        let key = match self.key(&text) {
            Ok(key) => key,
            Err(why) => return self.refuse(why, parts.uri.path()),
        };
        let Some(slot) = self.admit() else {
            return self.overloaded();
        };
        let path_and_query = target(&parts);
        let sending = Sending {
            key,
            outgoing: self.outgoing(&parts, route, &path_and_query, &body),
            headers: &parts.headers,
            peer,
            id,
            start,
            deadline,
            pin: None,
        };
        match self.exchange(&sending, access).await {
            Ok(ex) => self.stream(ex, slot, deadline, access),
            Err(failed) => failed.into_response(),
        }
    }

    /// Reads the body of a request (refused before it is read when it took no route and
    /// nothing can route it).
    pub(crate) async fn read_body(
        &self,
        parts: &Parts,
        body: Incoming,
        route: Option<usize>,
        deadline: Instant,
    ) -> Result<hyper::body::Bytes, Response> {
        let bit = method_bit(&parts.method);
        if route.is_none() && (self.fallback.is_none() || bit == 0) {
            return Err(self.refuse(&Unreadable::NoRoute, parts.uri.path()));
        }
        body::read(body, self.state.cfg.config.max_body_bytes, deadline)
            .await
            .map_err(|e| self.refuse(&e, parts.uri.path()))
    }

    /// The query text of a request, as its route reads it.
    pub(crate) fn query_text<'a>(
        &self,
        parts: &'a Parts,
        body: &'a [u8],
        route: Option<usize>,
    ) -> Result<Cow<'a, str>, Unreadable> {
        let cfg = &self.state.cfg;
        let Some(i) = route else {
            return Err(Unreadable::NoRoute);
        };
        // The content type matters only to a form route's body.
        let content_type = if body.is_empty() {
            None
        } else {
            parts
                .headers
                .get(header::CONTENT_TYPE)
                .map(HeaderValue::as_bytes)
        };
        let read = routes::Request {
            query: parts.uri.query(),
            content_type,
            body,
        };
        routes::extract::extract(cfg.routes.get(i), &read, cfg.config.max_query_bytes)
    }

    /// What routes a request whose query text is `text`: the text, or the fallback policy
    /// (the reason it is unreadable when there is none: [`Proxy::refuse`] answers it).
    pub(crate) fn key<'q>(
        &self,
        text: &'q Result<Cow<'_, str>, Unreadable>,
    ) -> Result<Key<'q>, &'q Unreadable> {
        match text {
            Ok(q) => Ok(Key::Query(q)),
            Err(e) if self.fallback.is_none() => Err(e),
            Err(e) => {
                metrics::counter!(m::CLIENT_ERRORS, "kind" => e.kind()).increment(1);
                Ok(Key::Fallback)
            }
        }
    }

    /// A place among the client requests in flight (`None`: `max_in_flight` reached).
    pub(crate) fn admit(&self) -> Option<crate::admit::Slot> {
        self.admission.try_enter()
    }

    /// The answer when [`Proxy::admit`] found no place.
    pub(crate) fn overloaded(&self) -> Response {
        Refusal::retry_later(
            "overloaded",
            format!(
                "overloaded: {} requests in flight; retry later",
                self.admission.max()
            ),
        )
        .into_response()
    }

    /// The request as it goes to a replica. A routed request may be sent twice (routes
    /// are read-only search endpoints); a POST that took no route only when nothing of it
    /// reached a replica.
    pub(crate) fn outgoing<'a>(
        &self,
        parts: &Parts,
        route: Option<usize>,
        path: &'a PathAndQuery,
        body: &'a [u8],
    ) -> Outgoing<'a> {
        let resend = route.is_some() || method_bit(&parts.method) != routes::POST;
        let method = if parts.method == Method::POST {
            upstream::Method::Post
        } else {
            upstream::Method::Get
        };
        Outgoing {
            method,
            path,
            body,
            resend,
        }
    }

    /// Sends a request to a replica, routed by its key, and again to the next-ranked one
    /// after a failure, within `retries` and the deadline: the answer that came back with
    /// its replica's place, or the error answer for the client.
    pub(crate) async fn exchange(
        &self,
        sending: &Sending<'_>,
        access: &mut Option<access::Entry>,
    ) -> Result<Exchanged, Refusal> {
        let cfg = &self.state.cfg;
        let Sending {
            key,
            ref outgoing,
            headers,
            peer,
            id,
            start,
            deadline,
            pin,
        } = *sending;
        let resend = outgoing.resend;
        let attempts = cfg.config.retries + 1;
        let mut exclude = 0u64;
        // Built only when an attempt fails: the success path allocates no error text.
        let mut last_error: Cow<'static, str> = Cow::Borrowed("no attempt made");
        let admission: Option<CacheRule> = cfg.cache_admission.and_then(|rule| {
            let routing = self.state.routing();
            let table = routing.table.as_ref()?;
            Some((rule, Arc::clone(&table.current)))
        });
        for attempt in 0..attempts {
            // The first attempt starts when the request came in.
            let now = if attempt == 0 { start } else { Instant::now() };
            if now >= deadline {
                self.failures.increment(1);
                return Err(Refusal::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("deadline passed after {attempt} attempts: {last_error}"),
                ));
            }
            let (choice, guard) = match self.place(key, pin, exclude, deadline).await {
                Ok(placed) => placed,
                Err(Unplaced::QueueTimeout(replica)) => return Err(self.queue_timeout(&replica)),
                Err(Unplaced::NoReplica) if attempt == 0 => {
                    metrics::counter!(m::CLIENT_ERRORS, "kind" => "no_replica").increment(1);
                    return Err(Refusal::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "no live replica",
                    ));
                }
                Err(Unplaced::NoReplica) => break,
            };
            // The replica's cache sees the query now, in the order queries reach it.
            let hint = self.cache_hint(key, &choice, admission.as_ref());
            let shadow_miss = self.feed_shadow(
                key,
                &choice,
                attempt == 0,
                admission.as_ref(),
                hint.as_ref(),
            );
            let why = if attempt == 0 {
                self.count_ramp_side(key);
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
            let upstream = choice.replica.pool.send(
                outgoing,
                |out: &mut Vec<u8>| {
                    forward::write_upstream_headers(out, headers, peer, id);
                    if let Some(hint) = &hint {
                        out.extend_from_slice(&hint.lines);
                    }
                },
                timeout,
            );
            match tokio::time::timeout_at(until.into(), upstream).await {
                Ok(Ok(answer))
                    if answer.status == StatusCode::SERVICE_UNAVAILABLE
                        && attempt + 1 < attempts
                        && resend =>
                {
                    // Shed by a live replica: try another one. A body still on the
                    // connection is dropped with it rather than read.
                    drop(answer);
                    drop(guard);
                    choice.replica.metrics.shed.increment(1);
                    last_error = format!("replica {}: 503, shed", choice.replica.name).into();
                }
                Ok(Ok(answer)) => {
                    choice
                        .replica
                        .metrics
                        .upstream
                        .record(sent.elapsed().as_secs_f64());
                    choice.replica.metrics.requests[why.index()].increment(1);
                    if cfg.config.backlog_reports_ms > 0 {
                        if let Some(backlog) = WorkMeter::backlog(&answer.headers) {
                            self.state.slots.record_report(choice.index, backlog);
                        }
                    }
                    if self.state.cfg.load == LoadKind::Work {
                        // A backend with no bytes from the chosen source still costs the
                        // fixed part of the work.
                        let miss =
                            self.work
                                .bytes(&answer.headers, shadow_miss, &choice.replica.metrics);
                        self.state.record_work(choice.index, miss);
                    }
                    return Ok(Exchanged {
                        choice,
                        guard,
                        why,
                        answer,
                        attempts: attempt + 1,
                    });
                }
                Ok(Err(e)) => {
                    // Ejected before the place is handed on, so a request waiting for
                    // this replica sees it gone and routes again.
                    if e.is_connect() {
                        choice.replica.eject("connect failed");
                    }
                    drop(guard);
                    last_error = format!("replica {}: {e}", choice.replica.name).into();
                    if !resend && !e.is_connect() {
                        break;
                    }
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
                    if !resend {
                        break;
                    }
                }
            }
            exclude |= 1u64 << choice.index;
        }
        self.failures.increment(1);
        let not_again = if resend {
            ""
        } else {
            " (a POST that took no route is not sent twice)"
        };
        Err(Refusal::new(
            StatusCode::BAD_GATEWAY,
            format!("every attempt failed: {last_error}{not_again}"),
        ))
    }

    /// The client's response relaying an exchanged answer: it streams out holding the
    /// replica's place and the client's slot.
    fn stream(
        &self,
        ex: Exchanged,
        slot: crate::admit::Slot,
        deadline: Instant,
        access: &mut Option<access::Entry>,
    ) -> Response {
        let Exchanged {
            choice,
            guard,
            why,
            attempts: _,
            answer:
                Answer {
                    status,
                    mut headers,
                    body,
                },
        } = ex;
        forward::strip_hop_by_hop(&mut headers);
        if self.state.cfg.config.routing_headers {
            headers.insert(X_BALLOT_REPLICA.clone(), choice.replica.header.clone());
            headers.insert(
                X_BALLOT_REASON.clone(),
                HeaderValue::from_static(why.name()),
            );
        }
        // The request stays in flight until its body is streamed out; a streamed body's
        // connection then goes back to the replica's pool.
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
        resp
    }
}

/// The response to a client request, with its request id echoed; the access-log line, if
/// still here (not handed to a relay), is written now.
pub(crate) fn end(mut resp: Response, id: HeaderValue, access: Option<access::Entry>) -> Response {
    resp.headers_mut().insert(X_REQUEST_ID.clone(), id);
    if let Some(mut a) = access {
        // Not relayed: an answer made here.
        a.status = resp.status().as_u16();
        a.log("done");
    }
    resp
}

/// A request's target as it goes upstream.
pub(crate) fn target(parts: &Parts) -> PathAndQuery {
    match parts.uri.path_and_query() {
        Some(pq) => pq.clone(),
        None => PathAndQuery::from_static("/"),
    }
}

/// One request on its way to a replica of this proxy.
pub(crate) struct Sending<'a> {
    /// What routes it.
    pub key: Key<'a>,
    /// What goes upstream.
    pub outgoing: Outgoing<'a>,
    /// The client's header fields.
    pub headers: &'a axum::http::HeaderMap,
    /// The client.
    pub peer: IpAddr,
    /// The request id.
    pub id: &'a HeaderValue,
    /// When the client request came in.
    pub start: Instant,
    /// Its deadline.
    pub deadline: Instant,
    /// A replica slot to take, when live, instead of routing (with the reason it was
    /// chosen for): the column a sharded balancer picked in shard 0.
    pub pin: Option<(usize, balancer::policy::Reason)>,
}

/// An answer that came back from a replica, with the place the request holds there.
pub(crate) struct Exchanged {
    /// The replica.
    pub choice: Choice,
    /// Its in-flight place.
    pub guard: InFlightGuard,
    /// The routing rule that sent the request there (`failover` after a retry).
    pub why: m::RequestReason,
    /// The answer.
    pub answer: Answer,
    /// Attempts made, this one included.
    pub attempts: u32,
}
