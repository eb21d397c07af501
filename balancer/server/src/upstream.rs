//! Keep-alive HTTP/1 connections to one replica: a FIFO queue of idle hyper
//! `SendRequest` handles (HAProxy's `http-reuse always`: any idle connection serves any
//! request), each connection driven by its own task. FIFO, not LIFO: every idle connection
//! is reused in turn, so under a steady load the set of open connections keeps the size a
//! burst gave it instead of letting the replica close the idle tail and reopening it at the
//! next burst. A worker takes from its own queue first and from another worker's before it
//! opens a connection, and a connection always returns to the queue it was opened for, so
//! the connections to a replica never outnumber its requests in flight at their peak
//! (at most `replica_max_in_flight`), whichever workers carried them.
//!
//! Replaces hyper-util's legacy pooled client on the request path. Under wrk that client
//! cost, per request: formatting and re-parsing an absolute URI, a SipHash lookup of the
//! pool key under a lock, rewriting the URI to origin form, formatting a `Host` header, and
//! one extra spawned task to wait for the connection to become ready again before it is
//! pooled. Here the request is built in origin form with a `Host` value made once, and a
//! connection returns to the queue when the response body has been relayed (see
//! [`Relay`]). A connection idle for [`MAX_IDLE_AGE`] is not reused (the replica may be
//! closing it: its idle keep-alive timeout must stay above this age), and the relay of a
//! response body stops at the client request's deadline.

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::header::HOST;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::Empty;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::access;
use crate::admit::{InFlightGuard, Slot};

type Sender = SendRequest<Empty<Bytes>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Idle connections older than this are closed instead of reused.
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(20);

/// Idle connections kept per replica and worker (as `pool_max_idle_per_host` was).
const MAX_IDLE: usize = 256;
/// Idle queues per replica: a worker thread takes connections from its own queue, so a
/// connection is driven by the runtime of the worker that uses it.
const SHARDS: usize = 16;

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// Idle queues that some worker uses (1 + the highest worker number set, at most
/// [`SHARDS`]): the ones [`Pool::take`] looks into.
static QUEUES_IN_USE: AtomicUsize = AtomicUsize::new(1);

/// This thread's worker number (0 for the main thread): which idle queue it uses.
pub fn worker() -> usize {
    WORKER.with(Cell::get)
}

/// This thread's idle queue.
fn own_queue() -> usize {
    worker() % SHARDS
}

