//! Keep-alive HTTP/1.1 connections to one replica, and the exchange of one request on them,
//! run inside the client request's own task: the request is written, the response head
//! read and parsed ([`h1`]), and the body relayed ([`relay`]) without a task per
//! connection (why: [`h1`]'s header).
//!
//! The idle connections form FIFO queues (HAProxy's `http-reuse always`: any idle
//! connection serves any request). FIFO, not LIFO: every idle connection is reused in turn,
//! so under a steady load the set of open connections keeps the size a burst gave it
//! instead of letting the replica close the idle tail and reopening it at the next burst. A
//! worker takes from its own queue first and from another worker's before it opens a
//! connection (moving it to its own runtime and queue), and a connection always returns to
//! the queue of the worker whose runtime watches its socket, so the connections to a
//! replica never outnumber its requests in flight at their peak (at most
//! `replica_max_in_flight`), whichever workers carried them.
//!
//! A connection goes back to its queue as soon as its response has been read to the end:
//! at once for a body that came with the head, else when the relay reads the last byte. A
//! connection idle for [`MAX_IDLE_AGE`] is not reused (the replica may be closing it: its
//! idle keep-alive timeout must stay above this age), nor one the replica closed while it
//! sat idle (seen by the runtime, without a system call). A request that an idle
//! connection could not carry (closed under it before any byte of an answer) moves to
//! another connection when it may be sent twice ([`Outgoing::resend`]: every `GET`, and a
//! `POST` to a search route); any other fails there.
//!
//! A request is `GET` or `POST` ([`Method`]); a body goes with its own `Content-Length`,
//! written after the head in the same system call (`writev`), straight from the client's
//! buffer: the connection's request buffer holds the head alone and is reused.

pub mod h1;
pub mod relay;

use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

pub use relay::{read_whole, Relay, RelayParts};

use h1::{Framing, Head, ProtocolError};

/// Idle connections older than this are closed instead of reused.
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(20);

/// Idle connections kept per replica and worker (as `pool_max_idle_per_host` was).
const MAX_IDLE: usize = 256;
/// Idle queues per replica: a worker thread takes connections from its own queue, so a
/// connection is watched by the runtime of the worker that uses it.
const SHARDS: usize = 16;
/// Idle connections a request tries, each closed under it, before it opens a new one.
const MAX_STALE_TRIES: usize = 3;
/// A connection's read buffer at first (it grows for a longer head).
const READ_BUFFER: usize = 8 * 1024;

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
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be opened: the replica is down (or unreachable in time).
    #[error("connect failed: {0}")]
    Connect(String),
    /// The connection failed or closed before the whole response head arrived.
    #[error("{0}")]
    Io(String),
    /// The replica's answer is not valid HTTP/1.1.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl UpstreamError {
    /// Whether this was a connect failure (the replica gets ejected).
    pub fn is_connect(&self) -> bool {
        matches!(self, UpstreamError::Connect(_))
    }
}

/// The method of a request sent upstream: a client's `HEAD` goes as `GET` (the client
/// listener drops the body of the answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
}

impl Method {
    fn bytes(self) -> &'static [u8] {
        match self {
            Method::Get => b"GET",
            Method::Post => b"POST",
        }
    }
}

/// One request to send to a replica.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    /// The method.
    pub method: Method,
    /// The target (path and query string).
    pub path: &'a PathAndQuery,
    /// The body (empty: none; a `POST` still says `Content-Length: 0`).
    pub body: &'a [u8],
    /// Whether the request may go again on another connection when an idle one closed
    /// under it before any byte of an answer: only a request that may be sent twice.
    pub resend: bool,
}

impl Outgoing<'_> {
    /// `GET path` with no body.
    pub fn get(path: &PathAndQuery) -> Outgoing<'_> {
        Outgoing {
            method: Method::Get,
            path,
            body: &[],
            resend: true,
        }
    }
}

/// How one exchange on a connection failed.
enum Failure {
    /// No byte of an answer came back: the request may go on another connection.
    Unanswered(io::Error),
    /// The answer started and then failed, or broke the protocol.
    Failed(UpstreamError),
}

/// Bytes read from a connection and not used yet: `data[start..end]`. The vector stays
/// initialized at its full length, so reading into it needs no `unsafe`.
#[derive(Debug)]
struct ReadBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuffer {
    fn new() -> Self {
        ReadBuffer {
            data: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
        }
    }

    fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Back to the first size once empty (a connection that read one long head does not
    /// keep its grown buffer while idle).
    fn shrink(&mut self) {
        if self.is_empty() && self.data.len() > READ_BUFFER {
            self.data.truncate(READ_BUFFER);
            self.data.shrink_to_fit();
        }
    }

    /// Free space to read into: the unread bytes move to the front first when that leaves
    /// too little, and the buffer doubles when a whole buffer is unread (a long head).
    fn spare(&mut self) -> &mut [u8] {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = self.data.len() * 2;
                self.data.resize(grown, 0);
            }
        }
        &mut self.data[self.end..]
    }
}

/// An open connection to a replica, and the worker whose runtime watches its socket (its
/// idle queue is that worker's).
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    buf: ReadBuffer,
    /// The request being sent, kept for the next one (no allocation per request).
    out: Vec<u8>,
    owner: usize,
}

impl Conn {
    /// A connection opened on this thread.
    fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buf: ReadBuffer::new(),
            out: Vec::with_capacity(512),
            owner: worker(),
        }
    }

    /// The idle queue this connection returns to.
    fn shard(&self) -> usize {
        self.owner % SHARDS
    }

    /// This connection, watched by this thread's runtime from now on (`None` if the socket
    /// cannot move: it is closed).
    fn moved_here(self) -> Option<Conn> {
        if self.owner == worker() {
            return Some(self);
        }
        let std = self.stream.into_std().ok()?;
        let stream = TcpStream::from_std(std).ok()?;
        Some(Conn {
            stream,
            owner: worker(),
            ..self
        })
    }

    /// Whether the replica closed the connection (or sent bytes nobody asked for) while it
    /// sat idle. Costs no system call unless the runtime saw the socket become readable.
    fn closed_while_idle(&self) -> bool {
        let mut probe = [0u8; 1];
        !matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Reads more bytes into the buffer: `Ok(0)` at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut rb = tokio::io::ReadBuf::new(self.buf.spare());
        ready!(Pin::new(&mut self.stream).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        self.buf.end += n;
        Poll::Ready(Ok(n))
    }

    /// Writes all of `head`, then all of `body`, in as few system calls as the socket takes
    /// them (`AsyncWriteExt::write_all` needs tokio's `io-util` feature, which nothing else
    /// in the workspace uses).
    async fn write_all(&mut self, mut head: &[u8], mut body: &[u8]) -> io::Result<()> {
        while !head.is_empty() || !body.is_empty() {
            let n = std::future::poll_fn(|cx| {
                let stream = Pin::new(&mut self.stream);
                if body.is_empty() {
                    stream.poll_write(cx, head)
                } else {
                    stream.poll_write_vectored(cx, &[IoSlice::new(head), IoSlice::new(body)])
                }
            })
            .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            let from_head = n.min(head.len());
            head = &head[from_head..];
            body = &body[n - from_head..];
        }
        Ok(())
    }

    /// Sends the request head in `out` and `body`, and reads the response head.
    async fn exchange(&mut self, body: &[u8]) -> Result<Head, Failure> {
        debug_assert!(
            self.buf.is_empty(),
            "a pooled connection holds no unread bytes"
        );
        let out = std::mem::take(&mut self.out);
        let sent = self.write_all(&out, body).await;
        self.out = out;
        sent.map_err(Failure::Unanswered)?;
        // Bytes already searched for the blank line that ends a head: the head is parsed
        // only once one may be complete, so a head arriving a byte at a time costs a scan
        // of each byte, not a parse of the whole buffer per read.
        let mut scanned: usize = 0;
        loop {
            let filled = self.buf.filled();
            let from = scanned.saturating_sub(3);
            if let Some(end) = filled[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                scanned = from + end + 4;
                match h1::parse_head(filled) {
                    Ok(Some(head)) => {
                        self.buf.consume(head.len);
                        return Ok(head);
                    }
                    // An interim 1xx answer ended there: look for the next blank line.
                    Ok(None) => continue,
                    Err(e) => return Err(Failure::Failed(e.into())),
                }
            }
            scanned = filled.len();
            if scanned > h1::MAX_HEAD {
                return Err(Failure::Failed(ProtocolError::HeadTooLarge.into()));
            }
            let started = !self.buf.is_empty();
            match std::future::poll_fn(|cx| self.poll_fill(cx)).await {
                Ok(0) if started => {
                    return Err(Failure::Failed(UpstreamError::Io(
                        "the replica closed the connection in the middle of the response head"
                            .into(),
                    )))
                }
                Ok(0) => {
                    return Err(Failure::Unanswered(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the replica closed the connection without answering",
                    )))
                }
                Ok(_) => {}
                Err(e) if started => return Err(Failure::Failed(UpstreamError::Io(e.to_string()))),
                Err(e) => return Err(Failure::Unanswered(e)),
            }
        }
    }
}

