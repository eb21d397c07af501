//! One small blocking HTTP/1.1 client for the tests: a request on a fresh connection
//! ([`request`], [`get`]) or several on one keep-alive connection ([`Conn`]). Responses are
//! parsed, not read to the end of the connection: the status line, the headers, and a body
//! framed by `Content-Length`, by chunks (with extensions and trailers) or by the close;
//! interim 1xx answers are skipped (and listed). Every read and write has a timeout.
//!
//! Tests that send malformed bytes on purpose write them on a [`Conn`] (it is `Write`) and
//! read the answer with [`Conn::read_response`].

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::LIMIT;

/// The longest head line and the most header lines a response may have.
const MAX_LINE: usize = 64 << 10;
const MAX_HEADERS: usize = 200;
/// The largest body a response may announce (the tests' largest is 1 MiB).
const MAX_BODY: u64 = 256 << 20;

/// A parsed response.
#[derive(Clone, Debug, Default)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The header fields, names in lower case; a repeated field's values joined by `, `.
    pub headers: BTreeMap<String, String>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// The trailer fields of a chunked body, names in lower case.
    pub trailers: BTreeMap<String, String>,
    /// The status codes of the interim (1xx) answers that came first.
    pub interim: Vec<u16>,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

impl Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body as JSON, failing the test with the body when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "the {} answer is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

/// An HTTP/1.1 client connection. It reads through a buffer kept across responses, so a
/// response that arrives with the start of the next one loses nothing.
#[derive(Debug)]
pub struct Conn {
    reader: BufReader<TcpStream>,
    peer: SocketAddr,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The bytes of a request: `Host: test` unless `headers` has a Host, and `Content-Length`
/// when there is a body (or the method usually has one) and `headers` frame none.
pub fn request_bytes(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    if !has("host") {
        head += "Host: test\r\n";
    }
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    let framed = has("content-length") || has("transfer-encoding");
    let usual = matches!(method, "POST" | "PUT" | "PATCH");
    if !framed && (usual || !body.is_empty()) {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "\r\n";
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

impl Conn {
    /// Connects to `addr` within `limit`, with read and write timeouts of `limit`.
    pub fn try_open(addr: SocketAddr, limit: Duration) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, limit)?;
        s.set_read_timeout(Some(limit))?;
        s.set_write_timeout(Some(limit))?;
        let _ = s.set_nodelay(true);
        Ok(Conn {
            reader: BufReader::new(s),
            peer: addr,
        })
    }

    /// [`Conn::try_open`], failing the test when the connection cannot be made.
    pub fn open(addr: SocketAddr, limit: Duration) -> Conn {
        Conn::try_open(addr, limit).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    /// The socket.
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    /// The read timeout for what follows (`None`: block).
    pub fn set_read_timeout(&self, limit: Option<Duration>) {
        self.stream()
            .set_read_timeout(limit)
            .expect("set_read_timeout");
    }

    /// Writes one request (see [`request_bytes`]).
    pub fn try_send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<()> {
        let bytes = request_bytes(method, target, headers, body);
        self.reader.get_mut().write_all(&bytes)
    }

    /// [`Conn::try_send`], failing the test when the request cannot be written.
    pub fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.try_send(method, target, headers, body)
            .unwrap_or_else(|e| panic!("write {method} {target} to {}: {e}", self.peer));
    }

    /// Reads the response to a request that was not `HEAD`.
    pub fn read_response(&mut self) -> io::Result<Response> {
        self.read_response_to("GET")
    }

    /// Reads the response to a `method` request (a `HEAD` answer has no body).
    pub fn read_response_to(&mut self, method: &str) -> io::Result<Response> {
        let mut interim = Vec::new();
        loop {
            let (status, headers) = self.read_head()?;
            if (100..200).contains(&status) && status != 101 {
                interim.push(status);
                continue;
            }
            let mut resp = Response {
                status,
                headers,
                interim,
                ..Response::default()
            };
            self.read_body(method, &mut resp)?;
            return Ok(resp);
        }
    }

    /// Sends a request and reads its response, failing the test on any error.
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        self.send(method, target, headers, body);
        self.read_response_to(method)
            .unwrap_or_else(|e| panic!("no response to {method} {target} from {}: {e}", self.peer))
    }

