//! The request path: a client request's context ([`Ctx`]) is built once, its body read
//! whole if it has one ([`body`]), its query read by the first route that can read it
//! ([`balancer_routes`]) and tokenized once, and it is admitted; then it is sent to the
//! replica its terms choose, with retries ([`Balancer::exchange`]), and the answer streams
//! back ([`Relay`]), or (with `[shards]`) the same exchange runs for every shard and the
//! answers are merged ([`crate::fanout`]). The optional concerns are [`crate::hooks`],
//! called at fixed points.
//!
//! A request no route reads a query from is refused with a 4xx JSON error or, under a
//! fallback policy, routed without a query; both are counted by kind in
//! `ballot_client_errors_total`. A body over `max_body_bytes` is always refused (413).
//!
//! Failover follows HAProxy's `option redispatch` with `retries`: on a connect failure or a
//! timeout the replica is ejected passively and the query is routed again with the failed
//! replicas excluded; other upstream errors (a connection reset mid-request) are retried the
//! same way without ejecting. A replica that sheds the query (503) is alive but full: the
//! query is retried elsewhere without ejecting it (`retry-on 503`), and only the last
//! attempt's 503 reaches the client. A routed request may be sent twice (routes are
//! read-only search endpoints); a `POST` that took no route only when nothing of it reached
//! a replica. One deadline bounds the whole request, the body's arrival and the relay of
//! the answer included.
//!
//! Before routing, a request must find a place among `max_in_flight` ([`crate::admit`]):
//! past it the answer is 503 with `Retry-After: 1`. A request routed to a replica holding
//! `replica_max_in_flight` requests waits in that replica's queue (HAProxy's server
//! `maxconn` and `timeout queue`) up to `queue_timeout_ms`, and routes again only if that
//! replica leaves meanwhile. The client's end-to-end headers go to the replica with
//! `x-forwarded-for` and `x-request-id` added ([`forward`]), and every answer echoes the
//! request id.

use std::borrow::Cow;
use std::cell::Cell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header;
use axum::http::request::Parts;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use balancer::policy::{QueryKey, Reason};
use balancer_routes::{extract, method_bit, RouteSet, Unreadable, POST};
use hyper::body::{Bytes, Incoming};

use crate::admit::{InFlightGuard, Slot};
use crate::ctx::{Attempt, Ctx, Terms};
use crate::forward::{self, X_REQUEST_ID};
use crate::metrics as m;
use crate::replicas::Replica;
use crate::shard::{Choice, NoReplica, Shard};
use crate::upstream::{self, Answer, Outgoing, Relay, RelayParts};
use crate::{body, Balancer};

/// A JSON error response.
pub fn json_error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": msg.into() }))).into_response()
}

/// An error answer for the client, made where the request failed upstream.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// Its status.
    pub status: StatusCode,
    /// Its message.
    pub message: String,
    /// Sent with `Retry-After: 1`.
    pub retry_after: bool,
    /// Upstream attempts made before it.
    pub attempts: u32,
}

