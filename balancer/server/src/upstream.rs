//! Keep-alive HTTP/1 connections to one replica: a LIFO stack of idle hyper
//! `SendRequest` handles (HAProxy's `http-reuse always`: any idle connection serves any
//! request), each connection driven by its own task.
//!
//! Replaces hyper-util's legacy pooled client on the request path. Under wrk that client
//! cost, per request: formatting and re-parsing an absolute URI, a SipHash lookup of the
//! pool key under a lock, rewriting the URI to origin form, formatting a `Host` header, and
//! one extra spawned task to wait for the connection to become ready again before it is
//! pooled. Here the request is built in origin form with a `Host` value made once, and a
//! connection returns to the stack when the response body has been relayed (see
//! [`Relay`]).

use std::cell::Cell;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::header::HOST;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderValue, Request, Response};
use http_body_util::Empty;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type Sender = SendRequest<Empty<Bytes>>;

/// Idle connections kept per replica and worker (as `pool_max_idle_per_host` was).
const MAX_IDLE: usize = 256;
/// Idle stacks per replica: a worker thread takes connections from its own stack, so a
/// connection is driven by the runtime of the worker that uses it.
const SHARDS: usize = 16;

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// This thread's worker number (0 for the main thread): which idle stack it uses.
pub fn worker() -> usize {
    WORKER.with(Cell::get)
}

/// Sets this thread's worker number (the client listener's worker threads call it once).
pub fn set_worker(n: usize) {
    WORKER.with(|w| w.set(n));
}

/// Why an upstream request failed.
#[derive(Debug)]
pub enum UpstreamError {
    /// No connection could be opened: the replica is down (or unreachable in time).
    Connect(String),
    /// The request failed on an open connection.
    Request(hyper::Error),
}

impl UpstreamError {
    /// Whether this was a connect failure (the replica gets ejected).
    pub fn is_connect(&self) -> bool {
        matches!(self, UpstreamError::Connect(_))
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Connect(e) => write!(f, "connect failed: {e}"),
            UpstreamError::Request(e) => write!(f, "{e}"),
        }
    }
}

/// The idle connections of one replica.
#[derive(Debug)]
pub struct Pool {
    address: String,
    host: HeaderValue,
    idle: [Mutex<Vec<Sender>>; SHARDS],
}

impl Pool {
    /// An empty pool for `address` (`host:port`, checked by the caller).
    pub fn new(address: &str) -> Result<Self, String> {
        Ok(Pool {
            address: address.to_owned(),
            host: HeaderValue::from_str(address).map_err(|e| format!("{address}: {e}"))?,
            idle: std::array::from_fn(|_| Mutex::new(Vec::new())),
        })
    }

    /// Idle connections.
    pub fn idle(&self) -> usize {
        self.idle
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    fn shard(&self) -> &Mutex<Vec<Sender>> {
        &self.idle[worker() % SHARDS]
    }

    fn take(&self) -> Option<Sender> {
        let mut idle = self.shard().lock().unwrap_or_else(|e| e.into_inner());
        while let Some(s) = idle.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn put(&self, s: Sender) {
        if s.is_closed() {
            return;
        }
        let mut idle = self.shard().lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(s);
        }
    }

    async fn connect(&self, timeout: Duration) -> Result<Sender, UpstreamError> {
        let tcp = match tokio::time::timeout(timeout, TcpStream::connect(&*self.address)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(UpstreamError::Connect(e.to_string())),
            Err(_) => {
                return Err(UpstreamError::Connect(format!(
                    "no connection within {} ms",
                    timeout.as_millis()
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(UpstreamError::Request)?;
        tokio::spawn(async move {
            // A closed or broken connection just ends; its handle reports `is_closed`.
            let _ = conn.await;
        });
        Ok(sender)
    }

    fn request(&self, path: &PathAndQuery) -> Request<Empty<Bytes>> {
        let mut req = Request::new(Empty::new());
        *req.uri_mut() = path.clone().into();
        req.headers_mut().insert(HOST, self.host.clone());
        req
    }

    /// Sends `GET path` on an idle connection, or a new one (opened within
    /// `connect_timeout`). A request an idle connection could not take (it was closing) moves
    /// to the next one; nothing is sent twice.
    pub async fn get(
        &self,
        path: &PathAndQuery,
        connect_timeout: Duration,
    ) -> Result<(Response<Incoming>, Sender), UpstreamError> {
        let mut req = self.request(path);
        while let Some(mut s) = self.take() {
            if s.ready().await.is_err() {
                continue;
            }
            match s.try_send_request(req).await {
                Ok(resp) => return Ok((resp, s)),
                Err(mut e) => match e.take_message() {
                    Some(r) => req = r,
                    None => return Err(UpstreamError::Request(e.into_error())),
                },
            }
        }
        let mut s = self.connect(connect_timeout).await?;
        s.ready().await.map_err(UpstreamError::Request)?;
        match s.send_request(req).await {
            Ok(resp) => Ok((resp, s)),
            Err(e) => Err(UpstreamError::Request(e)),
        }
    }
}

/// A response body on its way to the client. It holds `G` (the request's in-flight count)
/// until it is dropped, and then returns the connection to `pool` if the body was read to
/// the end (a body cut short leaves the connection mid-response, so it is closed instead).
pub struct Relay<G> {
    body: Incoming,
    conn: Option<Sender>,
    ended: bool,
    pool: Arc<Pool>,
    _guard: G,
}

impl<G> Relay<G> {
    /// Relays `body`, read from `conn` of `pool`, holding `guard` until done.
    pub fn new(body: Incoming, conn: Sender, pool: Arc<Pool>, guard: G) -> Self {
        Relay {
            body,
            conn: Some(conn),
            ended: false,
            pool,
            _guard: guard,
        }
    }
}

impl<G: Unpin> Body for Relay<G> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.body).poll_frame(cx);
        match &r {
            Poll::Ready(None) => this.ended = true,
            Poll::Ready(Some(Err(_))) => this.conn = None,
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<G> Drop for Relay<G> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.ended || self.body.is_end_stream() {
                self.pool.put(conn);
            }
        }
    }
}
