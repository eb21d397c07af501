//! The request path's optional concerns, each a [`Hook`] chosen when the config loads
//! (pingora's phase callbacks, tower's layers): the request path itself only routes,
//! sends, retries and relays, and calls the hooks of its config at four points of a
//! request. A concern the config does not ask for costs nothing: its hook is not in the
//! list.
//!
//! | hook | when | what |
//! |---|---|---|
//! | [`access::AccessLog`] | `access_log = true` | one log line per request |
//! | [`ramp::RampCount`] | `table` | queries routed during a ramp, by the table that scored them |
//! | [`hint::CacheHint`] | `[policy] cache_admission` | the no-cache hint, on the request and for the shadow |
//! | [`shadow::ShadowFeed`] | `[shadow]` | the query fed to its replica's shadow cache |
//! | [`feedback::Feedback`] | `load = "work"`, `backlog_reports_ms` | the answer's flash work and backlog report |
//! | [`latency::LatencyFeed`] | `ars`, `prequal` | the answer's response time, service time and queue |
//! | [`headers::RoutingHeaders`] | `routing_headers = true` | `x-ballot-replica`, `x-ballot-reason` on the answer |
//!
//! Their order is fixed: the hint before the shadow cache (the shadow keeps out what the
//! hint names), the shadow before the feedback (whose work may be the shadow's estimate).

pub mod access;
pub mod feedback;
pub mod headers;
pub mod hint;
pub mod latency;
pub mod ramp;
pub mod shadow;

use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use balancer::load::LoadKind;
use balancer::policy::PolicyKind;

use crate::config::Validated;
use crate::ctx::{Attempt, Ctx};
use crate::shard::Shard;
use crate::upstream::Answer;

/// One optional concern of the request path. Every method has a default that does
/// nothing; a hook overrides the points it needs.
pub trait Hook: Send + Sync {
    /// A request arrived with the head `parts`: its context is new, nothing is read yet.
    fn on_request(&self, _ctx: &mut Ctx, _parts: &Parts) {}
    /// The request's query was read and it was admitted, before it is routed (once per
    /// request, however many shards and attempts follow).
    fn on_query(&self, _ctx: &Ctx) {}
    /// An attempt is about to be sent to its replica of `shard` (header lines go in
    /// `attempt.headers`).
    fn on_send(&self, _ctx: &Ctx, _shard: &Shard, _attempt: &mut Attempt) {}
    /// The attempt's answer head came back (not a shed 503 that is retried).
    fn on_answer(&self, _ctx: &Ctx, _shard: &Shard, _attempt: &Attempt, _answer: &Answer) {}
    /// The answer goes to the client with `status`, from the attempts that `answered` (one,
    /// every shard's in shard order, or none for an answer the balancer made).
    fn on_response(
        &self,
        _ctx: &mut Ctx,
        _status: StatusCode,
        _answered: &[&Attempt],
        _headers: &mut HeaderMap,
    ) {
    }
}

/// The hooks a config asks for, in their order.
pub struct Hooks(Vec<Box<dyn Hook>>);

impl Hooks {
    /// The hooks of `cfg`.
    pub fn of(cfg: &Validated) -> Hooks {
        let c = &cfg.config;
        let mut list: Vec<Box<dyn Hook>> = Vec::new();
        if c.access_log {
            list.push(Box::new(access::AccessLog));
        }
        if c.policy.name.needs_table() {
            list.push(Box::new(ramp::RampCount::default()));
        }
        if let Some(rule) = c.policy.cache_admission {
            list.push(Box::new(hint::CacheHint::new(rule)));
        }
        if c.shadow.is_some() {
            list.push(Box::new(shadow::ShadowFeed::default()));
        }
        if cfg.load == LoadKind::Work || c.backlog_reports_ms > 0 {
            list.push(Box::new(feedback::Feedback::new(cfg)));
        }
        if matches!(c.policy.name, PolicyKind::Ars | PolicyKind::Prequal) {
            list.push(Box::new(latency::LatencyFeed));
        }
        if c.routing_headers {
            list.push(Box::new(headers::RoutingHeaders));
        }
        Hooks(list)
    }

    /// Runs [`Hook::on_request`] of each hook.
    pub fn request(&self, ctx: &mut Ctx, parts: &Parts) {
        self.0.iter().for_each(|h| h.on_request(ctx, parts));
    }

    /// Runs [`Hook::on_query`] of each hook.
    pub fn query(&self, ctx: &Ctx) {
        self.0.iter().for_each(|h| h.on_query(ctx));
    }

    /// Runs [`Hook::on_send`] of each hook.
    pub fn send(&self, ctx: &Ctx, shard: &Shard, attempt: &mut Attempt) {
        self.0.iter().for_each(|h| h.on_send(ctx, shard, attempt));
    }

    /// Runs [`Hook::on_answer`] of each hook.
    pub fn answer(&self, ctx: &Ctx, shard: &Shard, attempt: &Attempt, answer: &Answer) {
        self.0
            .iter()
            .for_each(|h| h.on_answer(ctx, shard, attempt, answer));
    }

    /// Runs [`Hook::on_response`] of each hook.
    pub fn response(
        &self,
        ctx: &mut Ctx,
        status: StatusCode,
        answered: &[&Attempt],
        headers: &mut HeaderMap,
    ) {
        self.0
            .iter()
            .for_each(|h| h.on_response(ctx, status, answered, headers));
    }
}