impl Refusal {
    /// An error answer of `status` saying `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
            retry_after: false,
            attempts: 0,
        }
    }

    /// The same answer, after `attempts` upstream attempts.
    fn after(self, attempts: u32) -> Self {
        Refusal { attempts, ..self }
    }

    /// 503 with `Retry-After: 1`, counted as a client error of `kind`: the answer when the
    /// balancer is full (admission, or a replica's queue).
    fn retry_later(kind: &'static str, message: String) -> Self {
        metrics::counter!(m::CLIENT_ERRORS, "kind" => kind).increment(1);
        Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message,
            retry_after: true,
            attempts: 0,
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

/// One routing decision in this many is timed into `ballot_route_seconds`: timing each
/// would cost two clock reads and a histogram update per request, about as much as the
/// routing itself.
pub const ROUTE_SAMPLE: u32 = 16;

/// How often a request waiting in a replica's queue checks that the replica still takes
/// requests.
const QUEUE_RECHECK: Duration = Duration::from_millis(100);

thread_local! {
    /// Routing decisions made on this thread: every [`ROUTE_SAMPLE`]th one is timed.
    static ROUTED: Cell<u32> = const { Cell::new(0) };
}

/// Why a request got no place on a replica.
enum Unplaced {
    /// No replica is left to try.
    NoReplica,
    /// The request waited in this replica's queue until `queue_timeout_ms` or its
    /// deadline, whichever came first.
    QueueTimeout(Arc<Replica>),
}

/// An answer that came back from a replica, with the place the request holds there.
pub struct Exchanged {
    /// The attempt that got it.
    pub attempt: Attempt,
    /// Its in-flight place.
    pub guard: InFlightGuard,
    /// The answer.
    pub answer: Answer,
}

/// A request's attempts so far: the replicas it failed on and why the last one failed.
struct Tries {
    /// Whether the request may be sent again after a failure past its first byte.
    resend: bool,
    /// Slots of the replicas already tried.
    exclude: u64,
    /// Attempts sent.
    made: u32,
    /// Why the last attempt failed (built only when one fails: the success path allocates
    /// no error text).
    last_error: Cow<'static, str>,
}

impl Tries {
    /// Records a failed attempt on `choice`: its replica is ejected (before its place is
    /// handed on, so a request waiting for it routes again) when the failure says it is
    /// down. Returns whether another replica may take the request.
    fn failed(&mut self, choice: &Choice, sent: Sent) -> bool {
        let replica = &choice.replica;
        self.exclude |= 1u64 << choice.index;
        match sent {
            Sent::Answer(_) => true,
            Sent::Shed => {
                self.last_error = format!("replica {}: 503, shed", replica.name).into();
                true
            }
            Sent::Failed {
                error,
                eject,
                unsent,
            } => {
                if let Some(why) = eject {
                    replica.eject(why);
                }
                self.last_error = format!("replica {}: {error}", replica.name).into();
                self.resend || unsent
            }
        }
    }

    /// The answer when every attempt failed.
    fn refusal(self) -> Refusal {
        let not_again = if self.resend {
            ""
        } else {
            " (a POST that took no route is not sent twice)"
        };
        let why = format!("every attempt failed: {}{not_again}", self.last_error);
        Refusal::new(StatusCode::BAD_GATEWAY, why).after(self.made)
    }
}

/// What became of one attempt on the wire.
enum Sent {
    /// An answer to relay.
    Answer(Answer),
    /// A live replica shed the query (503) and another may take it.
    Shed,
    /// No answer.
    Failed {
        /// What went wrong.
        error: String,
        /// Why the replica is ejected for it, if it is.
        eject: Option<&'static str>,
        /// Nothing reached the replica: any request may go to another.
        unsent: bool,
    },
}

/// The request as it leaves for the replicas: method, target, body and headers.
pub struct Forwarded<'a> {
    /// What goes upstream.
    pub outgoing: Outgoing<'a>,
    /// The client's header fields.
    pub headers: &'a HeaderMap,
}

impl Balancer {
    /// Handles a client request other than `/healthz`, from `peer`: `routes` are the
    /// routes its method and path match.
    pub async fn search(&self, req: Request<Incoming>, routes: RouteSet, peer: IpAddr) -> Response {
        let (parts, body) = req.into_parts();
        let start = Instant::now();
        let id = forward::request_id(&parts.headers);
        let deadline = start + self.cfg.deadline();
        let mut ctx = Ctx::new(start, deadline, id, peer, self.router.snapshot());
        self.hooks.request(&mut ctx, &parts);
        let mut resp = match self.answer(&mut ctx, &parts, body, routes).await {
            Ok(resp) => resp,
            Err(made) => {
                let mut made = made;
                self.hooks
                    .response(&mut ctx, made.status(), &[], made.headers_mut());
                if let Some(a) = ctx.access.take() {
                    a.log("done");
                }
                made
            }
        };
        resp.headers_mut().insert(X_REQUEST_ID.clone(), ctx.id);
        resp
    }

