//! The fan-out step of a sharded backend (`[shards]`): the index is document-partitioned
//! into S shards, each served by its own replicas, and a query goes to one replica of every
//! shard, in parallel, through the same exchange as an unsharded request (routing, queue,
//! retries, hooks) with the same context: one tokenization, one routing snapshot. The
//! answer is the shards' answers merged ([`balancer_routes::merge`]) and waits for the
//! slowest shard.
//!
//! How a shard's replica is picked is `[shards] route`:
//! * `same-column` (default): the policy picks a column (a replica position, the table's
//!   vote) once per query, over shard 0's loads, and every shard's part goes to its replica
//!   of that column: the replicas of one column see the same queries and keep the same
//!   terms cached. A shard whose replica of that column is not live routes its part itself
//!   (and so does a retry after a failed attempt).
//! * `per-shard`: every shard routes its part with the policy over its own loads (the
//!   latency seed's power of d per shard with `policy = "p2c"`; with `table`, the choice
//!   among the homes by backlog per shard).
//!
//! A shard with no replica left to answer (every attempt failed, or none live), or whose
//! replica's answer is unreadable or comes from another shard's index (each answer names
//! its shard, from the index's manifest), makes the query fail (502; when no shard
//! answered and every shard failed the same way, that status: 503 with no live replica,
//! 504 past the deadline) or, with `missing = "partial"`, the answer is the other shards'
//! merged answer with `"partial": true` and the missing shards named. A shard's 4xx (a bad
//! `k`, say) is the client's answer as it came. `ballot_fanout_total{answer}` counts the
//! queries by outcome.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use balancer_routes::merge::{merge, AbsentShard, ShardAnswer};
use futures_util::future::join_all;
use metrics::Counter;

use crate::admit::Slot;
use crate::config::{MissingShard, ShardRoute, ShardsConfig};
use crate::ctx::{Attempt, Ctx};
use crate::metrics as m;
use crate::pipeline::{Forwarded, Refusal};
use crate::shard::Shard;
use crate::upstream::read_whole;
use crate::Balancer;

/// The largest answer read from one shard's replica.
const MAX_SHARD_ANSWER: usize = 4 << 20;

/// The fan-out's settings and counters.
pub struct Fanout {
    route: ShardRoute,
    missing: MissingShard,
    full: Counter,
    partial: Counter,
    failed: Counter,
}

/// One shard's part of a query, answered.
struct Part {
    attempt: Attempt,
    status: StatusCode,
    body: Vec<u8>,
}

impl Fanout {
    /// The fan-out of `cfg`.
    pub fn new(cfg: &ShardsConfig) -> Self {
        Fanout {
            route: cfg.route,
            missing: cfg.missing,
            full: metrics::counter!(m::FANOUT, "answer" => "full"),
            partial: metrics::counter!(m::FANOUT, "answer" => "partial"),
            failed: metrics::counter!(m::FANOUT, "answer" => "failed"),
        }
    }

    /// Sends the request of `ctx` to one replica of every shard of `lb` and answers with
    /// the merged answers; `query` is the request's query string (its `k`).
    pub async fn answer(
        &self,
        lb: &Balancer,
        ctx: &mut Ctx,
        fwd: &Forwarded<'_>,
        query: Option<&str>,
        _slot: Slot,
    ) -> Response {
        let pin = match (self.route, &ctx.terms) {
            (ShardRoute::SameColumn, Some(_)) => lb.column(ctx),
            _ => None,
        };
        let shared: &Ctx = ctx;
        let parts = lb
            .shards
            .iter()
            .map(|shard| part(lb, shared, shard, fwd, pin));
        let outcomes = join_all(parts).await;
        self.respond(lb, ctx, outcomes, requested_k(query))
    }

