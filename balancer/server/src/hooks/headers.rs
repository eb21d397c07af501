//! `routing_headers = true`: every relayed answer names the replica that answered in
//! `x-ballot-replica` (a sharded query's replicas, comma-separated, in shard order) and the
//! routing rule that sent the query there in `x-ballot-reason` (`vote`, `home`,
//! `overflow`, `stall-guard`, `no-vote`, `stolen` or `failover`; a sharded query's lead shard's).
//! Off by default: they tell clients the names of the replicas behind the balancer.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::Hook;
use crate::ctx::{Attempt, Ctx};

/// The response header naming the replica that answered.
static X_BALLOT_REPLICA: HeaderName = HeaderName::from_static("x-ballot-replica");
/// The response header giving the routing reason.
static X_BALLOT_REASON: HeaderName = HeaderName::from_static("x-ballot-reason");

/// The routing headers' hook.
pub struct RoutingHeaders;

impl Hook for RoutingHeaders {
    fn on_response(
        &self,
        _ctx: &mut Ctx,
        _status: StatusCode,
        answered: &[&Attempt],
        headers: &mut HeaderMap,
    ) {
        let replica = match answered {
            [] => return,
            [one] => one.choice.replica.header.clone(),
            many => {
                let names: Vec<&str> = many
                    .iter()
                    .map(|a| a.choice.replica.name.as_str())
                    .collect();
                match HeaderValue::from_str(&names.join(",")) {
                    Ok(v) => v,
                    Err(_) => return,
                }
            }
        };
        headers.insert(X_BALLOT_REPLICA.clone(), replica);
        headers.insert(
            X_BALLOT_REASON.clone(),
            HeaderValue::from_static(answered[0].why.name()),
        );
    }
}