    /// The answer to one request: the relayed (or merged) answer, or `Err` with an answer
    /// the balancer made (a refusal).
    async fn answer(
        &self,
        ctx: &mut Ctx,
        parts: &Parts,
        body: Incoming,
        routes: RouteSet,
    ) -> Result<Response, Response> {
        let path = parts.uri.path();
        let fallback = self.router.fallback.is_some() && method_bit(&parts.method) != 0;
        if routes.is_empty() && !fallback {
            return Err(self.refuse(&Unreadable::NoRoute, path));
        }
        let max = self.cfg.config.max_body_bytes;
        let body = body::read(body, max, ctx.deadline)
            .await
            .map_err(|e| self.refuse(&e, path))?;
        ctx.terms = match self.query_terms(parts, &body, routes) {
            Ok(terms) => Some(terms),
            Err(why) if !fallback || why.is_body() => return Err(self.refuse(&why, path)),
            Err(why) => {
                metrics::counter!(m::CLIENT_ERRORS, "kind" => why.kind()).increment(1);
                None
            }
        };
        let Some(slot) = self.admission.try_enter() else {
            return Err(self.overloaded());
        };
        self.hooks.query(ctx);
        let target = target(parts);
        let resend = !routes.is_empty() || method_bit(&parts.method) != POST;
        let method = if parts.method == Method::POST {
            upstream::Method::Post
        } else {
            upstream::Method::Get
        };
        let fwd = Forwarded {
            outgoing: Outgoing {
                method,
                path: &target,
                body: &body,
                resend,
            },
            headers: &parts.headers,
        };
        match &self.fanout {
            Some(fanout) => Ok(fanout
                .answer(self, ctx, &fwd, parts.uri.query(), slot)
                .await),
            None => match self.exchange(ctx, &self.shards[0], &fwd, None).await {
                Ok(ex) => Ok(self.stream(ctx, ex, slot)),
                Err(refused) => {
                    if let Some(a) = ctx.access.as_mut() {
                        a.attempts = refused.attempts;
                    }
                    Err(refused.into_response())
                }
            },
        }
    }