    /// The client's answer from every shard's outcome.
    fn respond(
        &self,
        lb: &Balancer,
        ctx: &mut Ctx,
        outcomes: Vec<Result<Part, Refusal>>,
        k: usize,
    ) -> Response {
        let count = outcomes.len();
        let mut answered = Vec::with_capacity(count);
        let mut attempts = Vec::with_capacity(count);
        let mut missing = Vec::new();
        // Retry later: some shard's queue or admission was full.
        let mut retry_after = false;
        for (shard, outcome) in outcomes.into_iter().enumerate() {
            let part = match outcome {
                Ok(part) => part,
                Err(refusal) => {
                    retry_after |= refusal.retry_after;
                    missing.push(absent(shard, refusal.status, refusal.message));
                    continue;
                }
            };
            let replica = part.attempt.choice.replica.name.clone();
            if part.status.is_client_error() {
                // The request itself is wrong: every shard says the same.
                self.failed.increment(1);
                let mut r = axum::body::Body::from(part.body).into_response();
                *r.status_mut() = part.status;
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return r;
            }
            match read_part(&part, &replica, shard, count) {
                Ok(a) => answered.push((shard, replica, a)),
                Err((status, error)) => missing.push(absent(shard, status, error)),
            }
            attempts.push(part.attempt);
        }
        let complete = missing.is_empty();
        if !complete && (answered.is_empty() || self.missing == MissingShard::Error) {
            self.failed.increment(1);
            let mut r = failed(answered.iter().map(|a| a.0).collect(), missing, count);
            if retry_after && r.status() == StatusCode::SERVICE_UNAVAILABLE {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            let refs: Vec<&Attempt> = attempts.iter().collect();
            let status = r.status();
            lb.hooks.response(ctx, status, &refs, r.headers_mut());
            return r;
        }
        if complete {
            self.full.increment(1);
        } else {
            self.partial.increment(1);
        }
        let mut r = Json(merge(answered, missing, count, k)).into_response();
        let refs: Vec<&Attempt> = attempts.iter().collect();
        let status = r.status();
        lb.hooks.response(ctx, status, &refs, r.headers_mut());
        r
    }
}

impl Balancer {
    /// The replica slot the policy picks for `ctx` in shard 0 now, and why, without taking
    /// a place there (a sharded query's column; `None`: no replica is left).
    fn column(&self, ctx: &Ctx) -> Option<(usize, balancer::policy::Reason)> {
        let terms = ctx.terms.as_ref()?;
        let shard = self.shards.first()?;
        let choice = shard
            .route(&*ctx.routing.policy, &terms.key(), None, 0)
            .ok()?;
        Some((choice.index, choice.reason))
    }
}

/// One shard's part: sent through the exchange (routing, queue, retries), its answer read
/// whole while the part holds its place on the replica.
async fn part(
    lb: &Balancer,
    ctx: &Ctx,
    shard: &Shard,
    fwd: &Forwarded<'_>,
    pin: Option<(usize, balancer::policy::Reason)>,
) -> Result<Part, Refusal> {
    let ex = lb.exchange(ctx, shard, fwd, pin).await?;
    let replica = &ex.attempt.choice.replica;
    match read_whole(
        ex.answer.body,
        &replica.pool,
        MAX_SHARD_ANSWER,
        ctx.deadline,
    )
    .await
    {
        Ok(body) => Ok(Part {
            status: ex.answer.status,
            body,
            attempt: ex.attempt,
        }),
        Err(e) => Err(Refusal::new(
            StatusCode::BAD_GATEWAY,
            format!("replica {}: {e}", replica.name),
        )),
    }
}

/// A shard's answer read: the replica's JSON, from the shard it is configured for.
fn read_part(
    part: &Part,
    replica: &str,
    shard: usize,
    count: usize,
) -> Result<ShardAnswer, (StatusCode, String)> {
    if !part.status.is_success() {
        let error = format!("replica {replica} answered {}", part.status);
        return Err((part.status, error));
    }
    let a = serde_json::from_slice::<ShardAnswer>(&part.body).map_err(|e| {
        let error = format!("replica {replica}: unreadable answer: {e}");
        (StatusCode::BAD_GATEWAY, error)
    })?;
    match a.misplaced(replica, shard, count) {
        Some(wrong) => Err((StatusCode::BAD_GATEWAY, wrong)),
        None => Ok(a),
    }
}

fn absent(shard: usize, status: StatusCode, error: String) -> AbsentShard {
    AbsentShard {
        shard,
        status: status.as_u16(),
        error,
    }
}

/// The error answer when a shard is missing and no partial answer is allowed: when no
/// shard answered and every shard failed for one reason (no live replica: 503; the
/// deadline: 504), that status; otherwise the gateway's error.
fn failed(answered: Vec<usize>, missing: Vec<AbsentShard>, count: usize) -> Response {
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
        "shards": { "count": count, "answered": answered, "missing": missing },
    });
    (status, Json(body)).into_response()
}

/// The `k` of a search's query string: the documents the merged answer keeps. An
/// unreadable `k` is the replicas' to refuse (each shard answers 400, passed on).
fn requested_k(query: Option<&str>) -> usize {
    data::query::params(query.unwrap_or(""))
        .find(|p| p.key == "k")
        .and_then(|p| p.value(24).ok()?.parse().ok())
        .unwrap_or(data::query::DEFAULT_K)
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
