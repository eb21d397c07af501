//! Active health checks, as HAProxy's `check inter T fall F rise R`: every interval each
//! replica's `GET /healthz` (or the configured `path`) must answer 2xx within the timeout; `fall` consecutive failures
//! eject it and `rise` consecutive passes re-admit it. Passive ejection (a failed or timed
//! out request) lives in the proxy; re-admission always goes through these checks.

use std::sync::Arc;
use std::time::Duration;

use axum::http::uri::PathAndQuery;

use crate::config::HealthConfig;
use crate::replicas::Replica;
use crate::upstream::Pool;

/// One check: `GET path` on a connection of the checker's own pool, 2xx within `timeout`.
async fn check(pool: &Pool, path: &PathAndQuery, timeout: Duration) -> bool {
    let answer = tokio::time::timeout(timeout, pool.get(path, |_| {}, timeout)).await;
    matches!(answer, Ok(Ok(a)) if a.status.is_success())
}

/// Spawns the checker of `replica`; it stops once the replica is removed.
pub fn spawn(replica: Arc<Replica>, cfg: HealthConfig) {
    tokio::spawn(async move {
        let timeout = Duration::from_millis(cfg.timeout_ms);
        // Validated when the config was loaded.
        let path = match cfg.path.parse::<PathAndQuery>() {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(
                    "health checks of {}: path {:?}: {e}",
                    replica.name,
                    cfg.path
                );
                return;
            }
        };
        // Its own connections: a check never waits behind, nor counts among, requests.
        let pool = match Pool::new(&replica.address) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("health checks of {}: {e}", replica.name);
                return;
            }
        };
        let mut tick = tokio::time::interval(Duration::from_millis(cfg.interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if replica.is_removed() {
                break;
            }
            let passed = check(&pool, &path, timeout).await;
            replica.record_check(passed, cfg.fall, cfg.rise);
        }
    });
}
