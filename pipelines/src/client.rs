//! The `ballot` command's one HTTP client: target URLs, query-string encoding, a pooled
//! keep-alive client (hyper 1 + hyper-util's legacy client, HTTP/1.1, no TLS), the
//! classification of every failed request into one error kind, and a blocking call for
//! the batch jobs' few admin requests (`retrain`'s table upload, the demo's `/metrics`).
//! `ballot replay` drives the pooled client from its own runtime.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A parsed `http://host:port[/prefix]` base URL.
#[derive(Clone, Debug)]
pub struct BaseUrl {
    /// `host:port` (port defaulted to 80).
    pub authority: String,
    /// Path prefix without a trailing slash ("" for the root).
    pub prefix: String,
    /// The URL as given, for messages.
    pub text: String,
}

impl BaseUrl {
    /// Parses `text`; `what` names the option in errors.
    pub fn parse(text: &str, what: &str) -> Result<BaseUrl> {
        let uri: Uri = text
            .parse()
            .with_context(|| format!("{what} {text:?} is not a URL like http://127.0.0.1:8080"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(s) => bail!("{what} {text:?}: only http:// is supported, not {s}://"),
            None => bail!("{what} {text:?} is not a URL like http://127.0.0.1:8080 (no http://)"),
        }
        let Some(auth) = uri.authority() else {
            bail!("{what} {text:?} has no host");
        };
        if auth.host().is_empty() {
            bail!("{what} {text:?} has no host");
        }
        if uri.query().is_some() {
            bail!("{what} {text:?} must not have a query string");
        }
        let authority = format!("{}:{}", auth.host(), auth.port_u16().unwrap_or(80));
        let prefix = uri.path().trim_end_matches('/').to_owned();
        Ok(BaseUrl {
            authority,
            prefix,
            text: text.to_owned(),
        })
    }

    /// `http://authority/prefix{path}`.
    pub fn join(&self, path: &str) -> String {
        format!("http://{}{}{}", self.authority, self.prefix, path)
    }

    /// The URL of query `q` with `k` results at `path` (`/search` for ballot's servers):
    /// `path?q=<q>&k=<k>`.
    pub fn search(&self, path: &str, q: &str, k: usize) -> String {
        let mut url = self.join(path);
        url.push_str("?q=");
        encode_into(q, &mut url);
        url.push_str("&k=");
        url.push_str(&k.to_string());
        url
    }

    /// The `/stats` URL: the base itself when it already ends in `/stats`.
    pub fn stats(&self) -> String {
        if self.prefix.ends_with("/stats") {
            self.join("")
        } else {
            self.join("/stats")
        }
    }
}

/// Percent-encodes `s` as a query-string value: RFC 3986 unreserved bytes stay, every other
/// byte (UTF-8) becomes `%XX`, so `+`, `&`, `=`, `#` and spaces survive the round trip.
pub fn encode_into(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

/// The pooled client.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A keep-alive client; at most `idle` idle connections are kept per host.
pub fn client(connect_timeout: Duration, idle: usize) -> HttpClient {
    let mut conn = HttpConnector::new();
    conn.set_nodelay(true);
    conn.set_connect_timeout(Some(connect_timeout));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(idle)
        .build(conn)
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection could not be made.
    Connect,
    /// No complete answer within the request timeout.
    Timeout,
    /// A non-2xx status.
    Status(u16),
    /// Anything else (connection reset, malformed response, body error).
    Other,
}

impl Failure {
    /// The error kind reported: `connect`, `timeout`, `http_503`, `other`.
    pub fn kind(&self) -> String {
        match self {
            Failure::Connect => "connect".into(),
            Failure::Timeout => "timeout".into(),
            Failure::Status(s) => format!("http_{s}"),
            Failure::Other => "other".into(),
        }
    }
}

/// GETs `url` and reads the whole body (so the connection goes back to the pool), within
/// `timeout`.
pub async fn get(client: &HttpClient, url: &str, timeout: Duration) -> Result<Bytes, Failure> {
    let uri: Uri = url.parse().map_err(|_| Failure::Other)?;
    let fut = async {
        let resp = client.get(uri).await.map_err(|e| {
            if e.is_connect() {
                Failure::Connect
            } else {
                Failure::Other
            }
        })?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|_| Failure::Other)?
            .to_bytes();
        if status.is_success() {
            Ok(body)
        } else {
            Err(Failure::Status(status.as_u16()))
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(Failure::Timeout),
    }
}

/// Opens (and closes) one TCP connection to `base` within `timeout`, so an unreachable
/// target fails the run at once with a clear message.
pub async fn check_reachable(base: &BaseUrl, what: &str, timeout: Duration) -> Result<()> {
    let attempt = async {
        let addrs: Vec<_> = tokio::net::lookup_host(&base.authority)
            .await
            .with_context(|| format!("cannot resolve {}", base.authority))?
            .collect();
        let mut last = None;
        for a in &addrs {
            match tokio::net::TcpStream::connect(a).await {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(anyhow::Error::new(e)),
            None => bail!("{} resolves to no address", base.authority),
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.context(format!("{what} {} is unreachable", base.text))),
        Err(_) => bail!(
            "{what} {} is unreachable: no connection within {:.1}s",
            base.text,
            timeout.as_secs_f64()
        ),
    }
}

/// An answer read whole: status, headers and body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: hyper::HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends `method path` to `addr` (`host:port`) with `headers` and `body` and reads the
/// whole answer, blocking the calling thread (a batch job's admin call: a runtime of its
/// own for the one request), within `timeout` for the whole exchange.
pub fn call(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Answer> {
    let url = format!("http://{addr}{path}");
    let uri: Uri = url
        .parse()
        .with_context(|| format!("{url} is not a valid URL"))?;
    let method = Method::from_bytes(method.as_bytes())
        .with_context(|| format!("{url}: bad method {method:?}"))?;
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::copy_from_slice(body)))
        .with_context(|| format!("{url}: bad request headers"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting an HTTP runtime")?;
    rt.block_on(async {
        let c = client(timeout, 1);
        let exchange = async {
            let resp = c
                .request(req)
                .await
                .with_context(|| format!("{url}: request failed"))?;
            let status = resp.status().as_u16();
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .with_context(|| format!("{url}: reading the answer"))?
                .to_bytes();
            Ok(Answer {
                status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => bail!("{url}: no answer within {:.1}s", timeout.as_secs_f64()),
        }
    })
}

/// `GET path` on `addr`, expecting 200; returns the body as text.
pub fn get_text(addr: &str, path: &str, timeout: Duration) -> Result<String> {
    let r = call(addr, "GET", path, &[], &[], timeout)?;
    if r.status != 200 {
        bail!(
            "http://{addr}{path} answered {}: {}",
            r.status,
            r.text().trim()
        );
    }
    Ok(r.text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let b = BaseUrl::parse("http://127.0.0.1:9000/", "--target").unwrap();
        assert_eq!(b.authority, "127.0.0.1:9000");
        assert_eq!(
            b.search("/search", "a b+c&d=é", 10),
            "http://127.0.0.1:9000/search?q=a%20b%2Bc%26d%3D%C3%A9&k=10"
        );
        assert_eq!(
            b.search("/api/", "x", 3),
            "http://127.0.0.1:9000/api/?q=x&k=3"
        );
        assert_eq!(b.stats(), "http://127.0.0.1:9000/stats");
        let b = BaseUrl::parse("http://localhost/x/stats", "--stats-from").unwrap();
        assert_eq!(b.authority, "localhost:80");
        assert_eq!(b.stats(), "http://localhost:80/x/stats");
        for bad in [
            "",
            "localhost:80",
            "https://a:1",
            "ftp://x",
            "http://",
            "http://a:1/?q=1",
        ] {
            assert!(BaseUrl::parse(bad, "--target").is_err(), "{bad:?}");
        }
    }
}
