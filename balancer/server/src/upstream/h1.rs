//! HTTP/1.1 on an upstream connection, client side (RFC 9112): the response head the
//! balancer reads (parsed by `httparse`, the parser inside hyper), how the response body is
//! delimited (§6.3), and the chunked decoder (§7.1). Requests are written by
//! [`Pool`](super::Pool).
//!
//! Why written here instead of hyper's client: hyper drives each client connection from a
//! task of its own, so every proxied request crossed tasks twice (hyper's dispatch channel
//! to the connection's task, a oneshot back), and the balancer spent a third more CPU per
//! request than HAProxy against static backends; here the exchange runs in the request's
//! own task (docs/results.md, "The proxy alone", has the CPU per request of both).
//! Only what a proxy of searches needs is here: `GET` and `POST` requests with a body of
//! known length (written by [`Pool`](super::Pool)), no upgrades (a 101 answer is an
//! error), no pipelining; interim 1xx answers are skipped.

use std::mem::MaybeUninit;
use std::ops::Range;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use hyper::body::Bytes;

/// Largest response head read, interim 1xx answers included.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most header fields in a response head.
pub const MAX_HEADERS: usize = 128;
/// Longest chunk-size line (size and extensions).
const MAX_CHUNK_LINE: usize = 4096;
/// Most bytes of trailer fields after a chunked body (read and dropped).
const MAX_TRAILERS: usize = 64 * 1024;

/// How a response body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the replica closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug)]
pub struct Head {
    /// The final status (interim 1xx answers skipped).
    pub status: StatusCode,
    /// The header fields, in order (`Content-Length` dropped when chunked).
    pub headers: HeaderMap,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the connection may carry another request once the body is read.
    pub keep_alive: bool,
    /// Bytes of the input the head took, interim answers included.
    pub len: usize,
    /// The input's bytes after the head (the start of the body), in the same allocation
    /// as the header values.
    pub rest: Bytes,
}

/// A response that breaks HTTP/1.1 (the request fails with 502).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    /// The head did not end within [`MAX_HEAD`] bytes.
    #[error("response head longer than {MAX_HEAD} bytes")]
    HeadTooLarge,
    /// The head does not parse.
    #[error("invalid response head: {0}")]
    InvalidHead(String),
    /// `Content-Length` is not one decimal number.
    #[error("invalid Content-Length in the response")]
    BadLength,
    /// A transfer coding other than `chunked`.
    #[error("unsupported Transfer-Encoding {0:?} in the response (only chunked)")]
    BadTransferEncoding(String),
    /// A chunked body that does not follow the grammar.
    #[error("invalid chunked response body: {0}")]
    BadChunk(&'static str),
    /// 101 Switching Protocols: no upgrade was asked for.
    #[error("unexpected 101 Switching Protocols")]
    Upgrade,
}

/// Makes the length headers say what `framing` found: a chunked body's `Content-Length`
/// goes, a repeated length (`3, 3`) goes on as the one value it stands for (RFC 9110
/// §8.6). Returns false when the connection must close afterwards (chunked in HTTP/1.0 is
/// faulty framing, §6.1).
fn normalize_length(headers: &mut HeaderMap, framing: Framing, http11: bool) -> bool {
    match framing {
        Framing::Chunked => {
            headers.remove(header::CONTENT_LENGTH);
            http11
        }
        Framing::Length(n) => {
            let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
            let first = lengths.next();
            if lengths.next().is_some() || first.is_some_and(|v| v.as_bytes().contains(&b',')) {
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            }
            true
        }
        _ => true,
    }
}