    /// Waits up to `limit` for the peer to close the connection (end of file or reset),
    /// discarding what it sends; how long it took, `None` if it stayed open.
    pub fn wait_closed(&mut self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while start.elapsed() < limit {
            let left = limit
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(1));
            self.set_read_timeout(Some(left.min(Duration::from_millis(50))));
            match self.reader.read(&mut buf) {
                Ok(0) => return Some(start.elapsed()),
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(_) => return Some(start.elapsed()),
            }
        }
        None
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed",
            ));
        }
        if line.last() != Some(&b'\n') {
            return Err(if n >= MAX_LINE {
                invalid("a line longer than 64 KiB")
            } else {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed mid-line",
                )
            });
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        String::from_utf8(line).map_err(|_| invalid("a line that is not UTF-8"))
    }

    /// Header (or trailer) fields up to the empty line.
    fn read_fields(&mut self) -> io::Result<BTreeMap<String, String>> {
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
        for _ in 0..MAX_HEADERS {
            let line = self.read_line()?;
            if line.is_empty() {
                return Ok(fields);
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| invalid(format!("a header line without a colon: {line:?}")))?;
            if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace()) {
                return Err(invalid(format!("a bad header name: {line:?}")));
            }
            let (name, value) = (name.to_ascii_lowercase(), value.trim());
            fields
                .entry(name)
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(value);
                })
                .or_insert_with(|| value.to_owned());
        }
        Err(invalid(format!("more than {MAX_HEADERS} header lines")))
    }

    fn read_head(&mut self) -> io::Result<(u16, BTreeMap<String, String>)> {
        let line = self.read_line()?;
        let mut parts = line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(invalid(format!("not an HTTP/1.x status line: {line:?}")));
        }
        let code = parts.next().unwrap_or_default();
        let status = (code.len() == 3)
            .then(|| code.parse::<u16>().ok())
            .flatten()
            .ok_or_else(|| invalid(format!("a bad status code: {line:?}")))?;
        let headers = self.read_fields()?;
        Ok((status, headers))
    }

    fn read_body(&mut self, method: &str, resp: &mut Response) -> io::Result<()> {
        let h = &resp.headers;
        let close = h
            .get("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        resp.keep_alive = !close;
        if method == "HEAD" || matches!(resp.status, 101 | 204 | 304) {
            return Ok(());
        }
        if let Some(te) = h.get("transfer-encoding") {
            let last = te.rsplit(',').next().unwrap_or_default().trim();
            if last.eq_ignore_ascii_case("chunked") {
                return self.read_chunked(resp);
            }
            // Not chunked last: the body runs to the close (RFC 9112, 6.3).
            resp.keep_alive = false;
            self.reader.read_to_end(&mut resp.body)?;
            return Ok(());
        }
        if let Some(cl) = h.get("content-length") {
            let mut values = cl.split(',').map(str::trim);
            let first = values.next().unwrap_or_default();
            if values.any(|v| v != first) {
                return Err(invalid(format!("conflicting Content-Length: {cl}")));
            }
            let n: u64 = first
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| first.parse().ok())
                .flatten()
                .ok_or_else(|| invalid(format!("a bad Content-Length: {cl}")))?;
            if n > MAX_BODY {
                return Err(invalid(format!("a body of {n} bytes")));
            }
            resp.body = vec![0; n as usize];
            return self.reader.read_exact(&mut resp.body);
        }
        resp.keep_alive = false;
        self.reader.read_to_end(&mut resp.body)?;
        Ok(())
    }

    fn read_chunked(&mut self, resp: &mut Response) -> io::Result<()> {
        loop {
            let line = self.read_line()?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let n = u64::from_str_radix(size, 16)
                .map_err(|_| invalid(format!("a bad chunk size line: {line:?}")))?;
            if n == 0 {
                resp.trailers = self.read_fields()?;
                return Ok(());
            }
            if resp.body.len() as u64 + n > MAX_BODY {
                return Err(invalid("a chunked body over 256 MiB"));
            }
            let start = resp.body.len();
            resp.body.resize(start + n as usize, 0);
            self.reader.read_exact(&mut resp.body[start..])?;
            if !self.read_line()?.is_empty() {
                return Err(invalid("a chunk not followed by CRLF"));
            }
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.reader.get_mut().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.reader.get_mut().flush()
    }
}

