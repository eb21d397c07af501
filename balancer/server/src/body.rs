//! A client request's body, read whole before the request is routed: a form or JSON route
//! reads its query there, and the body then goes to the replica unchanged (with its own
//! `Content-Length`). At most `max_body_bytes` are held, a declared `Content-Length` over
//! the limit is refused before a byte is read (as the admin API's uploads are), and the
//! request's deadline bounds the wait for the bytes, so a client that trickles its body
//! holds the balancer no longer than one that never sends it. A request without a body
//! (a plain `GET /search`) costs one check and no allocation.

use std::time::Instant;

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};

use crate::routes::Unreadable;

/// Reads `body` whole: at most `limit` bytes, by `deadline`.
pub async fn read<B>(body: B, limit: u64, deadline: Instant) -> Result<Bytes, Unreadable>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    if body.size_hint().exact().is_some_and(|n| n > limit) {
        return Err(Unreadable::BodyTooLarge(limit));
    }
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout_at(deadline.into(), limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(Unreadable::BodyTooLarge(limit)),
        Ok(Err(e)) => Err(Unreadable::Body(e.to_string())),
        Err(_) => Err(Unreadable::BodyTimeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use http_body_util::{Empty, Full};
    use hyper::body::{Frame, SizeHint};

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// `chunks` pieces of `ab` with no declared length, then the end; or, with `stall`,
    /// nothing ever.
    struct Pieces {
        chunks: usize,
        stall: bool,
    }

    impl Body for Pieces {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.stall {
                return Poll::Pending;
            }
            if self.chunks == 0 {
                return Poll::Ready(None);
            }
            self.chunks -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"ab")))))
        }

        fn size_hint(&self) -> SizeHint {
            SizeHint::default()
        }
    }

    #[tokio::test]
    async fn bodies_are_read_whole_within_the_limit() {
        assert_eq!(
            read(Empty::<Bytes>::new(), 4, later()).await,
            Ok(Bytes::new())
        );
        let full = Full::new(Bytes::from_static(b"abcd"));
        assert_eq!(
            read(full, 4, later()).await,
            Ok(Bytes::from_static(b"abcd"))
        );
        // A declared length over the limit is refused before reading.
        let full = Full::new(Bytes::from_static(b"abcde"));
        assert_eq!(
            read(full, 4, later()).await,
            Err(Unreadable::BodyTooLarge(4))
        );
    }

    #[tokio::test]
    async fn an_undeclared_body_is_cut_at_the_limit() {
        let body = |chunks| Pieces {
            chunks,
            stall: false,
        };
        assert_eq!(
            read(body(2), 4, later()).await,
            Ok(Bytes::from_static(b"abab"))
        );
        assert_eq!(
            read(body(3), 4, later()).await,
            Err(Unreadable::BodyTooLarge(4))
        );
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_times_out_at_the_deadline() {
        let stalled = Pieces {
            chunks: 1,
            stall: true,
        };
        let at = Instant::now() + Duration::from_millis(20);
        assert_eq!(read(stalled, 4, at).await, Err(Unreadable::BodyTimeout));
    }
}
