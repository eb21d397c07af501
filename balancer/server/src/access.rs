//! The access log, off by default (`access_log = true` turns it on, [`crate::hooks::access`]):
//! one `tracing` event per client request at target `access`, level info, written when the
//! response has been relayed to its end (or cut, or refused), with the method and path (not
//! the query string: it holds the query), the replica, the routing reason, the status, the
//! latency in milliseconds from the request's arrival, the upstream attempts and the
//! request id. The log line's time is the subscriber's timestamp.

use std::time::Instant;

use axum::http::HeaderValue;

/// What one access-log line says; built only when the access log is on.
#[derive(Debug)]
pub struct Entry {
    /// When the request arrived.
    pub start: Instant,
    /// The request id sent upstream and echoed.
    pub request_id: HeaderValue,
    /// The method and path.
    pub route: String,
    /// The replica that answered (`-` when none did; `a+b` for a sharded query).
    pub replica: String,
    /// The routing reason (`vote`, `overflow`, `no-vote`, `failover`, or `-`).
    pub reason: &'static str,
    /// The status sent to the client.
    pub status: u16,
    /// Upstream attempts made.
    pub attempts: u32,
}

impl Entry {
    /// Writes the line; `outcome` says how the response ended (`done`, `cut`, `aborted`).
    pub fn log(&self, outcome: &'static str) {
        tracing::info!(
            target: "access",
            route = ?self.route,
            replica = %self.replica,
            reason = self.reason,
            status = self.status,
            latency_ms = self.start.elapsed().as_secs_f64() * 1e3,
            attempts = self.attempts,
            request_id = self.request_id.to_str().unwrap_or("-"),
            outcome,
        );
    }
}