/// A read that ended because the timeout passed.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// One request on a fresh connection, with connect, read and write timeouts of `limit`.
/// `Connection: close` is added unless `headers` has a Connection field.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limit: Duration,
) -> io::Result<Response> {
    let mut conn = Conn::try_open(addr, limit)?;
    let mut all = headers.to_vec();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("connection"))
    {
        all.push(("Connection", "close"));
    }
    conn.try_send(method, target, &all, body)?;
    conn.read_response_to(method)
}

/// [`try_request`] with the [`LIMIT`] timeouts, failing the test on any error.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    try_request(addr, method, target, headers, body, LIMIT)
        .unwrap_or_else(|e| panic!("{method} {target} to {addr}: {e}"))
}

/// `GET target` on a fresh connection (see [`request`]).
pub fn get(addr: SocketAddr, target: &str) -> Response {
    request(addr, "GET", target, &[], b"")
}

/// `GET path` to `addr` (`host:port`) with timeouts of `limit`: the status and the body as
/// text, or `None` if the server could not be reached or did not answer.
pub fn http_get(addr: &str, path: &str, limit: Duration) -> Option<(u16, String)> {
    let sock: SocketAddr = addr.parse().ok()?;
    let r = try_request(sock, "GET", path, &[("Host", addr)], b"", limit).ok()?;
    Some((r.status, r.text()))
}

/// `GET /stats` of a replica at `addr`: its `queries` counter (0 if it cannot be reached).
pub fn replica_queries(addr: &str) -> u64 {
    http_get(addr, "/stats", Duration::from_secs(2))
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
        .and_then(|v| v["queries"].as_u64())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that writes `answer` in `pieces`-sized bits to the first connection, after
    /// reading its request head, then closes it.
    fn scripted(answer: &'static [u8], piece: usize) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let mut w = s;
            for p in answer.chunks(piece) {
                w.write_all(p).unwrap();
                w.flush().unwrap();
            }
        });
        addr
    }

    fn fetch(answer: &'static [u8], piece: usize) -> io::Result<Response> {
        try_request(scripted(answer, piece), "GET", "/", &[], b"", LIMIT)
    }

    #[test]
    fn bodies_framed_by_length_chunks_or_the_close_are_read_whole() {
        for piece in [1, 7, 4096] {
            let r = fetch(
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n\
                  Transfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n\
                  5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: t\r\n\r\n",
                piece,
            )
            .unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
            assert_eq!(r.interim, [103]);
            assert_eq!(r.header("X-A"), Some("1, 2"));
            assert_eq!(r.trailers["x-trailer"], "t");
            let r = fetch(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnopeEXTRA",
                piece,
            )
            .unwrap();
            assert_eq!(
                (r.status, r.text().as_str(), r.keep_alive),
                (404, "nope", true)
            );
            let r = fetch(
                b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nuntil close",
                piece,
            )
            .unwrap();
            assert_eq!((r.text().as_str(), r.keep_alive), ("until close", false));
        }
    }

    #[test]
    fn broken_answers_are_errors_not_guesses() {
        for bad in [
            &b"garbage\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"",
        ] {
            let leaked: &'static [u8] = Box::leak(bad.to_vec().into_boxed_slice());
            assert!(
                fetch(leaked, 4096).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn requests_carry_host_and_a_length_only_when_needed() {
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        assert_eq!(
            text(request_bytes("GET", "/x", &[], b"")),
            "GET /x HTTP/1.1\r\nHost: test\r\n\r\n"
        );
        assert_eq!(
            text(request_bytes("POST", "/t", &[("host", "h")], b"")),
            "POST /t HTTP/1.1\r\nhost: h\r\nContent-Length: 0\r\n\r\n"
        );
        assert_eq!(
            text(request_bytes(
                "POST",
                "/t",
                &[("Transfer-Encoding", "chunked")],
                b"0\r\n\r\n"
            )),
            "POST /t HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        );
    }
}
