//! A replica's response body on its way to the client: whole when it came with the head,
//! else read from the connection as it arrives ([`UpstreamBody`]), and the [`Relay`] that
//! hands it to the client listener. The relay holds the request's places (the replica's
//! in-flight count and the client admission slot) until it is dropped, returns a streamed
//! body's connection to its pool when the body has been read to the end (a body cut short
//! leaves the connection mid-response, so it is closed instead), and stops with an error at
//! the client request's deadline, so a replica that sends its head and then stalls cannot
//! hold the client past `deadline_ms` (hyper then closes the client connection).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use hyper::body::{Body, Bytes, Frame, SizeHint};

use super::h1::{Chunked, Framing};
use super::{Conn, Pool};
use crate::access;
use crate::admit::{InFlightGuard, Slot};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How much of a streamed body is left.
#[derive(Debug)]
enum Left {
    /// This many bytes.
    Length(u64),
    /// Chunks, up to the last one and the trailers.
    Chunked(Chunked),
    /// Everything until the replica closes the connection.
    UntilClose,
}

/// A streamed body and its connection.
#[derive(Debug)]
pub struct Streaming {
    conn: Conn,
    left: Left,
    keep_alive: bool,
    /// Read to its end.
    done: bool,
}

/// A response body from a replica.
#[derive(Debug)]
pub enum UpstreamBody {
    /// Read with the head (`None` once handed out, or empty).
    Whole(Option<Bytes>),
    /// Still on the connection.
    Streaming(Box<Streaming>),
}

impl UpstreamBody {
    /// A body read whole.
    pub(super) fn whole(bytes: Bytes) -> Self {
        UpstreamBody::Whole((!bytes.is_empty()).then_some(bytes))
    }

    /// A body to read from `conn`, framed by `framing` (never `Empty`).
    pub(super) fn streaming(conn: Conn, framing: Framing, keep_alive: bool) -> Self {
        let left = match framing {
            Framing::Length(n) => Left::Length(n),
            Framing::Chunked => Left::Chunked(Chunked::default()),
            Framing::Empty | Framing::UntilClose => Left::UntilClose,
        };
        UpstreamBody::Streaming(Box::new(Streaming {
            conn,
            left,
            keep_alive,
            done: false,
        }))
    }

    /// Whether every byte has been handed out.
    pub fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Whole(b) => b.is_none(),
            UpstreamBody::Streaming(s) => s.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Whole(b) => {
                SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
            UpstreamBody::Streaming(s) => match s.left {
                Left::Length(n) => SizeHint::with_exact(n),
                _ => SizeHint::default(),
            },
        }
    }

    /// The next piece of the body: `None` at its end.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        match self {
            UpstreamBody::Whole(b) => Poll::Ready(b.take().map(Ok)),
            UpstreamBody::Streaming(s) => s.poll_data(cx),
        }
    }

    /// The connection, when the body was read to its end and the connection may carry
    /// another request.
    fn reusable(self) -> Option<Conn> {
        match self {
            UpstreamBody::Streaming(s) if s.done && s.keep_alive && s.conn.buf.is_empty() => {
                Some(s.conn)
            }
            _ => None,
        }
    }
}

/// Reads `body` whole, at most `limit` bytes, by `deadline` (a sharded balancer merges
/// the answers): a streamed body's connection goes back to `pool` when it may carry another
/// request, and is closed otherwise.
pub async fn read_whole(
    mut body: UpstreamBody,
    pool: &Pool,
    limit: usize,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let read = async {
        while let Some(piece) = std::future::poll_fn(|cx| body.poll_data(cx)).await {
            let piece = piece.map_err(|e| e.to_string())?;
            if out.len() + piece.len() > limit {
                return Err(format!("the answer is over {limit} bytes"));
            }
            out.extend_from_slice(&piece);
        }
        Ok(())
    };
    match tokio::time::timeout_at(deadline.into(), read).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the request deadline passed while reading the answer".into()),
    }
    if let Some(conn) = body.reusable() {
        pool.put(conn);
    }
    Ok(out)
}

impl Streaming {
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            let input = self.conn.buf.filled();
            match &mut self.left {
                Left::Length(0) => {
                    self.done = true;
                    continue;
                }
                Left::Length(n) if !input.is_empty() => {
                    let take = usize::try_from(*n).unwrap_or(usize::MAX).min(input.len());
                    let data = Bytes::copy_from_slice(&input[..take]);
                    *n -= take as u64;
                    self.conn.buf.consume(take);
                    self.done = *n == 0;
                    return Poll::Ready(Some(Ok(data)));
                }
                Left::Chunked(dec) => {
                    let step = dec.step(input)?;
                    let data = step.data.map(|r| Bytes::copy_from_slice(&input[r]));
                    self.conn.buf.consume(step.consumed);
                    self.done = dec.is_done();
                    if let Some(data) = data {
                        return Poll::Ready(Some(Ok(data)));
                    }
                    if step.consumed > 0 || self.done {
                        continue;
                    }
                }
                Left::UntilClose if !input.is_empty() => {
                    let data = Bytes::copy_from_slice(input);
                    let n = data.len();
                    self.conn.buf.consume(n);
                    return Poll::Ready(Some(Ok(data)));
                }
                Left::Length(_) | Left::UntilClose => {}
            }
            let n = ready!(self.conn.poll_fill(cx))?;
            if n == 0 {
                if matches!(self.left, Left::UntilClose) {
                    self.done = true;
                    self.keep_alive = false;
                    continue;
                }
                return Poll::Ready(Some(Err(
                    "the replica closed the connection in the middle of the response body".into(),
                )));
            }
        }
    }
}

/// A response body on its way to the client (see the module header).
pub struct Relay {
    body: Option<UpstreamBody>,
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

/// What a [`Relay`] carries besides the body.
pub struct RelayParts {
    /// The pool a streamed body's connection returns to.
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
    /// Relays `body`.
    pub fn new(body: UpstreamBody, parts: RelayParts) -> Self {
        Relay {
            body: Some(body),
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

    /// Ends the body: its connection goes back to the pool if it may carry another request.
    fn finish(&mut self) {
        if let Some(conn) = self.body.take().and_then(UpstreamBody::reusable) {
            self.pool.put(conn);
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
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        match body.poll_data(cx) {
            Poll::Ready(None) => {
                this.ended = true;
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                // The connection is mid-response: closed, not reused.
                this.body = None;
                this.cut = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Poll::Pending => {
                let deadline = this.deadline;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.body = None;
                this.cut = true;
                tracing::warn!(
                    replica = %this.pool.address(),
                    "response body cut at the request deadline"
                );
                Poll::Ready(Some(Err(
                    "the request deadline passed while relaying the response body".into(),
                )))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.as_ref().is_some_and(UpstreamBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), UpstreamBody::size_hint)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let complete = self.ended || self.body.as_ref().is_some_and(UpstreamBody::is_end_stream);
        if complete {
            self.finish();
        }
        if let Some(a) = &self.access {
            let outcome = if self.cut {
                "cut"
            } else if complete {
                "done"
            } else {
                "aborted"
            };
            a.log(outcome);
        }
    }
}
