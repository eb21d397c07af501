//! The client listener: the hardened HTTP/1 loop of the `serving` crate (connection cap,
//! header and idle timeouts, graceful drain), `/healthz` answered here, and every other
//! request dispatched straight to the request path with the routes its method and path
//! match ([`Routes::matching`]; none: it is refused or routed by the fallback policy).
//!
//! Why not `axum::serve`: the request path is the balancer's whole cost, and a profile
//! under wrk showed the router, its boxed services and the protocol-sniffing connection
//! builder on every request. Here a search costs one boxed future and, under the default
//! route (`GET /search`), two path comparisons. On stop, the
//! listener stops accepting, connections with no request in flight close at once, the
//! requests in flight finish, and [`serve_client`] returns once every connection is gone.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, watch};

use crate::pipeline::json_error;
use crate::routes::{Routes, HEALTHZ};
use crate::Balancer;

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// One connection's service.
#[derive(Clone)]
struct Front {
    lb: Arc<Balancer>,
    peer: SocketAddr,
}

/// The client listener's own liveness answer: `GET` and `HEAD` answer `ok`, other
/// methods a JSON 405.
fn healthz(method: &Method) -> Response {
    if method == Method::GET || method == Method::HEAD {
        "ok\n".into_response()
    } else {
        json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this path",
        )
    }
}

impl hyper::service::Service<Request<Incoming>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture;

    fn call(&self, req: Request<Incoming>) -> BoxFuture {
        let path = req.uri().path();
        if path == HEALTHZ {
            let answer = healthz(req.method());
            return Box::pin(async move { Ok(answer) });
        }
        let routes: &Routes = &self.lb.cfg.routes;
        let matched = routes.matching(req.method(), path);
        let lb = Arc::clone(&self.lb);
        let peer = self.peer.ip();
        Box::pin(async move { Ok(lb.search(req, matched, peer).await) })
    }
}

/// Serves the client listener through `gate` until `stop` turns `true`, then drains:
/// returns once every accepted connection has closed.
pub async fn serve_client(
    listener: TcpListener,
    lb: Arc<Balancer>,
    gate: Arc<serving::Gate>,
    stop: watch::Receiver<bool>,
) {
    let make = move |peer| Front {
        lb: Arc::clone(&lb),
        peer,
    };
    serving::serve(gate, listener, make, stop).await;
}

/// `workers` listeners on `addr`: one plain listener for one worker, else listeners sharing
/// the port with SO_REUSEPORT (the kernel spreads connections over them). Port 0 picks one
/// free port for all.
pub async fn bind(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<TcpListener>> {
    if workers <= 1 {
        return Ok(vec![TcpListener::bind(addr).await?]);
    }
    let mut out = Vec::with_capacity(workers);
    let mut at = addr;
    for _ in 0..workers {
        let sock = if at.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        sock.set_reuseport(true)?;
        sock.bind(at)?;
        let l = sock.listen(1024)?;
        at = l.local_addr()?;
        out.push(l);
    }
    Ok(out)
}

/// Runs worker `n` on a thread of its own with a single-threaded runtime, serving
/// `listener` until `stop`; the receiver resolves once it has drained.
pub fn spawn_worker(
    n: usize,
    listener: TcpListener,
    lb: Arc<Balancer>,
    gate: Arc<serving::Gate>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<oneshot::Receiver<()>> {
    let listener = listener.into_std()?;
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(format!("balancer-worker-{n}"))
        .spawn(move || {
            crate::upstream::set_worker(n);
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("worker {n}: cannot start a runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => serve_client(l, lb, gate, stop).await,
                    Err(e) => tracing::error!("worker {n}: {e}"),
                }
            });
            let _ = done_tx.send(());
        })?;
    Ok(done_rx)
}
