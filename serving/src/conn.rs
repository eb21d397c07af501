//! One client connection: hyper's HTTP/1 state machine over a [`ConnIo`], with the service
//! wrapped in [`Tracked`], driven by a [`Clock`] that enforces the header read and idle
//! keep-alive timeouts.
//!
//! The connection is in one of three modes, worked out by the [`Clock`] after every poll of
//! the connection from what the I/O wrapper and the service record (bytes read, requests
//! started, responses in flight):
//!
//! | mode | from | until | timer |
//! |---|---|---|---|
//! | head | accept, or the first byte read after a response | the service is called | `header_timeout` from the mode's start |
//! | active | the service is called | its response body ends (or is dropped) | none: the server's own deadlines apply |
//! | idle | the response body ends | the first byte of the next request | `idle_timeout` from the mode's start |
//!
//! The clock runs in the task that polls the connection, not inside the I/O calls: hyper
//! does not read again after a response until the socket is readable, so a timer armed
//! only in `poll_read` would never see a connection go idle. A mode's deadline moves the
//! timer only when it comes earlier than the timer's: a later one (a keep-alive connection
//! going idle again after each response) waits until the timer fires and is re-armed then,
//! so a busy connection costs a clock read per response, not a timer-wheel update. When the
//! deadline passes, the connection is dropped (closed). Once the server stops, a read with no request in flight
//! returns end of file, so idle connections and half-sent requests close at once while a
//! request in flight finishes (hyper's `graceful_shutdown` alone waits for a half-sent
//! first request).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::Limits;

/// What the I/O wrapper, the service and the clock share about one connection.
#[derive(Debug, Default)]
pub struct ConnState {
    /// Requests whose response has not ended (0 or 1 in HTTP/1).
    active: AtomicU32,
    /// Requests started so far.
    requests: AtomicU64,
    /// Reads that returned data so far.
    reads: AtomicU64,
    /// The server is stopping: a read with no request in flight ends the connection.
    stopping: AtomicBool,
}

impl ConnState {
    /// Marks the server as stopping.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0
    }
}

/// A TCP stream that counts the reads returning data and, once the server stops, reads end
/// of file unless a request is in flight.
#[derive(Debug)]
pub struct ConnIo {
    io: TcpStream,
    state: Arc<ConnState>,
}

impl ConnIo {
    /// Wraps a freshly accepted `io`.
    pub fn new(io: TcpStream, state: Arc<ConnState>) -> Self {
        ConnIo { io, state }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.state.stopping.load(Ordering::Acquire) && !this.state.is_active() {
            // End of file: hyper closes an idle connection or drops a half-sent request.
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.state.reads.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Head,
    Active,
    Idle,
}

/// The header and idle timers of one connection (see the module table).
#[derive(Debug)]
pub struct Clock {
    state: Arc<ConnState>,
    header_timeout: std::time::Duration,
    idle_timeout: std::time::Duration,
    mode: Mode,
    timer: Pin<Box<Sleep>>,
    /// The current mode's deadline: the timer's, or later than the timer's.
    deadline: Instant,
    requests: u64,
    reads: u64,
}

/// Why a [`Clock`] ended a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    /// The request head took longer than the header timeout.
    Header,
    /// The connection sat idle longer than the idle timeout.
    Idle,
}

impl Clock {
    /// The clock of a connection accepted now: the header timeout starts.
    pub fn new(state: Arc<ConnState>, limits: &Limits) -> Self {
        let at = Instant::now() + limits.header_timeout;
        Clock {
            state,
            header_timeout: limits.header_timeout,
            idle_timeout: limits.idle_timeout,
            mode: Mode::Head,
            timer: Box::pin(tokio::time::sleep_until(at)),
            deadline: at,
            requests: 0,
            reads: 0,
        }
    }

    /// Sets the mode's deadline; the timer moves only if the deadline is earlier.
    fn arm(&mut self, at: Instant) {
        self.deadline = at;
        if at < self.timer.deadline() {
            self.timer.as_mut().reset(at);
        }
    }