    /// The terms of a request's query: read by the first of `routes` that reads one, in
    /// order, from the body decoded (each route's own error when none does: the first
    /// route's), and tokenized.
    fn query_terms(
        &self,
        parts: &Parts,
        body: &Bytes,
        routes: RouteSet,
    ) -> Result<Terms, Unreadable> {
        // The content type matters only to a route's body, which is read decoded.
        let header = |name| {
            (!body.is_empty())
                .then(|| parts.headers.get(name))
                .flatten()
                .map(HeaderValue::as_bytes)
        };
        let max = self.cfg.config.max_body_bytes as usize;
        let decoded = extract::decoded(body, header(header::CONTENT_ENCODING), max)?;
        let read = balancer_routes::Request {
            query: parts.uri.query(),
            content_type: header(header::CONTENT_TYPE),
            body: &decoded,
        };
        let limit = self.cfg.config.max_query_bytes;
        let mut first = None;
        for i in routes.iter() {
            match extract::extract(self.cfg.routes.get(i), &read, limit) {
                Ok(q) => return Ok(Terms::of(&q)),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or(Unreadable::NoRoute))
    }

    /// The refusal of a request that `why` left without a query, counted by its kind: a
    /// 405 with `Allow` when no route took the request but some route (or the fallback)
    /// takes its path with other methods.
    pub fn refuse(&self, why: &Unreadable, path: &str) -> Response {
        metrics::counter!(m::CLIENT_ERRORS, "kind" => why.kind()).increment(1);
        let allow = match why {
            Unreadable::NoRoute if self.router.fallback.is_some() => Some("GET,HEAD,POST"),
            Unreadable::NoRoute => self.cfg.routes.allow(path),
            _ => None,
        };
        let Some(allow) = allow else {
            return json_error(why.status(), why.to_string());
        };
        let mut r = json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this path",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
        r
    }

    /// The answer when no place among `max_in_flight` is free.
    fn overloaded(&self) -> Response {
        let max = self.admission.max();
        let why = format!("overloaded: {max} requests in flight; retry later");
        Refusal::retry_later("overloaded", why).into_response()
    }

    /// Sends a request to a replica of `shard`, routed by its context (the `pin` slot when
    /// it is live), and again to the next-ranked one after a failure, within `retries` and
    /// the deadline: the answer that came back with its replica's place, or the error
    /// answer for the client.
    pub async fn exchange(
        &self,
        ctx: &Ctx,
        shard: &Shard,
        fwd: &Forwarded<'_>,
        pin: Option<(usize, Reason)>,
    ) -> Result<Exchanged, Refusal> {
        let mut tries = Tries {
            resend: fwd.outgoing.resend,
            exclude: 0,
            made: 0,
            last_error: Cow::Borrowed("no attempt made"),
        };
        for number in 0..=self.cfg.config.retries {
            // The first attempt starts when the request came in.
            let now = if number == 0 {
                ctx.start
            } else {
                Instant::now()
            };
            if now >= ctx.deadline {
                self.metrics.failures.increment(1);
                let why = format!(
                    "deadline passed after {number} attempts: {}",
                    tries.last_error
                );
                return Err(Refusal::new(StatusCode::GATEWAY_TIMEOUT, why).after(number));
            }
            let (choice, guard) = match self
                .place(ctx, shard, pin, tries.exclude, number == 0)
                .await
            {
                Ok(placed) => placed,
                Err(Unplaced::NoReplica) if number > 0 => break,
                Err(why) => return Err(self.unplaced(why).after(number)),
            };
            if number > 0 {
                self.metrics.retries.increment(1);
            }
            let mut attempt = Attempt::new(choice, number, ctx.terms.is_none());
            // The replica's cache sees the query now, in the order queries reach it.
            self.hooks.send(ctx, shard, &mut attempt);
            tries.made = number + 1;
            let last = number == self.cfg.config.retries;
            match self.send(ctx, fwd, &attempt, last).await {
                Sent::Answer(answer) => {
                    self.hooks.answer(ctx, shard, &attempt, &answer);
                    return Ok(Exchanged {
                        attempt,
                        guard,
                        answer,
                    });
                }
                failed => {
                    if !tries.failed(&attempt.choice, failed) {
                        break;
                    }
                }
            }
            drop(guard);
        }
        self.metrics.failures.increment(1);
        Err(tries.refusal())
    }

    /// The answer to a request that got no place on a replica.
    fn unplaced(&self, why: Unplaced) -> Refusal {
        match why {
            Unplaced::QueueTimeout(replica) => self.queue_timeout(&replica),
            Unplaced::NoReplica => {
                metrics::counter!(m::CLIENT_ERRORS, "kind" => "no_replica").increment(1);
                Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "no live replica")
            }
        }
    }