/// A replica's answer: status and headers, and the body still to relay.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The header fields, hop-by-hop ones still in.
    pub headers: HeaderMap,
    /// The body.
    pub body: relay::UpstreamBody,
}

/// The idle connections of one replica.
#[derive(Debug)]
pub struct Pool {
    address: String,
    host: HeaderValue,
    idle: [Mutex<VecDeque<(Conn, Instant)>>; SHARDS],
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

    /// The replica's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// An idle connection: from this worker's queue, else from another worker's (oldest
    /// first in each), so a burst on one worker does not open connections while another
    /// worker's sit idle. One taken from another worker moves to this worker's runtime
    /// and queue: left on the other runtime, each of its reads would wake this worker
    /// from the other thread (an eventfd write and a wake-up per request).
    fn take(&self) -> Option<Conn> {
        let own = own_queue();
        let queues = QUEUES_IN_USE.load(Ordering::Relaxed).max(own + 1);
        // Past `SHARDS` workers share a queue: another worker's connection moves too.
        (0..queues).find_map(|k| self.take_from((own + k) % queues)?.moved_here())
    }

    fn take_from(&self, shard: usize) -> Option<Conn> {
        let mut idle = self.idle[shard].lock().unwrap_or_else(|e| e.into_inner());
        // Oldest first: one idle too long is dropped (closing it), and the next is newer.
        while let Some((conn, since)) = idle.pop_front() {
            if since.elapsed() <= MAX_IDLE_AGE && !conn.closed_while_idle() {
                return Some(conn);
            }
        }
        None
    }

    /// Returns a connection whose last response was read to its end.
    fn put(&self, mut conn: Conn) {
        conn.buf.shrink();
        let mut idle = self.idle[conn.shard()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push_back((conn, Instant::now()));
        }
    }

