//! The accept loop: a connection cap shared by every listener of one [`Gate`], accept
//! errors survived with a short back-off, and a drain that waits only for requests in flight.
//!
//! At the cap the loop stops accepting, so new connections wait in the kernel's listen
//! backlog (HAProxy's `maxconn` behaviour) and are served in arrival order as slots free;
//! beyond the backlog the kernel drops the handshake and the client retries. When several
//! listeners share a gate (the balancer's per-thread `SO_REUSEPORT` listeners), a loop
//! waits for a free slot, accepts, then takes the slot; if another loop took it in between,
//! the accepted connection waits for the next one, so the cap can be passed by at most one
//! connection per listener and no listener starves while another holds a slot.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::conn::{Clock, ConnIo, ConnState, Expired, Tracked};
use crate::Limits;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Longest request head (request line and headers); past it the answer is 431. hyper's
/// buffer default, about 400 KiB, would let 10,000 connections hold 4 GB of half-sent heads.
pub const MAX_HEAD: usize = 32 << 10;
/// hyper's per-connection read and write buffer limit.
pub const MAX_BUF: usize = 64 << 10;
/// Shortest pause after a failed accept.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause after a failed accept.
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// The limits and the connection slots shared by the listeners of one server.
#[derive(Debug)]
pub struct Gate {
    name: &'static str,
    limits: Limits,
    slots: Arc<Semaphore>,
    date_header: bool,
}

impl Gate {
    /// A gate named `name` in logs (`"client"`, `"admin"`), with `limits.max_connections`
    /// slots.
    pub fn new(name: &'static str, limits: Limits) -> Arc<Gate> {
        Arc::new(Gate {
            name,
            limits,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            date_header: true,
        })
    }

    /// A gate like [`Gate::new`] whose answers get no `Date` header of this server: a
    /// proxy relays its origin's (RFC 9110 section 6.6.1 asks it of origin servers) and,
    /// like HAProxy, adds none.
    pub fn proxy(name: &'static str, limits: Limits) -> Arc<Gate> {
        let mut gate = Gate::new(name, limits);
        if let Some(g) = Arc::get_mut(&mut gate) {
            g.date_header = false;
        }
        gate
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.limits
            .max_connections
            .saturating_sub(self.slots.available_permits())
    }
}

/// Resolves once `stop` is true; never if its sender is gone without saying so.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|&s| s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// [`stopped`] for a connection task, which is polled on every read and write: the
/// channel's shared state is locked to register the task once, and again only after the
/// value changed; every other poll is one atomic load. (Polling `stopped` itself took that
/// lock, shared by every worker thread, several times per request.)
struct StopSignal {
    peek: watch::Receiver<bool>,
    wait: Pin<Box<dyn Future<Output = ()> + Send>>,
    registered: bool,
}

impl StopSignal {
    fn new(stop: watch::Receiver<bool>) -> Self {
        let mut rx = stop.clone();
        StopSignal {
            peek: stop,
            wait: Box::pin(async move { stopped(&mut rx).await }),
            registered: false,
        }
    }
}

impl Future for StopSignal {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The task's waker stays registered from the first poll until the value changes: a
        // spawned task's waker is the same at every poll, so it need not be registered anew.
        if self.registered && matches!(self.peek.has_changed(), Ok(false)) {
            return Poll::Pending;
        }
        self.registered = true;
        self.wait.as_mut().poll(cx)
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

/// A burst of failed accepts: logged once when it starts and once when it ends.
#[derive(Debug, Default)]
struct AcceptErrors {
    count: u64,
}

impl AcceptErrors {
    /// Records a failure and returns how long to pause.
    fn failed(&mut self, gate: &Gate, e: &std::io::Error) -> Duration {
        if self.count == 0 {
            tracing::warn!(
                listener = gate.name,
                open = gate.open(),
                "accept failed: {e}; pausing accepts, open connections keep being served"
            );
        }
        self.count += 1;
        let shift = self.count.min(16) as u32 - 1;
        BACKOFF_MIN
            .saturating_mul(1u32 << shift.min(10))
            .min(BACKOFF_MAX)
    }