    /// One attempt on the wire: the request written to a pooled connection of its replica
    /// and the answer's head read, within the request timeout cut short by the deadline.
    async fn send(&self, ctx: &Ctx, fwd: &Forwarded<'_>, attempt: &Attempt, last: bool) -> Sent {
        let replica = &attempt.choice.replica;
        let sent = Instant::now();
        let full = sent + self.cfg.request_timeout();
        let until = full.min(ctx.deadline);
        let timeout = until.saturating_duration_since(sent);
        let write_headers = |out: &mut Vec<u8>| {
            forward::write_upstream_headers(out, fwd.headers, ctx.peer, &ctx.id);
            out.extend_from_slice(&attempt.headers);
        };
        let upstream = replica.pool.send(&fwd.outgoing, write_headers, timeout);
        match tokio::time::timeout_at(until.into(), upstream).await {
            Ok(Ok(answer))
                if answer.status == StatusCode::SERVICE_UNAVAILABLE
                    && !last
                    && fwd.outgoing.resend =>
            {
                // Shed by a live replica: try another one. A body still on the connection
                // is dropped with it rather than read.
                replica.metrics.shed.increment(1);
                Sent::Shed
            }
            Ok(Ok(answer)) => {
                replica
                    .stats
                    .answered(attempt.why, sent.elapsed().as_secs_f64());
                Sent::Answer(answer)
            }
            Ok(Err(e)) => Sent::Failed {
                error: e.to_string(),
                eject: e.is_connect().then_some("connect failed"),
                unsent: e.is_connect(),
            },
            // An attempt cut short by the request's deadline says nothing about the replica.
            Err(_) => Sent::Failed {
                error: format!("no response within {} ms", timeout.as_millis()),
                eject: (until == full).then_some("request timed out"),
                unsent: false,
            },
        }
    }

    /// The answer after a wait in `replica`'s queue timed out.
    fn queue_timeout(&self, replica: &Replica) -> Refusal {
        let c = &self.cfg.config;
        Refusal::retry_later(
            "queue_timeout",
            format!(
                "queue timeout: replica {} held {} requests until the queue timeout ({} ms) \
                 or the request's deadline; retry later",
                replica.name, c.replica_max_in_flight, c.queue_timeout_ms
            ),
        )
    }

    /// The routing decision for `ctx` in `shard` (skipping `exclude`; the `pin` slot when
    /// live): by the policy of its routing snapshot, or the fallback policy for a request
    /// with no query. One decision in [`ROUTE_SAMPLE`] is timed.
    fn decide(
        &self,
        ctx: &Ctx,
        shard: &Shard,
        pin: Option<(usize, Reason)>,
        exclude: u64,
    ) -> Result<Choice, NoReplica> {
        let Some(terms) = &ctx.terms else {
            let fallback = self.router.fallback.as_deref().ok_or(NoReplica)?;
            return shard.route(fallback, &QueryKey::new(0, &[]), None, exclude);
        };
        let timed = ROUTED.with(|n| {
            let next = n.get().wrapping_add(1);
            n.set(next);
            next % ROUTE_SAMPLE == 0
        });
        let start = timed.then(Instant::now);
        let choice = shard.route(&*ctx.routing.policy, &terms.key(), pin, exclude);
        if let Some(start) = start {
            self.metrics
                .route_seconds
                .record(start.elapsed().as_secs_f64());
        }
        choice
    }

    /// Routes the request and takes a place on the chosen replica, waiting in its queue
    /// while it is full. A `first` attempt counts in the `window` load and the slow-start
    /// clock once, when it is first routed, so queued queries count too.
    async fn place(
        &self,
        ctx: &Ctx,
        shard: &Shard,
        pin: Option<(usize, Reason)>,
        exclude: u64,
        first: bool,
    ) -> Result<(Choice, InFlightGuard), Unplaced> {
        // Read from the clock only if the request has to wait.
        let mut until = None;
        let mut counted = !first;
        loop {
            let choice = self
                .decide(ctx, shard, pin, exclude)
                .map_err(|NoReplica| Unplaced::NoReplica)?;
            if !counted {
                shard.routed(choice.index);
                counted = true;
            }
            if let Some(guard) = shard.slots.try_start(choice.index) {
                return Ok((choice, guard));
            }
            let until = *until
                .get_or_insert_with(|| ctx.deadline.min(Instant::now() + self.cfg.queue_timeout()));
            // Never a replica this request already failed on.
            let alternatives = !exclude
                & match (&ctx.terms, shard.slots.steals()) {
                    (Some(terms), true) => ctx
                        .routing
                        .policy
                        .alternatives(&terms.key(), self.cfg.config.steal_share),
                    _ => u64::MAX,
                };
            if let Some(guard) = wait_in_queue(shard, &choice, until, alternatives).await? {
                if guard.slot() == choice.index {
                    return Ok((choice, guard));
                }
                // Late binding gave it a place on another replica.
                if let Some(stolen) = shard.choice_at(guard.slot(), Reason::Stolen) {
                    return Ok((stolen, guard));
                }
            }
        }
    }

