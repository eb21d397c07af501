//! The client listener's accept loop: plain hyper HTTP/1 connections with `TCP_NODELAY`,
//! `GET /search` dispatched straight to the proxy, everything else (`/healthz`, the JSON
//! 404 and 405 answers) through the axum `client_router`.
//!
//! Why not `axum::serve`: the proxy path is the balancer's whole cost, and a profile under
//! wrk showed the router, its boxed services and the protocol-sniffing connection builder on
//! every request. Here a search costs one boxed future and a path comparison. Graceful
//! shutdown matches `axum::serve`'s: stop accepting, let each connection finish its request
//! in flight, close idle ones, and return once every connection is gone.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, Request};
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, watch};

use crate::{client_router, App};

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// One connection's service.
#[derive(Clone)]
struct Front {
    app: Arc<App>,
    fallback: TowerToHyperService<axum::Router>,
}

impl hyper::service::Service<Request<Incoming>> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture;

    fn call(&self, req: Request<Incoming>) -> BoxFuture {
        if req.method() == Method::GET && req.uri().path() == "/search" {
            let app = Arc::clone(&self.app);
            Box::pin(async move { Ok(app.proxy.search(req.uri()).await) })
        } else {
            Box::pin(self.fallback.call(req))
        }
    }
}

/// Accept errors that concern one connection only (the listener is fine).
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves the client listener until `stop` turns `true`, then drains: returns once every
/// accepted connection has closed.
pub async fn serve_client(listener: TcpListener, app: Arc<App>, stop: watch::Receiver<bool>) {
    let fallback = TowerToHyperService::new(client_router(Arc::clone(&app)));
    // Every connection task holds a receiver; `closed()` resolves when the last one drops.
    let (close_tx, close_rx) = watch::channel(());
    let mut stop_accept = stop.clone();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => Some(r),
            _ = stop_accept.wait_for(|&s| s) => None,
        };
        let Some(accepted) = accepted else { break };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: back off as axum::serve does.
                eprintln!("balancer: accept failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let svc = Front {
            app: Arc::clone(&app),
            fallback: fallback.clone(),
        };
        let mut stop = stop.clone();
        let close_rx = close_rx.clone();
        tokio::spawn(async move {
            let mut conn = pin!(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
            let stopping = tokio::select! {
                _ = conn.as_mut() => false,
                _ = stop.wait_for(|&s| s) => true,
            };
            if stopping {
                conn.as_mut().graceful_shutdown();
                let _ = conn.as_mut().await;
            }
            drop(close_rx);
        });
    }
    drop(listener);
    drop(close_rx);
    close_tx.closed().await;
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
    app: Arc<App>,
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
                    eprintln!("balancer: worker {n}: cannot start a runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => serve_client(l, app, stop).await,
                    Err(e) => eprintln!("balancer: worker {n}: {e}"),
                }
            });
            let _ = done_tx.send(());
        })?;
    Ok(done_rx)
}