    /// Brings the mode up to date with what happened since the last call, and says whether
    /// its timer has expired (registering the task's waker otherwise). Call it after each
    /// poll of the connection.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Option<Expired> {
        let requests = self.state.requests.load(Ordering::Acquire);
        let active = self.state.is_active();
        if active {
            self.mode = Mode::Active;
            self.requests = requests;
            return None;
        }
        if self.mode == Mode::Active || requests != self.requests {
            // A request ended since the last look (perhaps started and ended in one poll).
            self.mode = Mode::Idle;
            self.requests = requests;
            self.reads = self.state.reads.load(Ordering::Acquire);
            self.arm(Instant::now() + self.idle_timeout);
        } else if self.mode == Mode::Idle {
            let reads = self.state.reads.load(Ordering::Acquire);
            if reads != self.reads {
                self.mode = Mode::Head;
                self.arm(Instant::now() + self.header_timeout);
            }
        }
        if self.timer.as_mut().poll(cx).is_pending() {
            return None;
        }
        if Instant::now() < self.deadline {
            // Fired at an earlier deadline than the mode's own: wait for the real one.
            let at = self.deadline;
            self.timer.as_mut().reset(at);
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
        }
        Some(match self.mode {
            Mode::Idle => Expired::Idle,
            _ => Expired::Header,
        })
    }
}

/// Counts one request as in flight until dropped.
#[derive(Debug)]
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A service whose requests count as in flight on their connection from the call until
/// the response body ends.
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S> Tracked<S> {
    /// Wraps `inner` for the connection of `state`.
    pub fn new(inner: S, state: Arc<ConnState>) -> Self {
        Tracked { inner, state }
    }
}

impl<S, ReqBody, B> hyper::service::Service<Request<ReqBody>> for Tracked<S>
where
    S: hyper::service::Service<Request<ReqBody>, Response = Response<B>>,
{
    type Response = Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, req: Request<ReqBody>) -> Self::Future {
        self.state.active.fetch_add(1, Ordering::AcqRel);
        self.state.requests.fetch_add(1, Ordering::AcqRel);
        let guard = InFlight(Arc::clone(&self.state));
        TrackedFuture {
            inner: self.inner.call(req),
            guard: Some(guard),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Tracked`].
    #[derive(Debug)]
    pub struct TrackedFuture<F> {
        #[pin]
        inner: F,
        guard: Option<InFlight>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TrackedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        let guard = this.guard.take();
        Poll::Ready(out.map(|resp| resp.map(|body| TrackedBody { inner: body, guard })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that ends its request's in-flight count when it ends.
    #[derive(Debug)]
    pub struct TrackedBody<B> {
        #[pin]
        inner: B,
        guard: Option<InFlight>,
    }
}

impl<B: Body> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let r = this.inner.poll_frame(cx);
        if matches!(r, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.guard.take();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    struct Echo;

    impl hyper::service::Service<Request<()>> for Echo {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<String>, Infallible>>;

        fn call(&self, _req: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new("hi".to_owned())))
        }
    }

    #[tokio::test]
    async fn a_request_is_in_flight_until_its_body_ends() {
        use hyper::service::Service;
        let state = Arc::new(ConnState::default());
        let svc = Tracked::new(Echo, Arc::clone(&state));
        let fut = svc.call(Request::new(()));
        assert!(state.is_active(), "active once called");
        let resp = fut.await.expect("infallible");
        assert!(state.is_active(), "active while the body is unsent");
        let mut body = std::pin::pin!(resp.into_body());
        let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        assert!(frame.is_some());
        let end = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        assert!(end.is_none());
        assert!(!state.is_active(), "idle once the body ended");

        // A future dropped before its response ends the request too.
        drop(svc.call(Request::new(())));
        assert!(!state.is_active());
    }
}