    fn succeeded(&mut self, gate: &Gate) {
        if self.count > 0 {
            tracing::warn!(
                listener = gate.name,
                failures = self.count,
                "accepting again after {} failed accepts",
                self.count
            );
            self.count = 0;
        }
    }
}

/// Serves `listener` until `stop` turns true: each accepted connection gets the service
/// `make(peer)`. Then stops accepting, closes connections with no request in flight, lets
/// the requests in flight finish, and returns once every connection of this listener has
/// closed (bound the wait with a timeout: a request may not finish).
pub async fn serve<M, S, B>(
    gate: Arc<Gate>,
    listener: TcpListener,
    mut make: M,
    stop: watch::Receiver<bool>,
) where
    M: FnMut(SocketAddr) -> S,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    // Every connection task holds a receiver; `closed()` resolves when the last one drops.
    let (close_tx, close_rx) = watch::channel(());
    let mut stop_accept = stop.clone();
    let mut errors = AcceptErrors::default();
    loop {
        // Wait for a free slot without taking it (see the module header).
        let free = tokio::select! {
            p = gate.slots.acquire() => p.is_ok(),
            _ = stopped(&mut stop_accept) => false,
        };
        if !free {
            break;
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped(&mut stop_accept) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => {
                errors.succeeded(&gate);
                a
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: pause, then try again.
                let pause = errors.failed(&gate, &e);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stopped(&mut stop_accept) => break,
                }
                continue;
            }
        };
        let permit = match Arc::clone(&gate.slots).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let taken = tokio::select! {
                    p = Arc::clone(&gate.slots).acquire_owned() => p.ok(),
                    _ = stopped(&mut stop_accept) => None,
                };
                match taken {
                    Some(p) => p,
                    None => break,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let task = connection(
            tcp,
            make(peer),
            (*gate.limits(), gate.date_header),
            stop.clone(),
            permit,
            close_rx.clone(),
        );
        tokio::spawn(task);
    }
    drop(listener);
    drop(close_rx);
    close_tx.closed().await;
}

/// Polls the connection, then its clock: ready with `None` when the connection ended,
/// with the reason when the clock ended it.
fn drive<C: Future>(
    conn: std::pin::Pin<&mut C>,
    clock: &mut Clock,
    cx: &mut std::task::Context<'_>,
) -> Poll<Option<Expired>> {
    if conn.poll(cx).is_ready() {
        return Poll::Ready(None);
    }
    match clock.poll_expired(cx) {
        Some(why) => Poll::Ready(Some(why)),
        None => Poll::Pending,
    }
}

/// Drives one connection to its end.
async fn connection<S, B>(
    tcp: TcpStream,
    svc: S,
    (limits, date_header): (Limits, bool),
    stop: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
    close: watch::Receiver<()>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let state = Arc::new(ConnState::default());
    let io = ConnIo::new(tcp, Arc::clone(&state));
    let svc = Tracked::new(svc, Arc::clone(&state));
    let mut conn = pin!(http1::Builder::new()
        .max_buf_size(MAX_BUF)
        .max_header_size(MAX_HEAD)
        .auto_date_header(date_header)
        .serve_connection(TokioIo::new(io), svc));
    let mut clock = Clock::new(Arc::clone(&state), &limits);
    let ended = tokio::select! {
        e = std::future::poll_fn(|cx| drive(conn.as_mut(), &mut clock, cx)) => Some(e),
        _ = StopSignal::new(stop) => None,
    };
    match ended {
        Some(Some(why)) => tracing::debug!(?why, "connection timed out"),
        Some(None) => {}
        None => {
            // Reads now end the connection unless a request is in flight; that request
            // finishes with keep-alive off.
            state.stop();
            conn.as_mut().graceful_shutdown();
            let _ = std::future::poll_fn(|cx| drive(conn.as_mut(), &mut clock, cx)).await;
        }
    }
    drop(permit);
    drop(close);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_bounded() {
        let gate = Gate::new("test", Limits::default());
        let mut errs = AcceptErrors::default();
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<Duration> = (0..20).map(|_| errs.failed(&gate, &e)).collect();
        assert_eq!(pauses[0], BACKOFF_MIN);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]), "{pauses:?}");
        assert_eq!(*pauses.last().unwrap(), BACKOFF_MAX);
        errs.succeeded(&gate);
        assert_eq!(
            errs.failed(&gate, &e),
            BACKOFF_MIN,
            "a new burst starts low"
        );
    }
}