    /// Closes the idle connections the replica closed (the socket would otherwise stay
    /// half-closed, holding a descriptor, until a request took it) or that are older than
    /// [`MAX_IDLE_AGE`]. The balancer's background task runs it every second; it locks each
    /// idle queue once.
    pub fn sweep(&self) {
        for queue in &self.idle {
            let mut idle = queue.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(conn, since)| {
                since.elapsed() <= MAX_IDLE_AGE && !conn.closed_while_idle()
            });
        }
    }

    async fn connect(&self, timeout: Duration) -> Result<TcpStream, UpstreamError> {
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
        Ok(tcp)
    }

    /// Writes the request head into `out`: `METHOD path`, this replica's `Host`, the
    /// body's `Content-Length` (for a body, and for every `POST`), then the header lines
    /// `write_headers` writes (each ending in CRLF).
    fn write_request(
        &self,
        out: &mut Vec<u8>,
        req: &Outgoing<'_>,
        write_headers: &impl Fn(&mut Vec<u8>),
    ) {
        out.clear();
        out.extend_from_slice(req.method.bytes());
        out.push(b' ');
        out.extend_from_slice(req.path.as_str().as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        out.extend_from_slice(self.host.as_bytes());
        out.extend_from_slice(b"\r\n");
        if !req.body.is_empty() || req.method == Method::Post {
            use std::io::Write;
            let _ = write!(out, "content-length: {}\r\n", req.body.len());
        }
        write_headers(out);
        out.extend_from_slice(b"\r\n");
    }

    /// Sends `GET path` with no body: [`Pool::send`].
    pub async fn get(
        &self,
        path: &PathAndQuery,
        write_headers: impl Fn(&mut Vec<u8>),
        connect_timeout: Duration,
    ) -> Result<Answer, UpstreamError> {
        self.send(&Outgoing::get(path), write_headers, connect_timeout)
            .await
    }

    /// Sends `req` with the header lines `write_headers` writes (and this replica's `Host`)
    /// on an idle connection, or a new one (opened within `connect_timeout`), and reads the
    /// answer's head. An idle connection closed under the request passes it to the next
    /// one if [`Outgoing::resend`] allows, else the request fails there.
    pub async fn send(
        &self,
        req: &Outgoing<'_>,
        write_headers: impl Fn(&mut Vec<u8>),
        connect_timeout: Duration,
    ) -> Result<Answer, UpstreamError> {
        for _ in 0..MAX_STALE_TRIES {
            let Some(mut conn) = self.take() else { break };
            self.write_request(&mut conn.out, req, &write_headers);
            match conn.exchange(req.body).await {
                Ok(head) => return Ok(self.answer(conn, head)),
                Err(Failure::Unanswered(e)) if !req.resend => {
                    return Err(UpstreamError::Io(format!(
                        "an idle connection closed under the request ({e}); it may not be \
                         sent twice"
                    )))
                }
                Err(Failure::Unanswered(_)) => {}
                Err(Failure::Failed(e)) => return Err(e),
            }
        }
        let mut conn = Conn::new(self.connect(connect_timeout).await?);
        self.write_request(&mut conn.out, req, &write_headers);
        match conn.exchange(req.body).await {
            Ok(head) => Ok(self.answer(conn, head)),
            Err(Failure::Unanswered(e)) => Err(UpstreamError::Io(e.to_string())),
            Err(Failure::Failed(e)) => Err(e),
        }
    }

    /// The answer to relay. A body that came whole with the head is taken out at once and
    /// the connection goes back to the queue now.
    fn answer(&self, mut conn: Conn, head: Head) -> Answer {
        let whole = match head.framing {
            Framing::Empty => Some(Bytes::new()),
            Framing::Length(n) if (head.rest.len() as u64) >= n => {
                let n = n as usize;
                conn.buf.consume(n);
                Some(head.rest.slice(..n))
            }
            _ => None,
        };
        let body = match whole {
            Some(bytes) => {
                // Bytes past the body are a protocol error: the connection is not reused.
                if head.keep_alive && conn.buf.is_empty() {
                    self.put(conn);
                }
                relay::UpstreamBody::whole(bytes)
            }
            None => relay::UpstreamBody::streaming(conn, head.framing, head.keep_alive),
        };
        Answer {
            status: head.status,
            headers: head.headers,
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pool: &Pool, req: &Outgoing<'_>) -> String {
        let mut out = Vec::new();
        pool.write_request(&mut out, req, &|o: &mut Vec<u8>| {
            o.extend_from_slice(b"content-type: application/json\r\n")
        });
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn requests_carry_their_method_and_a_length_for_a_body() {
        let pool = Pool::new("127.0.0.1:9").unwrap();
        let path = PathAndQuery::from_static("/books/_search?pretty");
        assert_eq!(
            head(&pool, &Outgoing::get(&path)),
            "GET /books/_search?pretty HTTP/1.1\r\nhost: 127.0.0.1:9\r\n\
             content-type: application/json\r\n\r\n"
        );
        let post = Outgoing {
            method: Method::Post,
            path: &path,
            body: b"{\"query\":{}}",
            resend: true,
        };
        assert_eq!(
            head(&pool, &post),
            "POST /books/_search?pretty HTTP/1.1\r\nhost: 127.0.0.1:9\r\n\
             content-length: 12\r\ncontent-type: application/json\r\n\r\n"
        );
        let empty = Outgoing { body: b"", ..post };
        assert!(head(&pool, &empty).contains("\r\ncontent-length: 0\r\n"));
    }

    #[tokio::test]
    async fn a_head_and_a_body_arrive_whole_and_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let big = vec![b'x'; 300_000];
        let want = big.len() + 5;
        let reader = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            while got.len() < want {
                s.readable().await.unwrap();
                match s.try_read(&mut buf) {
                    Ok(n) => {
                        assert!(n > 0, "closed early");
                        got.extend_from_slice(&buf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
            got
        });
        let mut conn = Conn::new(TcpStream::connect(addr).await.unwrap());
        conn.write_all(b"head:", &big).await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(&got[..5], b"head:");
        assert!(got[5..].iter().all(|&b| b == b'x') && got.len() == want);
    }
}
