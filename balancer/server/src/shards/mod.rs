//! A sharded backend (`[shards]`): the index is document-partitioned into S shards, each
//! served by its own replicas, and a query goes to one replica of every shard, in
//! parallel; the answer is the shards' answers merged ([`mod@merge`]) and waits for the
//! slowest shard.
//!
//! Each shard is a whole [`Proxy`] over its own replicas: its own loads, health checks,
//! queues, retries and (with `tables`) table. How a shard's replica is picked is
//! `[shards] route`:
//! * `same-column` (default): shard 0's policy picks a column (a replica position, the
//!   table's vote) once per query, over shard 0's loads, and every shard's part goes to its
//!   replica of that column: the replicas of one column see the same queries and keep the
//!   same terms cached. A shard whose replica of that column is not live routes its part
//!   itself (and so does a retry after a failed attempt).
//! * `per-shard`: every shard routes its part with its own policy and loads (the latency
//!   seed's power of d per shard with `policy = "p2c"`; with `table`, the choice among the
//!   homes by backlog per shard), and with `tables` each shard votes with its own table.
//!
//! A shard with no replica left to answer (every attempt failed, or none live), or whose
//! replica's answer is unreadable or comes from another shard's index (each answer names
//! its shard, from the index's manifest), makes the query fail (502; when no shard
//! answered and every shard failed the same way, that status: 503 with no live replica,
//! 504 past the deadline) or, with `missing = "partial"`, the answer is the other shards'
//! merged answer with `"partial": true` and the missing shards named. A shard's 4xx (a bad
//! `k`, say) is the client's answer as it came.
//!
//! The client's admission slot, request id, deadline and access-log line are the query's;
//! each shard's part holds a place on its replica until that replica's answer has been
//! read. Each shard's proxy counts its own part as it counts a request without shards
//! (`ballot_requests_total{replica}`, retries, `ballot_upstream_failures_total`, client
//! errors such as `no_replica`), and `ballot_fanout_total{answer}` counts the queries by
//! outcome.

pub mod merge;

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use axum::http::request::Parts;
use axum::http::{header, HeaderName, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hyper::body::Incoming;
use metrics::Counter;

use crate::access;
use crate::config::{MissingShard, ShardRoute, ShardsConfig};
use crate::metrics as m;
use crate::proxy::{end, target, Key, Proxy, Refusal, Sending};
use crate::upstream::read_whole;
use merge::{merge, ShardAnswer};

/// The largest answer read from one shard's replica.
const MAX_SHARD_ANSWER: usize = 4 << 20;

/// The response headers naming the replicas and the routing rule (`routing_headers`).
static X_BALLOT_REPLICA: HeaderName = HeaderName::from_static("x-ballot-replica");
static X_BALLOT_REASON: HeaderName = HeaderName::from_static("x-ballot-reason");

/// The fan-out over the shards.
pub struct Fanout {
    /// The proxies of shards 1 to S−1 (shard 0's is the app's own).
    pub others: Vec<Proxy>,
    route: ShardRoute,
    missing: MissingShard,
    full: Counter,
    partial: Counter,
    failed: Counter,
}

/// A client request, as every shard's part sends it.
struct Client<'a> {
    parts: &'a Parts,
    route: Option<usize>,
    peer: IpAddr,
    id: &'a HeaderValue,
    start: Instant,
}

/// One shard's part of a query, answered.
struct Part {
    status: StatusCode,
    body: Vec<u8>,
    replica: String,
    reason: &'static str,
    attempts: u32,
}

/// What became of one shard's part.
enum Outcome {
    /// Its replica answered.
    Answered(Part),
    /// No replica answered.
    Failed(Refusal),
}

impl Fanout {
    /// The fan-out over shard 0 (the app's proxy) and `others`.
    pub fn new(others: Vec<Proxy>, cfg: &ShardsConfig) -> Self {
        Fanout {
            others,
            route: cfg.route,
            missing: cfg.missing,
            full: metrics::counter!(m::FANOUT, "answer" => "full"),
            partial: metrics::counter!(m::FANOUT, "answer" => "partial"),
            failed: metrics::counter!(m::FANOUT, "answer" => "failed"),
        }
    }

