//! A programmable fake replica for the server tests: a keep-alive HTTP/1.1 server on
//! loopback (std threads, one per connection) that answers `/healthz` with 200 `ok` and
//! every other request with what its handler says ([`Reply`]); by default a search gets
//! 200 `NAME TARGET` and anything else 404.
//!
//! It counts what it receives (searches, health checks, connections) and records the
//! first 1,000 requests other than health checks whole (method, target, headers, body:
//! [`Backend::requests`]), so a test can wait for a request to *arrive* instead of
//! sleeping and check what a proxy sent, and it can hold searches at a gate
//! ([`Backend::hold`]) until the test releases them, so a test decides when a request in
//! flight ends. It can also delay or shed searches, stall every request, be killed (its
//! connections reset, like a crashed process) and restarted on the same port.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::{wait_until, LIMIT};

/// One request as the backend read it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target (`/search?q=...`).
    pub target: String,
    /// The header fields in order, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` framed; empty when there is none).
    pub body: Vec<u8>,
    /// Requests before this one on its connection (0 for the first).
    pub on_connection: usize,
    /// For a search, its number in arrival order (1 for the first); for another request,
    /// the searches received so far.
    pub searches: u64,
}

impl Request {
    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// Whether it is a search (`/search...`).
    pub fn is_search(&self) -> bool {
        self.target.starts_with("/search")
    }

    /// Header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a backend answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 text/plain: the backend's name and the request target (`b0 /search?q=x`).
    Echo,
    /// This status with a text/plain body.
    Text(u16, String),
    /// This status with an application/json body.
    Json(u16, String),
    /// 200 with the request's header fields as the body, one `name: value` per line.
    EchoHeaders,
    /// Headers promising 1,000 bytes, 10 of them, and then nothing until the backend is
    /// killed or dropped (or a minute passes).
    StallMidBody,
    /// These bytes as they are, piece after piece, the connection closed after them if
    /// `close`.
    Raw {
        /// Written one after another, 20 ms apart, so the reader gets them separately.
        pieces: Arc<Vec<Vec<u8>>>,
        /// Close the connection after the last piece.
        close: bool,
    },
    /// The connection is closed without an answer.
    Close,
}