/// Parses the response head at the start of `buf`: `Ok(None)` while it is incomplete.
/// Interim 1xx answers (other than 101) are skipped.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, ProtocolError> {
    let mut at = 0;
    loop {
        // Uninitialized slots: the parser writes the ones it fills (no 4 KiB memset).
        let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            &buf[at..],
            &mut slots,
        );
        let n = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(ProtocolError::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ProtocolError::InvalidHead(format!(
                    "more than {MAX_HEADERS} header fields"
                )))
            }
            Err(e) => return Err(ProtocolError::InvalidHead(e.to_string())),
        };
        if at + n > MAX_HEAD {
            return Err(ProtocolError::HeadTooLarge);
        }
        let code = resp.code.unwrap_or(0);
        let status = StatusCode::from_u16(code)
            .map_err(|_| ProtocolError::InvalidHead(format!("status {code}")))?;
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(ProtocolError::Upgrade);
        }
        if status.is_informational() {
            at += n;
            continue;
        }
        let http11 = resp.version == Some(1);
        // The values, and the body bytes read with the head, share one copy of the input
        // instead of one allocation each.
        let start = at;
        let shared = Bytes::copy_from_slice(&buf[start..]);
        let offset = |s: &[u8]| s.as_ptr() as usize - buf.as_ptr() as usize - start;
        // Room for the headers the proxy adds (x-ballot-*, x-request-id).
        let mut headers = HeaderMap::with_capacity(resp.headers.len() + 4);
        for h in resp.headers.iter() {
            let name = HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| ProtocolError::InvalidHead(format!("header name {:?}", h.name)))?;
            let from = offset(h.value);
            let value = HeaderValue::from_maybe_shared(shared.slice(from..from + h.value.len()))
                .map_err(|_| ProtocolError::InvalidHead(format!("value of {}", h.name)))?;
            headers.append(name, value);
        }
        let (framing, mut keep_alive) = framing(status, &headers)?;
        keep_alive &= normalize_length(&mut headers, framing, http11);
        keep_alive &= connection_persists(http11, &headers);
        return Ok(Some(Head {
            status,
            headers,
            framing,
            keep_alive,
            len: at + n,
            rest: shared.slice(n..),
        }));
    }
}

/// The body's framing (RFC 9112 §6.3) and whether it leaves the connection reusable.
fn framing(status: StatusCode, headers: &HeaderMap) -> Result<(Framing, bool), ProtocolError> {
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok((Framing::Empty, true));
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        let codings: Vec<&str> = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("?").split(','))
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if codings.len() != 1 || !codings[0].eq_ignore_ascii_case("chunked") {
            return Err(ProtocolError::BadTransferEncoding(codings.join(", ")));
        }
        // Both Transfer-Encoding and Content-Length: chunked wins, and the connection is
        // not trusted with another request (§6.3, item 3).
        let both = headers.contains_key(header::CONTENT_LENGTH);
        return Ok((Framing::Chunked, !both));
    }
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        let text = v.to_str().map_err(|_| ProtocolError::BadLength)?;
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ProtocolError::BadLength);
            }
            let n: u64 = part.parse().map_err(|_| ProtocolError::BadLength)?;
            if length.is_some_and(|l| l != n) {
                return Err(ProtocolError::BadLength);
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(n) => (Framing::Length(n), true),
        None => (Framing::UntilClose, false),
    })
}

/// Whether the connection stays open after this response: HTTP/1.1 unless
/// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
fn connection_persists(http11: bool, headers: &HeaderMap) -> bool {
    let has = |token| crate::forward::connection_lists(headers, token);
    if http11 {
        !has("close")
    } else {
        has("keep-alive") && !has("close")
    }
}

/// Where a chunked body's decoder stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// Reading (and dropping) trailer fields up to the empty line.
    Trailers,
    /// The body is complete.
    Done,
}

/// A chunked body's decoder, fed the bytes as they arrive.
#[derive(Debug)]
pub struct Chunked {
    state: ChunkState,
    trailer_bytes: usize,
}

/// What one [`Chunked::step`] did with its input.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// Bytes of the input used (the data range included).
    pub consumed: usize,
    /// Body data within the input.
    pub data: Option<Range<usize>>,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked {
            state: ChunkState::Size,
            trailer_bytes: 0,
        }
    }
}

