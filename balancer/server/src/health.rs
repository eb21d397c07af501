//! Active health checks, as HAProxy's `check inter T fall F rise R`: every interval each
//! replica's `GET /healthz` must answer 2xx within the timeout; `fall` consecutive failures
//! eject it and `rise` consecutive passes re-admit it. Passive ejection (a failed or timed
//! out request) lives in the proxy; re-admission always goes through these checks.

use std::sync::Arc;
use std::time::Duration;

use axum::http::Request;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;

use crate::config::HealthConfig;
use crate::proxy::{client, UpstreamClient};
use crate::replicas::Replica;

/// One check of `replica`.
async fn check(client: &UpstreamClient, replica: &Replica, timeout: Duration) -> bool {
    let url = format!("http://{}/healthz", replica.address);
    let Ok(req) = Request::get(url).body(Empty::<Bytes>::new()) else {
        return false;
    };
    let fut = async {
        let resp = client.request(req).await.ok()?;
        let ok = resp.status().is_success();
        resp.into_body().collect().await.ok()?;
        Some(ok)
    };
    matches!(tokio::time::timeout(timeout, fut).await, Ok(Some(true)))
}

/// Spawns the checker of `replica`; it stops once the replica is removed.
pub fn spawn(replica: Arc<Replica>, cfg: HealthConfig) {
    tokio::spawn(async move {
        let timeout = Duration::from_millis(cfg.timeout_ms);
        let client = client(timeout);
        let mut tick = tokio::time::interval(Duration::from_millis(cfg.interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if replica.is_removed() {
                break;
            }
            let passed = check(&client, &replica, timeout).await;
            replica.record_check(passed, cfg.fall, cfg.rise);
        }
    });
}
