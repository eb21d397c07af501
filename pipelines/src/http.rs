//! A small blocking HTTP/1.1 client for the batch commands' calls to a balancer's admin
//! API (`/metrics`, `/admin/table`): one request per connection (`Connection: close`), a
//! deadline on connecting, writing and reading, and a bounded response. The servers
//! themselves use hyper; a batch job that makes a handful of calls needs no runtime.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Largest response body read (a voting table can be tens of MB).
const MAX_RESPONSE_BYTES: u64 = 1 << 30;

/// An HTTP response: status code and body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The response headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` to `addr` (`host:port`) with `headers` and `body`, waiting at most
/// `timeout` for each of connecting, writing and every read.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response> {
    let url = format!("http://{addr}{path}");
    let sock = addr
        .to_socket_addrs()
        .with_context(|| format!("{url}: cannot resolve {addr}"))?
        .next()
        .with_context(|| format!("{url}: {addr} resolves to no address"))?;
    let mut s = TcpStream::connect_timeout(&sock, timeout)
        .with_context(|| format!("{url}: cannot connect"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .with_context(|| format!("{url}: sending the request"))?;
    let mut raw = Vec::new();
    (&mut s)
        .take(MAX_RESPONSE_BYTES)
        .read_to_end(&mut raw)
        .with_context(|| format!("{url}: reading the response"))?;
    parse(&raw).with_context(|| format!("{url}: malformed response"))
}

/// `GET path` on `addr`, expecting 200; returns the body as text.
pub fn get_text(addr: &str, path: &str, timeout: Duration) -> Result<String> {
    let r = request(addr, "GET", path, &[], &[], timeout)?;
    if r.status != 200 {
        bail!(
            "http://{addr}{path} answered {}: {}",
            r.status,
            r.text().trim()
        );
    }
    Ok(r.text())
}

fn parse(raw: &[u8]) -> Result<Response> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).context("headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    } else if let Some(n) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        if body.len() < n {
            bail!("the body ended after {} of {n} bytes", body.len());
        }
        body.truncate(n);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("unterminated chunk size")?;
        let size_text = std::str::from_utf8(&b[..eol])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size_text:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            bail!("a chunk is cut short");
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_chunked_bodies() {
        let r =
            parse(b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabcdef").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (201, b"abc".as_slice()));
        assert_eq!(r.header("x-a"), Some("b"));
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err());
        assert!(parse(b"garbage").is_err());
    }
}