impl Reply {
    /// [`Reply::Raw`] of `pieces`.
    pub fn raw(pieces: &[&[u8]], close: bool) -> Reply {
        Reply::Raw {
            pieces: Arc::new(pieces.iter().map(|p| p.to_vec()).collect()),
            close,
        }
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// The gate searches pass when the backend holds them.
#[derive(Default)]
struct Gate {
    closed: bool,
    /// Searches the test let through while the gate is closed, not yet used.
    tokens: u64,
    /// Searches waiting at the gate now.
    held: usize,
    /// The backend is killed or dropped: nothing waits any more.
    stopping: bool,
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    served: AtomicU64,
    health_checks: AtomicU64,
    accepted: AtomicU64,
    open: AtomicUsize,
    search_conns: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

struct Shared {
    name: String,
    handler: Handler,
    counts: Counters,
    delay_ms: AtomicU64,
    stall_ms: AtomicU64,
    shed: AtomicBool,
    /// The first 1,000 search targets, in arrival order.
    paths: Mutex<Vec<String>>,
    /// The first 1,000 requests other than health checks, in arrival order.
    requests: Mutex<Vec<Request>>,
    gate: Mutex<Gate>,
    changed: Condvar,
    /// The open connections by number, to reset them on a kill.
    conns: Mutex<HashMap<u64, TcpStream>>,
}

impl Shared {
    fn gate(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits at the gate while it is closed; false if the backend stopped meanwhile.
    fn pass(&self) -> bool {
        let mut g = self.gate();
        if !g.closed {
            return !g.stopping;
        }
        g.held += 1;
        self.changed.notify_all();
        while g.closed && g.tokens == 0 && !g.stopping {
            g = self.changed.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.held -= 1;
        if g.closed && g.tokens > 0 {
            g.tokens -= 1;
        }
        self.changed.notify_all();
        !g.stopping
    }

    /// Waits up to `limit` for the backend to stop.
    fn wait_stopping(&self, limit: Duration) {
        let start = Instant::now();
        let mut g = self.gate();
        while !g.stopping && start.elapsed() < limit {
            let left = limit.saturating_sub(start.elapsed());
            g = self
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A fake replica (see the module header). Killed when dropped.
pub struct Backend {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    stop_accept: Arc<AtomicBool>,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A whole answer with a `Content-Length` body, and a hop-by-hop header (named in
/// `Connection`) that a proxy must not forward.
fn answer(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nConnection: x-backend-private\r\n\
         X-Backend-Private: 1\r\nContent-Length: {}\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A request line, its header fields (names in lower case) and its body.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one request; `None` at the end of the connection. Bodies are framed by
/// `Content-Length` only.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Head> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    if len > 0 {
        std::io::Read::read_exact(reader, &mut body).ok()?;
    }
    Some(Head {
        method,
        target,
        headers,
        body,
    })
}

fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let _ = out.set_nodelay(true);
    let mut reader = BufReader::new(stream);
    let mut searched = false;
    let c = &shared.counts;
    for n in 0.. {
        let Some(Head {
            method,
            target,
            headers,
            body,
        }) = read_request(&mut reader)
        else {
            return;
        };
        let search = target.starts_with("/search");
        let health = target == "/healthz";
        let mut seq = 0;
        if search {
            seq = c.received.fetch_add(1, Ordering::SeqCst) + 1;
            let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            c.max_in_flight.fetch_max(now, Ordering::SeqCst);
            if !std::mem::replace(&mut searched, true) {
                c.search_conns.fetch_add(1, Ordering::SeqCst);
            }
            let mut paths = shared.paths.lock().unwrap_or_else(|p| p.into_inner());
            if paths.len() < 1000 {
                paths.push(target.clone());
            }
        } else if health {
            c.health_checks.fetch_add(1, Ordering::SeqCst);
        }
        let req = Request {
            method,
            target,
            headers,
            body,
            on_connection: n,
            searches: if search {
                seq
            } else {
                c.received.load(Ordering::SeqCst)
            },
        };
        if !health {
            let mut all = shared.requests.lock().unwrap_or_else(|p| p.into_inner());
            if all.len() < 1000 {
                all.push(req.clone());
            }
        }
        // A search leaves the in-flight count before its answer is written: the client
        // cannot see the answer (and send the next request) while it is still counted.
        let answering = || {
            if search {
                c.in_flight.fetch_sub(1, Ordering::SeqCst);
            }
        };
        let served = |status: u16| {
            if search && (200..300).contains(&status) {
                c.served.fetch_add(1, Ordering::SeqCst);
            }
        };
        // A slow or hung replica: the delay is the subject, not an order between requests.
        let stall = shared.stall_ms.load(Ordering::SeqCst);
        if stall > 0 {
            thread::sleep(Duration::from_millis(stall));
        }
        if health {
            if out.write_all(&answer(200, "text/plain", b"ok")).is_err() {
                return;
            }
            continue;
        }
        if search {
            if !shared.pass() {
                answering();
                return;
            }
            let delay = shared.delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                // A slow replica (service time), not an order between requests.
                thread::sleep(Duration::from_millis(delay));
            }
        }
        let reply = if search && shared.shed.load(Ordering::SeqCst) {
            Reply::Json(503, r#"{"error":"overloaded"}"#.to_owned())
        } else {
            match (shared.handler)(&req) {
                Reply::Echo => Reply::Text(200, format!("{} {}", shared.name, req.target)),
                Reply::EchoHeaders => Reply::Text(
                    200,
                    req.headers
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}\n"))
                        .collect(),
                ),
                other => other,
            }
        };
        answering();
        match reply {
            Reply::Text(status, body) => {
                if out
                    .write_all(&answer(status, "text/plain", body.as_bytes()))
                    .is_err()
                {
                    return;
                }
                served(status);
            }
            Reply::Json(status, body) => {
                if out
                    .write_all(&answer(status, "application/json", body.as_bytes()))
                    .is_err()
                {
                    return;
                }
                served(status);
            }
            Reply::Echo | Reply::EchoHeaders => unreachable!("resolved above"),
            Reply::StallMidBody => {
                let _ = out.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n0123456789",
                );
                shared.wait_stopping(Duration::from_secs(60));
                return;
            }
            Reply::Raw { pieces, close } => {
                for (i, piece) in pieces.iter().enumerate() {
                    if i > 0 {
                        // Split delivery is the subject (a reader must join the pieces).
                        thread::sleep(Duration::from_millis(20));
                    }
                    if out.write_all(piece).is_err() {
                        return;
                    }
                }
                served(200);
                if close {
                    let _ = out.shutdown(Shutdown::Both);
                    return;
                }
            }
            Reply::Close => {
                let _ = out.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

impl Backend {
    /// A backend named `name` that echoes searches (see [`Reply::Echo`]) and answers 404
    /// to anything else.
    pub fn start(name: &str) -> Backend {
        Backend::with_handler(name, |r| {
            if r.is_search() {
                Reply::Echo
            } else {
                Reply::Text(404, "nope".to_owned())
            }
        })
    }

    /// A backend that answers every search with `reply` (and 404 to anything else).
    pub fn with_reply(name: &str, reply: Reply) -> Backend {
        Backend::with_handler(name, move |r| {
            if r.is_search() {
                reply.clone()
            } else {
                Reply::Text(404, "nope".to_owned())
            }
        })
    }

    /// A backend whose `handler` answers every request but `/healthz`.
    pub fn with_handler(
        name: &str,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
        let addr = listener.local_addr().expect("backend address");
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            handler: Arc::new(handler),
            counts: Counters::default(),
            delay_ms: AtomicU64::new(0),
            stall_ms: AtomicU64::new(0),
            shed: AtomicBool::new(false),
            paths: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            gate: Mutex::new(Gate::default()),
            changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
        });
        let mut b = Backend {
            addr,
            shared,
            accept: None,
            stop_accept: Arc::new(AtomicBool::new(false)),
        };
        b.run(listener);
        b
    }

    fn run(&mut self, listener: TcpListener) {
        let stop = Arc::new(AtomicBool::new(false));
        self.stop_accept = Arc::clone(&stop);
        self.shared.gate().stopping = false;
        let shared = Arc::clone(&self.shared);
        self.accept = Some(thread::spawn(move || {
            for (id, s) in listener.incoming().enumerate() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                let id = id as u64;
                let c = &shared.counts;
                c.accepted.fetch_add(1, Ordering::SeqCst);
                c.open.fetch_add(1, Ordering::SeqCst);
                if let Ok(clone) = s.try_clone() {
                    let mut conns = shared.conns.lock().unwrap_or_else(|p| p.into_inner());
                    conns.insert(id, clone);
                }
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    serve(s, &shared);
                    let mut conns = shared.conns.lock().unwrap_or_else(|p| p.into_inner());
                    conns.remove(&id);
                    shared.counts.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }));
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its address as `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// The balancer config's `[[replicas]]` sections for `backends`, one each, named and
    /// addressed as the backend.
    pub fn replica_sections<'a>(backends: impl IntoIterator<Item = &'a Backend>) -> String {
        backends
            .into_iter()
            .map(|b| {
                format!(
                    "\n[[replicas]]\nname = \"{}\"\naddress = \"{}\"\n",
                    b.name(),
                    b.addr
                )
            })
            .collect()
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    // ------------------------------------------------------------ behaviour

    /// Every search waits `d` before its answer (after the gate).
    pub fn set_delay(&self, d: Duration) {
        self.shared
            .delay_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Every request, health checks included, waits `d` before its answer: a hung replica.
    pub fn set_stall(&self, d: Duration) {
        self.shared
            .stall_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Every search is answered 503 `{"error":"overloaded"}`, as a replica past its
    /// `--max-inflight` does.
    pub fn set_shed(&self, shed: bool) {
        self.shared.shed.store(shed, Ordering::SeqCst);
    }

    /// Closes the gate: searches from now on wait (counted by [`Backend::held`]) until
    /// [`Backend::release`] or [`Backend::open`] lets them through.
    pub fn hold(&self) {
        let mut g = self.shared.gate();
        g.closed = true;
        g.tokens = 0;
    }

    /// Lets `n` searches through the closed gate: those waiting first, in no set order.
    pub fn release(&self, n: u64) {
        self.shared.gate().tokens += n;
        self.shared.changed.notify_all();
    }

    /// Opens the gate: every waiting search goes on, and no later one waits.
    pub fn open(&self) {
        let mut g = self.shared.gate();
        g.closed = false;
        g.tokens = 0;
        self.shared.changed.notify_all();
    }

    // ------------------------------------------------------------ counters

    /// Searches received (counted on arrival, before any gate or delay).
    pub fn received(&self) -> u64 {
        self.shared.counts.received.load(Ordering::SeqCst)
    }

    /// Searches answered: with a 2xx status, or with raw bytes written whole.
    pub fn served(&self) -> u64 {
        self.shared.counts.served.load(Ordering::SeqCst)
    }

    /// Health checks (`GET /healthz`) received.
    pub fn health_checks(&self) -> u64 {
        self.shared.counts.health_checks.load(Ordering::SeqCst)
    }

    /// Searches waiting at the gate now.
    pub fn held(&self) -> usize {
        self.shared.gate().held
    }

    /// Searches received and not answered yet (held ones included).
    pub fn in_flight(&self) -> usize {
        self.shared.counts.in_flight.load(Ordering::SeqCst)
    }

    /// The most searches it ever had in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.shared.counts.max_in_flight.load(Ordering::SeqCst)
    }

    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.shared.counts.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.counts.open.load(Ordering::SeqCst)
    }

    /// Connections that carried at least one search (health checks left out).
    pub fn search_connections(&self) -> u64 {
        self.shared.counts.search_conns.load(Ordering::SeqCst)
    }

    /// The first 1,000 search targets, in arrival order.
    pub fn paths(&self) -> Vec<String> {
        self.shared
            .paths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The first 1,000 requests other than health checks (searches or not), whole, in
    /// arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits (within [`LIMIT`]) until it has received `n` searches in all.
    pub fn wait_received(&self, n: u64) {
        let what = format!("{} receiving {n} searches", self.name());
        wait_until(LIMIT, &what, || self.received() >= n);
    }

    /// Waits (within [`LIMIT`]) until `n` searches wait at its gate.
    pub fn wait_held(&self, n: usize) {
        let what = format!("{} holding {n} searches", self.name());
        wait_until(LIMIT, &what, || self.held() >= n);
    }

    // ------------------------------------------------------------ failures

    /// Stops accepting and resets every open connection, like a crashed process; searches
    /// held at the gate end unanswered.
    pub fn kill(&mut self) {
        self.stop_accept.store(true, Ordering::SeqCst);
        {
            let mut g = self.shared.gate();
            g.stopping = true;
            self.shared.changed.notify_all();
        }
        // Wake the accept loop so it sees the stop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let conns = self.shared.conns.lock().unwrap_or_else(|p| p.into_inner());
        for c in conns.values() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Listens on the same port again (after [`Backend::kill`]), with the gate open.
    pub fn restart(&mut self) {
        let listener = {
            let start = Instant::now();
            loop {
                match TcpListener::bind(self.addr) {
                    Ok(l) => break l,
                    Err(e) => {
                        assert!(
                            start.elapsed() < LIMIT,
                            "cannot listen on {} again: {e}",
                            self.addr
                        );
                        // A retry interval: the port comes free when the kernel lets go.
                        thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        };
        self.open();
        self.run(listener);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.kill();
        }
        // Searches still waiting at a gate or in a stalled body end.
        self.shared.gate().stopping = true;
        self.shared.changed.notify_all();
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.shared.name)
            .field("addr", &self.addr)
            .field("received", &self.received())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{get, Conn};

    #[test]
    fn held_searches_wait_until_released_and_are_counted_on_arrival() {
        let b = Backend::start("b0");
        b.hold();
        let addr = b.addr();
        let t: Vec<_> = (0..3)
            .map(|i| thread::spawn(move || get(addr, &format!("/search?q={i}"))))
            .collect();
        b.wait_held(3);
        assert_eq!((b.received(), b.served(), b.in_flight()), (3, 0, 3));
        b.release(1);
        wait_until(LIMIT, "one served", || b.served() == 1);
        assert_eq!(b.held(), 2);
        b.open();
        for t in t {
            let r = t.join().unwrap();
            assert_eq!(r.status, 200);
            assert!(r.text().starts_with("b0 /search?q="), "{}", r.text());
        }
        // A search counts as served once its answer is written whole, which the client
        // can see first: wait for the count, then check the rest.
        wait_until(LIMIT, "three served", || b.served() == 3);
        assert_eq!((b.in_flight(), b.max_in_flight()), (0, 3));
        assert_eq!(get(addr, "/healthz").text(), "ok");
        assert_eq!(get(addr, "/other").status, 404);
        assert_eq!(b.health_checks(), 1);
        assert_eq!(b.search_connections(), 3);
    }

    #[test]
    fn requests_are_recorded_whole_health_checks_left_out() {
        let b = Backend::with_handler("b2", |_| Reply::Echo);
        let mut c = Conn::open(b.addr(), LIMIT);
        let r = c.request(
            "POST",
            "/idx/_search?pretty",
            &[("Content-Type", "application/json")],
            b"{\"q\":1}",
        );
        assert_eq!(r.text(), "b2 /idx/_search?pretty");
        assert_eq!(c.request("GET", "/healthz", &[], b"").status, 200);
        assert_eq!(c.request("GET", "/search?q=a", &[], b"").status, 200);
        let seen = b.requests();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            (seen[0].method.as_str(), seen[0].path()),
            ("POST", "/idx/_search")
        );
        assert_eq!(seen[0].body, b"{\"q\":1}");
        assert_eq!(seen[0].header("content-type"), Some("application/json"));
        assert_eq!(
            (seen[1].target.as_str(), seen[1].body.len()),
            ("/search?q=a", 0)
        );
    }

    #[test]
    fn shed_raw_and_killed_backends_behave_as_scripted() {
        let mut b = Backend::with_handler("b1", |r| {
            if r.on_connection == 0 {
                Reply::raw(
                    &[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", b"ok"],
                    false,
                )
            } else {
                Reply::Close
            }
        });
        let mut c = Conn::open(b.addr(), LIMIT);
        assert_eq!(c.request("GET", "/search?q=a", &[], b"").text(), "ok");
        c.send("GET", "/search?q=b", &[], b"");
        assert!(c.read_response().is_err(), "closed unanswered");
        b.set_shed(true);
        assert_eq!(get(b.addr(), "/search?q=c").status, 503);
        b.set_shed(false);
        b.kill();
        assert!(crate::try_request(b.addr(), "GET", "/healthz", &[], b"", LIMIT).is_err());
        b.restart();
        assert_eq!(get(b.addr(), "/healthz").status, 200);
        wait_until(LIMIT, "connections closed", || b.open_connections() == 0);
    }
}
