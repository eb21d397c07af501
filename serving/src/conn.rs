//! One client connection: hyper's HTTP/1 state machine over a [`TimedIo`] that enforces the
//! header read and idle keep-alive timeouts, with the service wrapped in [`Tracked`] so the
//! I/O layer knows whether a request is in flight.
//!
//! The connection is in one of three modes, read by the I/O wrapper on every read or write:
//!
//! | mode | from | until | timer |
//! |---|---|---|---|
//! | head | accept, or the first byte read after a response | the service is called | `header_timeout` from the mode's start |
//! | active | the service is called | its response body ends (or is dropped) | none: the server's own deadlines apply |
//! | idle | the response body ends | the first byte of the next request | `idle_timeout` from the mode's start |
//!
//! A timer that fires fails the pending read (or write) with `TimedOut`, and hyper closes
//! the connection. Once the server stops, a read with no request in flight returns end of
//! file, so idle connections and half-sent requests close at once while a request in flight
//! finishes (hyper's `graceful_shutdown` alone waits for a half-sent first request).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::Limits;

/// What the I/O wrapper and the service share about one connection.
#[derive(Debug, Default)]
pub struct ConnState {
    /// Requests whose response has not ended (0 or 1 in HTTP/1).
    active: AtomicU32,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Head,
    Active,
    Idle,
}

/// A TCP stream whose reads and writes fail with `TimedOut` when the connection has spent
/// too long reading a request head or sitting idle (see the module table).
#[derive(Debug)]
pub struct TimedIo {
    io: TcpStream,
    state: Arc<ConnState>,
    header_timeout: Duration,
    idle_timeout: Duration,
    mode: Mode,
    timer: Pin<Box<Sleep>>,
}

impl TimedIo {
    /// Wraps a freshly accepted `io`: the header timeout starts now.
    pub fn new(io: TcpStream, state: Arc<ConnState>, limits: &Limits) -> Self {
        TimedIo {
            io,
            state,
            header_timeout: limits.header_timeout,
            idle_timeout: limits.idle_timeout,
            mode: Mode::Head,
            timer: Box::pin(tokio::time::sleep(limits.header_timeout)),
        }
    }

    /// Brings `mode` up to date with the service's in-flight count; true while active.
    fn sync(&mut self) -> bool {
        if self.state.is_active() {
            self.mode = Mode::Active;
            true
        } else {
            if self.mode == Mode::Active {
                self.mode = Mode::Idle;
                let at = Instant::now() + self.idle_timeout;
                self.timer.as_mut().reset(at);
            }
            false
        }
    }

    /// The error of an expired timer, if the current mode's timer has expired (registering
    /// the waker otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.mode == Mode::Active || self.timer.as_mut().poll(cx).is_pending() {
            return None;
        }
        let what = match self.mode {
            Mode::Head => "request head not received within the header timeout",
            _ => "connection idle past the idle timeout",
        };
        Some(io::Error::new(io::ErrorKind::TimedOut, what))
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let active = this.sync();
        if !active && this.state.stopping.load(Ordering::Acquire) {
            // End of file: hyper closes an idle connection or drops a half-sent request.
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    match this.mode {
                        Mode::Idle => {
                            this.mode = Mode::Head;
                            let at = Instant::now() + this.header_timeout;
                            this.timer.as_mut().reset(at);
                        }
                        // A client trickling bytes: each read succeeds, so check the clock.
                        Mode::Head if this.timer.deadline() <= Instant::now() => {
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                "request head not received within the header timeout",
                            )));
                        }
                        _ => {}
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.sync();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            r => r,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.sync();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            r => r,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.sync();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            r => r,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
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
