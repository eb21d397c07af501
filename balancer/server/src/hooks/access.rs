//! The access log's hook (`access_log = true`): the request's line ([`Entry`]) is started
//! with the request and filled in with its answer; the relay writes it when the body has
//! been relayed (or cut), the request path when it made the answer itself.

use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};

use super::Hook;
use crate::access::Entry;
use crate::ctx::{Attempt, Ctx};

/// The access log's hook: the line is started with the request and filled in with its
/// answer; the relay (or the end of a made answer) writes it.
pub struct AccessLog;

impl Hook for AccessLog {
    fn on_request(&self, ctx: &mut Ctx, parts: &Parts) {
        ctx.access = Some(Entry {
            start: ctx.start,
            request_id: ctx.id.clone(),
            route: format!("{} {}", parts.method, parts.uri.path()),
            replica: "-".to_owned(),
            reason: "-",
            status: 0,
            attempts: 0,
        });
    }

    fn on_response(
        &self,
        ctx: &mut Ctx,
        status: StatusCode,
        answered: &[&Attempt],
        _headers: &mut HeaderMap,
    ) {
        let Some(entry) = ctx.access.as_mut() else {
            return;
        };
        entry.status = status.as_u16();
        if let Some(first) = answered.first() {
            let names: Vec<&str> = answered
                .iter()
                .map(|a| a.choice.replica.name.as_str())
                .collect();
            entry.replica = names.join("+");
            entry.reason = first.why.name();
            entry.attempts = answered.iter().map(|a| a.number + 1).sum();
        }
    }
}
