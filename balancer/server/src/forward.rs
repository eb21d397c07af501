//! The headers a proxied request carries, after RFC 9110 §7.6.1 and the usual reverse-proxy
//! practice (HAProxy `option forwardfor`, nginx `$proxy_add_x_forwarded_for`):
//!
//! * the client's end-to-end headers go to the replica; hop-by-hop ones do not: `Connection`
//!   and every header it names, `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`. `Host` becomes the replica's address. `Content-Length`
//!   is dropped because the upstream client writes the length of the body it forwards
//!   (read whole, however the client framed it), and `Expect` because that body is already
//!   read;
//! * `x-forwarded-for` gets the client's address appended;
//! * `x-request-id` is the client's when it is a plausible id (1 to 128 characters of
//!   `[A-Za-z0-9._:-]`), else a fresh one; the response echoes it.
//!
//! The same hop-by-hop rule strips the replica's response headers.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use axum::http::header::{self, HeaderName};
use axum::http::{HeaderMap, HeaderValue};

/// `x-request-id`.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `x-forwarded-for`.
pub static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Longest client request id kept.
pub const MAX_REQUEST_ID: usize = 128;

/// Whether `name` is hop-by-hop by itself (not counting the names `Connection` lists).
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str().starts_with("proxy-")
}

/// Whether `token` (a header name, `close`, `keep-alive`) is listed in one of the
/// `Connection` values of `headers`, ignoring case.
pub fn connection_lists(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes the hop-by-hop headers of a response in place.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(header::CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
            .collect();
        for n in named {
            headers.remove(n);
        }
    }
    let drop: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_hop_by_hop(n))
        .cloned()
        .collect();
    for n in drop {
        headers.remove(n);
    }
}

/// Whether `v` is a request id worth keeping.
fn valid_request_id(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_REQUEST_ID
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// A fresh request id: 32 hex digits, a per-process random prefix and a counter mixed by
/// SplitMix64 (unique within the process, unpredictable enough to tell processes apart).
pub fn new_request_id() -> HeaderValue {
    static SEED: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 32];
    for (i, b) in text.iter_mut().enumerate() {
        let word = if i < 16 { seed } else { z };
        *b = HEX[((word >> (60 - 4 * (i % 16))) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static("0"))
}

/// The client's request id if valid, else a new one.
pub fn request_id(client: &HeaderMap) -> HeaderValue {
    match client.get(&X_REQUEST_ID) {
        Some(v) if valid_request_id(v) => v.clone(),
        _ => new_request_id(),
    }
}

/// Writes the header lines to send upstream for a client request with headers `client`
/// from `peer`, with request id `id`, to `out` (`name: value` and CRLF each; `Host` is
/// written by the upstream pool). The client's own cache hint headers stay behind: only
/// the balancer hints ([`crate::hooks::hint`]).
pub fn write_upstream_headers(
    out: &mut Vec<u8>,
    client: &HeaderMap,
    peer: IpAddr,
    id: &HeaderValue,
) {
    let has_connection = client.contains_key(header::CONNECTION);
    let line = |out: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    };
    for (name, value) in client {
        if is_hop_by_hop(name)
            || name == header::HOST
            || name == header::CONTENT_LENGTH
            || name == header::EXPECT
            || name == X_REQUEST_ID
            || name == X_FORWARDED_FOR
            || name == data::query::NO_CACHE_HEADER
            || name == data::query::NO_CACHE_WITHIN_HEADER
            || (has_connection && connection_lists(client, name.as_str()))
        {
            continue;
        }
        line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    for v in client.get_all(&X_FORWARDED_FOR) {
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b", ");
    }
    {
        use std::io::Write;
        let _ = write!(out, "{peer}\r\n");
    }
    line(out, X_REQUEST_ID.as_str().as_bytes(), id.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        m
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let client = map(&[
            ("host", "lb"),
            ("accept", "application/json"),
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "s"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic x"),
            ("te", "trailers"),
            ("trailer", "x"),
            ("upgrade", "h2c"),
            ("content-length", "0"),
            ("x-custom", "1"),
            ("x-custom", "2"),
            ("x-forwarded-for", "10.0.0.1"),
            ("x-ballot-no-cache", "the"),
            ("x-ballot-no-cache-within", "1"),
        ]);
        let id = HeaderValue::from_static("abc");
        let mut block = Vec::new();
        write_upstream_headers(&mut block, &client, "127.0.0.2".parse().unwrap(), &id);
        let text = String::from_utf8(block).unwrap();
        let lines: Vec<&str> = text.split_terminator("\r\n").collect();
        assert_eq!(
            lines,
            [
                "accept: application/json",
                "x-custom: 1",
                "x-custom: 2",
                "x-forwarded-for: 10.0.0.1, 127.0.0.2",
                "x-request-id: abc",
            ]
        );
        assert!(text.ends_with("\r\n"));
    }

    #[test]
    fn request_ids_are_kept_when_plausible_and_fresh_otherwise() {
        let keep = map(&[("x-request-id", "req-42.a_b:c")]);
        assert_eq!(request_id(&keep), "req-42.a_b:c");
        let long = "a".repeat(MAX_REQUEST_ID + 1);
        for bad in ["", "has space", "quote\"", long.as_str()] {
            let m = map(&[("x-request-id", bad)]);
            let id = request_id(&m);
            assert_ne!(id.as_bytes(), bad.as_bytes());
            assert_eq!(id.len(), 32, "{id:?}");
        }
        assert_ne!(new_request_id(), new_request_id());
    }

    #[test]
    fn response_headers_lose_hop_by_hop_ones() {
        let mut h = map(&[
            ("content-type", "application/json"),
            ("connection", "x-internal"),
            ("x-internal", "1"),
            ("transfer-encoding", "chunked"),
            ("keep-alive", "timeout=5"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type"]);
    }
}
