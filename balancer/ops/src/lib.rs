//! `balancer-ops`: the operator's surfaces of ballot's balancer, over the data plane of
//! `balancer-server` and its typed [`Stats`](balancer_server::stats::Stats) snapshot.
//!
//! * [`admin`]: the admin listener: the bearer-token admin API (table reload, replica
//!   membership, drain and enable), `/metrics` and `/healthz`, kept off the client port the
//!   way HAProxy's stats socket and Envoy's admin interface are.
//! * [`status`]: the status page and its login. [`explain`]: a query's routing explained.
//! * [`cli`]: the command line, run by the `balancer` binary and by `ballot balancer`.

pub mod admin;
pub mod cli;
pub mod explain;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use balancer_server::config::Validated;
use balancer_server::{Balancer, StartError};
use metrics_exporter_prometheus::PrometheusHandle;

/// How often the status page's counters are sampled, and the recorder's upkeep runs.
const SAMPLE_EVERY: Duration = status::history::SAMPLE_EVERY;

/// Everything the admin handlers share.
pub struct App {
    /// The data plane.
    pub lb: Arc<Balancer>,
    /// The metrics recorder.
    pub prom: PrometheusHandle,
    /// The admin token, ready for a constant-time comparison (`None`: admin API off).
    pub admin_token: Option<admin::Token>,
    /// The status page's ten minutes of samples.
    pub status: status::history::History,
    /// The login form's sessions.
    pub sessions: status::login::Sessions,
}

/// Why the balancer could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The admin token is longer than the comparison handles.
    #[error("{0}: the admin token is too long (at most 256 bytes)")]
    TokenTooLong(std::path::PathBuf),
    /// The data plane could not be built.
    #[error(transparent)]
    Start(#[from] StartError),
}

impl App {
    /// Installs the metrics recorder (before any handle is made) and builds the data plane
    /// of `cfg` with its admin surfaces.
    pub fn build(cfg: Validated) -> Result<Arc<App>, AppError> {
        let prom = balancer_server::metrics::install();
        let admin_token = match cfg.admin_token.as_deref() {
            Some(t) => {
                Some(admin::Token::new(t).ok_or_else(|| AppError::TokenTooLong(cfg.path.clone()))?)
            }
            None => None,
        };
        Ok(Arc::new(App {
            lb: Arc::new(Balancer::build(cfg)?),
            prom,
            admin_token,
            status: status::history::History::new(balancer_server::stats::unix_now()),
            sessions: status::login::Sessions::default(),
        }))
    }

    /// Starts the data plane's background work, and the sampler of the status page's
    /// counters (inside a Tokio runtime).
    pub fn spawn_background(self: &Arc<Self>) {
        self.lb.spawn_background();
        let app = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tick.tick().await;
                app.prom.run_upkeep();
                status::record_sample(&app);
            }
        });
    }
}