impl Chunked {
    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes what it can from the start of `input`. Nothing consumed and no data (while
    /// not done) means more input is needed.
    pub fn step(&mut self, input: &[u8]) -> Result<Step, ProtocolError> {
        let none = |consumed| {
            Ok(Step {
                consumed,
                data: None,
            })
        };
        match self.state {
            ChunkState::Done => none(0),
            ChunkState::Size => {
                let Some(line) = line(input, MAX_CHUNK_LINE, "chunk-size line too long")? else {
                    return none(0);
                };
                let size = chunk_size(&input[..line])?;
                self.state = if size == 0 {
                    ChunkState::Trailers
                } else {
                    ChunkState::Data(size)
                };
                none(line + 2)
            }
            ChunkState::Data(left) => {
                if input.is_empty() {
                    return none(0);
                }
                let take = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                let left = left - take as u64;
                self.state = if left == 0 {
                    ChunkState::DataEnd
                } else {
                    ChunkState::Data(left)
                };
                Ok(Step {
                    consumed: take,
                    data: Some(0..take),
                })
            }
            ChunkState::DataEnd => match input {
                [] | [b'\r'] => none(0),
                [b'\r', b'\n', ..] => {
                    self.state = ChunkState::Size;
                    none(2)
                }
                _ => Err(ProtocolError::BadChunk("chunk data not followed by CRLF")),
            },
            ChunkState::Trailers => {
                let room = MAX_TRAILERS.saturating_sub(self.trailer_bytes);
                let Some(line) = line(input, room, "trailer fields too long")? else {
                    return none(0);
                };
                if line == 0 {
                    self.state = ChunkState::Done;
                } else {
                    self.trailer_bytes += line + 2;
                }
                none(line + 2)
            }
        }
    }
}

/// The length of the CRLF-terminated line at the start of `input` (CRLF excluded), `None`
/// while incomplete; longer than `max` is an error.
fn line(input: &[u8], max: usize, too_long: &'static str) -> Result<Option<usize>, ProtocolError> {
    let window = &input[..input.len().min(max + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(n) => Ok(Some(n)),
        None if input.len() >= max + 2 => Err(ProtocolError::BadChunk(too_long)),
        None => Ok(None),
    }
}

/// The size on a chunk-size line: hex digits, then optional whitespace and extensions.
fn chunk_size(line: &[u8]) -> Result<u64, ProtocolError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return Err(ProtocolError::BadChunk("bad chunk size"));
    }
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count()..];
    if !(rest.is_empty() || rest[0] == b';') {
        return Err(ProtocolError::BadChunk("bad chunk size"));
    }
    let text = std::str::from_utf8(&line[..digits])
        .map_err(|_| ProtocolError::BadChunk("bad chunk size"))?;
    u64::from_str_radix(text, 16).map_err(|_| ProtocolError::BadChunk("bad chunk size"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes())
            .expect("valid")
            .expect("complete")
    }

    #[test]
    fn a_content_length_response_keeps_its_headers_in_order() {
        let text = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nX-Ballot-Miss-Bytes: 42\r\ncontent-length: 7\r\n\r\n{\"a\":1}";
        let h = head(text);
        assert_eq!(h.status, StatusCode::OK);
        assert_eq!(h.framing, Framing::Length(7));
        assert!(h.keep_alive);
        assert_eq!(h.len, text.len() - 7);
        assert_eq!(&h.rest[..], b"{\"a\":1}");
        let names: Vec<&str> = h.headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(
            names,
            ["content-type", "x-ballot-miss-bytes", "content-length"]
        );
        assert_eq!(h.headers["x-ballot-miss-bytes"], "42");
    }

    #[test]
    fn an_incomplete_head_asks_for_more_and_a_huge_one_is_refused() {
        let text = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        for cut in 0..text.len() - 2 {
            assert!(
                parse_head(&text.as_bytes()[..cut]).unwrap().is_none(),
                "{cut}"
            );
        }
        let mut big = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
        big.resize(MAX_HEAD + 1, b'a');
        assert_eq!(parse_head(&big).unwrap_err(), ProtocolError::HeadTooLarge);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("h{i}: v\r\n")).collect();
        let err = parse_head(format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes()).unwrap_err();
        assert!(matches!(err, ProtocolError::InvalidHead(_)), "{err}");
    }

    #[test]
    fn framing_follows_rfc_9112() {
        assert_eq!(
            head("HTTP/1.1 204 No Content\r\n\r\n").framing,
            Framing::Empty
        );
        assert_eq!(
            head("HTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n").framing,
            Framing::Empty
        );
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, true));
        // Both: chunked wins, Content-Length goes, and the connection is not reused.
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: Chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
        assert!(!h.headers.contains_key("content-length"));
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 3, 3\r\ncontent-length: 3\r\n\r\n");
        assert_eq!(h.framing, Framing::Length(3));
        let lengths: Vec<_> = h.headers.get_all("content-length").iter().collect();
        assert_eq!(lengths, ["3"], "one value goes on");
        let h =
            head("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
        for bad in ["3, 4", "-1", "+3", "", "0x10", "99999999999999999999999"] {
            let text = format!("HTTP/1.1 200 OK\r\ncontent-length: {bad}\r\n\r\n");
            assert_eq!(
                parse_head(text.as_bytes()).unwrap_err(),
                ProtocolError::BadLength,
                "{bad}"
            );
        }
        for bad in ["gzip", "gzip, chunked", "chunked, chunked"] {
            let text = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: {bad}\r\n\r\n");
            assert!(
                matches!(
                    parse_head(text.as_bytes()).unwrap_err(),
                    ProtocolError::BadTransferEncoding(_)
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn connection_reuse_follows_the_version_and_the_connection_header() {
        let ka = |t: &str| head(t).keep_alive;
        assert!(ka("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(!ka(
            "HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(!ka("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(ka(
            "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn interim_answers_are_skipped_and_an_upgrade_is_refused() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let h = head(text);
        assert_eq!((h.status, h.len), (StatusCode::OK, text.len()));
        assert!(parse_head(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2")
            .unwrap()
            .is_none());
        assert_eq!(
            parse_head(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").unwrap_err(),
            ProtocolError::Upgrade
        );
        assert!(matches!(
            parse_head(b"HTTP/1.1 2xx OK\r\n\r\n"),
            Err(ProtocolError::InvalidHead(_))
        ));
    }

    /// Decodes `input` fed `piece` bytes at a time, as a connection would deliver it.
    fn decode(input: &[u8], piece: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
        let mut dec = Chunked::default();
        let mut out = Vec::new();
        let (mut at, mut fed) = (0, 0);
        while !dec.is_done() {
            let s = dec.step(&input[at..fed])?;
            if let Some(r) = &s.data {
                out.extend_from_slice(&input[at + r.start..at + r.end]);
            }
            at += s.consumed;
            if s.consumed == 0 && s.data.is_none() {
                if fed == input.len() {
                    break;
                }
                fed = (fed + piece).min(input.len());
            }
        }
        assert!(dec.is_done(), "incomplete body after {at} bytes");
        Ok((out, at))
    }

    #[test]
    fn chunked_bodies_decode_however_the_bytes_arrive() {
        let body = b"5\r\nhello\r\n1;ext=1\r\n \r\nB \t; name=\"v\"\r\nworld, long\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        for piece in [1, 2, 3, 7, body.len()] {
            let (data, used) = decode(body, piece).unwrap();
            assert_eq!(data, b"hello world, long", "piece {piece}");
            assert_eq!(used, body.len() - 4, "the next response's bytes stay");
        }
    }

    #[test]
    fn malformed_chunked_bodies_are_errors() {
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloXX0\r\n\r\n",
            b"11111111111111111\r\n",
            b"5 5\r\nhello\r\n0\r\n\r\n",
        ] {
            assert!(
                matches!(decode(bad, 1), Err(ProtocolError::BadChunk(_))),
                "{bad:?}"
            );
        }
        let long = vec![b'1'; MAX_CHUNK_LINE + 10];
        assert!(decode(&long, 64).is_err());
        let mut trailers = b"0\r\n".to_vec();
        while trailers.len() < MAX_TRAILERS + 100 {
            trailers.extend_from_slice(b"x-t: 0123456789\r\n");
        }
        trailers.extend_from_slice(b"\r\n");
        assert!(matches!(
            decode(&trailers, 4096),
            Err(ProtocolError::BadChunk(_))
        ));
    }
}