    /// Shards.
    pub fn count(&self) -> usize {
        self.others.len() + 1
    }

    /// Handles a client search from `peer` that took `route`: fans it out through `lead`
    /// (shard 0's proxy) and the other shards' proxies and merges the answers.
    pub async fn search(
        &self,
        lead: &Proxy,
        req: Request<Incoming>,
        route: Option<usize>,
        peer: IpAddr,
    ) -> Response {
        let (parts, body) = req.into_parts();
        let (start, id, mut access) = lead.begin(&parts);
        let client = Client {
            parts: &parts,
            route,
            peer,
            id: &id,
            start,
        };
        let resp = self.answer(lead, &client, body, &mut access).await;
        end(resp, id, access)
    }

    async fn answer(
        &self,
        lead: &Proxy,
        client: &Client<'_>,
        body: Incoming,
        access: &mut Option<access::Entry>,
    ) -> Response {
        let &Client {
            parts,
            route,
            peer,
            id,
            start,
        } = client;
        let deadline = start + lead.state.cfg.deadline();
        let body = match lead.read_body(parts, body, route, deadline).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let text = lead.query_text(parts, &body, route);
        let key = match lead.key(&text) {
            Ok(key) => key,
            Err(why) => return lead.refuse(why, parts.uri.path()),
        };
        let k = requested_k(parts.uri.query());
        let Some(_slot) = lead.admit() else {
            return lead.overloaded();
        };
        let pin = match (self.route, key) {
            (ShardRoute::SameColumn, Key::Query(q)) => lead.column(q),
            _ => None,
        };
        let path = target(parts);
        let parts_of = std::iter::once(lead).chain(&self.others).map(|proxy| {
            let sending = Sending {
                key,
                outgoing: proxy.outgoing(parts, route, &path, &body),
                headers: &parts.headers,
                peer,
                id,
                start,
                deadline,
                pin,
            };
            Box::pin(async move { send_part(proxy, sending, deadline).await })
                as Pin<Box<dyn Future<Output = Outcome> + Send + '_>>
        });
        let outcomes = join_all(parts_of.collect()).await;
        self.respond(outcomes, k, lead.state.cfg.config.routing_headers, access)
    }