    /// The client's response relaying an exchanged answer: it streams out holding the
    /// replica's place and the client's slot.
    fn stream(&self, ctx: &mut Ctx, ex: Exchanged, slot: Slot) -> Response {
        let Exchanged {
            attempt,
            guard,
            answer,
        } = ex;
        let Answer {
            status,
            mut headers,
            body,
        } = answer;
        forward::strip_hop_by_hop(&mut headers);
        self.hooks.response(ctx, status, &[&attempt], &mut headers);
        // The request stays in flight until its body is streamed out; a streamed body's
        // connection then goes back to the replica's pool.
        let parts = RelayParts {
            pool: Arc::clone(&attempt.choice.replica.pool),
            guard,
            slot,
            deadline: ctx.deadline,
            access: ctx.access.take(),
        };
        let mut resp = Response::new(Body::new(Relay::new(body, parts)));
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        resp
    }
}

/// Waits in the chosen replica's queue for a place there (HAProxy's per-server queue):
/// the place a finished request frees goes to the oldest waiter. With `steal_after_ms`
/// the place may be another replica's ([`crate::admit`]'s late binding): one handed over
/// by a freed replica, or one this request takes itself at its steal checks, among
/// `alternatives` (a bit mask of slots). Gives up at
/// `until` (the queue timeout or the request's deadline, set once per attempt); returns
/// `None` (route again) when a replica that took requests when it was chosen stops taking
/// them meanwhile (ejected, drained or removed), even if a place was handed over there.
async fn wait_in_queue(
    shard: &Shard,
    choice: &Choice,
    until: Instant,
    alternatives: u64,
) -> Result<Option<InFlightGuard>, Unplaced> {
    let r = &choice.replica;
    let takes_requests = || r.is_healthy() && !r.is_drained() && !r.is_removed();
    // Chosen as a last resort (every replica ejected): wait for it all the same.
    let was_taking = takes_requests();
    let left = || was_taking && !takes_requests();
    let mut waiter = match shard.slots.enqueue(choice.index, alternatives) {
        Ok(guard) => return Ok(Some(guard)),
        Err(waiter) => waiter,
    };
    let mut steal_check = waiter.steal_at();
    loop {
        let mut look = until.min(Instant::now() + QUEUE_RECHECK);
        if let Some(at) = steal_check {
            look = look.min(at);
        }
        if let Some(guard) = waiter.wait_until(look.into()).await {
            // A place handed over by a request that failed on a replica now gone: hand it
            // on and route again.
            let kept = guard.slot() != choice.index || !left();
            return Ok(kept.then_some(guard));
        }
        let now = Instant::now();
        if now >= until {
            return Err(Unplaced::QueueTimeout(Arc::clone(r)));
        }
        if left() {
            return Ok(None);
        }
        if steal_check.is_some_and(|at| now >= at) {
            // Dropping the waiter on return takes this request out of its queue.
            if let Some(guard) = waiter.take_free() {
                return Ok(Some(guard));
            }
            steal_check = waiter.next_steal_check(now);
        }
    }
}

/// A request's target as it goes upstream.
pub fn target(parts: &Parts) -> PathAndQuery {
    match parts.uri.path_and_query() {
        Some(pq) => pq.clone(),
        None => PathAndQuery::from_static("/"),
    }
}