/// Sets this thread's worker number (the client listener's worker threads call it once).
pub fn set_worker(n: usize) {
    WORKER.with(|w| w.set(n));
    QUEUES_IN_USE.fetch_max(n % SHARDS + 1, Ordering::Relaxed);
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

/// An open connection to a replica and the idle queue it returns to: that of the worker
/// whose runtime drives it.
#[derive(Debug)]
pub struct Conn {
    sender: Sender,
    shard: usize,
}

/// The idle connections of one replica.
#[derive(Debug)]
pub struct Pool {
    address: String,
    host: HeaderValue,
    idle: [Mutex<VecDeque<(Sender, Instant)>>; SHARDS],
}

impl Pool {
    /// An empty pool for `address` (`host:port`, checked by the caller).
    pub fn new(address: &str) -> Result<Self, String> {
        Ok(Pool {
            address: address.to_owned(),
            host: HeaderValue::from_str(address).map_err(|e| format!("{address}: {e}"))?,
            idle: std::array::from_fn(|_| Mutex::new(VecDeque::new())),
        })
    }

    /// Idle connections.
    pub fn idle(&self) -> usize {
        self.idle
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// An idle connection: from this worker's queue, else from another worker's (oldest
    /// first in each), so a burst on one worker does not open connections while another
    /// worker's sit idle.
    fn take(&self) -> Option<Conn> {
        let own = own_queue();
        let queues = QUEUES_IN_USE.load(Ordering::Relaxed).max(own + 1);
        (0..queues).find_map(|k| {
            let shard = (own + k) % queues;
            self.take_from(shard).map(|sender| Conn { sender, shard })
        })
    }

    fn take_from(&self, shard: usize) -> Option<Sender> {
        let mut idle = self.idle[shard].lock().unwrap_or_else(|e| e.into_inner());
        // Oldest first: one idle too long is dropped (closing it), and the next is newer.
        while let Some((s, since)) = idle.pop_front() {
            if since.elapsed() <= MAX_IDLE_AGE && !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn put(&self, conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        let mut idle = self.idle[conn.shard]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push_back((conn.sender, Instant::now()));
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

    fn request(&self, path: &PathAndQuery, headers: &HeaderMap) -> Request<Empty<Bytes>> {
        let mut req = Request::new(Empty::new());
        *req.uri_mut() = path.clone().into();
        *req.headers_mut() = headers.clone();
        req.headers_mut().insert(HOST, self.host.clone());
        req
    }

    /// Sends `GET path` with `headers` (and this replica's `Host`) on an idle connection, or
    /// a new one (opened within `connect_timeout`). A request an idle connection could not
    /// take (it was closing) moves to the next one; nothing is sent twice.
    pub async fn get(
        &self,
        path: &PathAndQuery,
        headers: &HeaderMap,
        connect_timeout: Duration,
    ) -> Result<(Response<Incoming>, Conn), UpstreamError> {
        let mut req = self.request(path, headers);
        while let Some(mut conn) = self.take() {
            if conn.sender.ready().await.is_err() {
                continue;
            }
            match conn.sender.try_send_request(req).await {
                Ok(resp) => return Ok((resp, conn)),
                Err(mut e) => match e.take_message() {
                    Some(r) => req = r,
                    None => return Err(UpstreamError::Request(e.into_error())),
                },
            }
        }
        let mut sender = self.connect(connect_timeout).await?;
        sender.ready().await.map_err(UpstreamError::Request)?;
        let shard = own_queue();
        match sender.send_request(req).await {
            Ok(resp) => Ok((resp, Conn { sender, shard })),
            Err(e) => Err(UpstreamError::Request(e)),
        }
    }
}

/// A response body on its way to the client. It holds the request's in-flight counts (the
/// replica's and the client admission [`Slot`]) until it is dropped, and then returns the
/// connection to its pool if the body was read to the end (a body cut short leaves the
/// connection mid-response, so it is closed instead). The relay stops with an error at the
/// client request's deadline, so a replica that sends its headers and then stalls cannot
/// hold the client past `deadline_ms` (hyper then closes the client connection).
pub struct Relay {
    body: Incoming,
    conn: Option<Conn>,
    ended: bool,
    cut: bool,
    pool: Arc<Pool>,
    _guard: InFlightGuard,
    deadline: Instant,
    /// Armed the first time the body is not ready: the common, whole-at-once body needs
    /// no timer.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    _slot: Slot,
    access: Option<access::Entry>,
}

/// What a [`Relay`] carries besides the body and its connection.
pub struct RelayParts {
    /// The pool the connection returns to.
    pub pool: Arc<Pool>,
    /// The replica's in-flight count.
    pub guard: InFlightGuard,
    /// The client request's admission slot.
    pub slot: Slot,
    /// The client request's deadline.
    pub deadline: Instant,
    /// The access-log line, when the access log is on.
    pub access: Option<access::Entry>,
}

impl Relay {
    /// Relays `body`, read from `conn`.
    pub fn new(body: Incoming, conn: Conn, parts: RelayParts) -> Self {
        Relay {
            body,
            conn: Some(conn),
            ended: false,
            cut: false,
            pool: parts.pool,
            _guard: parts.guard,
            deadline: parts.deadline,
            timer: None,
            _slot: parts.slot,
            access: parts.access,
        }
    }
}

impl Body for Relay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.conn = None;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
            Poll::Pending => {
                let deadline = this.deadline;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.conn = None;
                this.cut = true;
                tracing::warn!(
                    replica = %this.pool.address,
                    "response body cut at the request deadline"
                );
                Poll::Ready(Some(Err(
                    "the request deadline passed while relaying the response body".into(),
                )))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (!self.cut && self.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.ended || self.body.is_end_stream() {
                self.pool.put(conn);
            }
        }
        if let Some(a) = &self.access {
            let outcome = if self.cut {
                "cut"
            } else if self.ended || self.body.is_end_stream() {
                "done"
            } else {
                "aborted"
            };
            a.log(outcome);
        }
    }
}