    /// The client's answer from every shard's outcome.
    fn respond(
        &self,
        outcomes: Vec<Outcome>,
        k: usize,
        routing_headers: bool,
        access: &mut Option<access::Entry>,
    ) -> Response {
        let count = outcomes.len();
        let mut answered = Vec::with_capacity(count);
        let mut missing = Vec::new();
        let mut reason = "-";
        let mut attempts = 0;
        // Retry later: some shard's queue or admission was full.
        let mut retry_after = false;
        for (shard, outcome) in outcomes.into_iter().enumerate() {
            let part = match outcome {
                Outcome::Failed(refusal) => {
                    retry_after |= refusal.retry_after;
                    missing.push(merge::AbsentShard {
                        shard,
                        status: refusal.status.as_u16(),
                        error: refusal.message,
                    });
                    continue;
                }
                Outcome::Answered(part) => part,
            };
            attempts += part.attempts;
            if shard == 0 || reason == "-" {
                reason = part.reason;
            }
            if part.status.is_client_error() {
                // The request itself is wrong: every shard says the same.
                self.failed.increment(1);
                let mut r = Response::new(axum::body::Body::from(part.body));
                *r.status_mut() = part.status;
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return r;
            }
            let read = if part.status.is_success() {
                serde_json::from_slice::<ShardAnswer>(&part.body)
                    .map_err(|e| format!("replica {}: unreadable answer: {e}", part.replica))
                    .and_then(|a| match a.misplaced(&part.replica, shard, count) {
                        Some(wrong) => Err(wrong),
                        None => Ok(a),
                    })
                    .map_err(|error| (StatusCode::BAD_GATEWAY, error))
            } else {
                let error = format!("replica {} answered {}", part.replica, part.status);
                Err((part.status, error))
            };
            match read {
                Ok(a) => answered.push((shard, part.replica, a)),
                Err((status, error)) => missing.push(merge::AbsentShard {
                    shard,
                    status: status.as_u16(),
                    error,
                }),
            }
        }
        if let Some(a) = access.as_mut() {
            a.replica = answered
                .iter()
                .map(|p| p.1.as_str())
                .collect::<Vec<_>>()
                .join("+");
            a.reason = reason;
            a.attempts = attempts;
        }
        let complete = missing.is_empty();
        if !complete && (answered.is_empty() || self.missing == MissingShard::Error) {
            self.failed.increment(1);
            // No shard answered, all for one reason (no live replica: 503; the deadline:
            // 504): that status; otherwise the gateway's error.
            let first = missing[0].status;
            let status = match StatusCode::from_u16(first) {
                Ok(s) if answered.is_empty() && missing.iter().all(|m| m.status == first) => s,
                _ => StatusCode::BAD_GATEWAY,
            };
            let error = missing
                .iter()
                .map(|s| format!("shard {}: {}", s.shard, s.error))
                .collect::<Vec<_>>()
                .join("; ");
            let body = serde_json::json!({
                "error": error,
                "shards": {
                    "count": count,
                    "answered": answered.iter().map(|a| a.0).collect::<Vec<_>>(),
                    "missing": missing,
                },
            });
            let mut r = (status, Json(body)).into_response();
            if retry_after && status == StatusCode::SERVICE_UNAVAILABLE {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            return r;
        }
        if complete {
            self.full.increment(1);
        } else {
            self.partial.increment(1);
        }
        let merged = merge(answered, missing, count, k);
        let names = routing_headers.then(|| merged.replicas.join(","));
        let mut r = Json(merged).into_response();
        if let Some(v) = names.and_then(|n| HeaderValue::from_str(&n).ok()) {
            r.headers_mut().insert(X_BALLOT_REPLICA.clone(), v);
            r.headers_mut()
                .insert(X_BALLOT_REASON.clone(), HeaderValue::from_static(reason));
        }
        r
    }
}

/// One shard's part: sent through its proxy (routing, queue, retries), its answer read
/// whole while the part holds its place on the replica.
async fn send_part(proxy: &Proxy, sending: Sending<'_>, deadline: Instant) -> Outcome {
    let ex = match proxy.exchange(&sending, &mut None).await {
        Ok(ex) => ex,
        Err(refusal) => return Outcome::Failed(refusal),
    };
    let replica = &ex.choice.replica;
    match read_whole(ex.answer.body, &replica.pool, MAX_SHARD_ANSWER, deadline).await {
        Ok(body) => Outcome::Answered(Part {
            status: ex.answer.status,
            body,
            replica: replica.name.clone(),
            reason: ex.why.name(),
            attempts: ex.attempts,
        }),
        Err(e) => Outcome::Failed(Refusal::new(
            StatusCode::BAD_GATEWAY,
            format!("replica {}: {e}", replica.name),
        )),
    }
}

/// The `k` of a search's query string: the documents the merged answer keeps. An
/// unreadable `k` is the replicas' to refuse (each shard answers 400, passed on).
fn requested_k(query: Option<&str>) -> usize {
    data::query::params(query.unwrap_or(""))
        .find(|p| p.key == "k")
        .and_then(|p| p.value(24).ok()?.parse().ok())
        .unwrap_or(data::query::DEFAULT_K)
}

/// Runs the futures side by side and returns their outputs in order.
async fn join_all<T>(mut futures: Vec<Pin<Box<dyn Future<Output = T> + Send + '_>>>) -> Vec<T> {
    let mut done: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_comes_from_the_query_string() {
        assert_eq!(requested_k(Some("q=a&k=3")), 3);
        assert_eq!(requested_k(Some("q=a")), data::query::DEFAULT_K);
        assert_eq!(requested_k(None), data::query::DEFAULT_K);
        assert_eq!(requested_k(Some("k=x")), data::query::DEFAULT_K);
    }
}
