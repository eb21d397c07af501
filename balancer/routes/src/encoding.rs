//! Request bodies sent with a `Content-Encoding` (RFC 9110 §8.4), decoded so the balancer
//! can read their query: `gzip` (RFC 1952, `x-gzip` its alias, §8.4.1.3) and `deflate`
//! (the zlib format of RFC 1950 around an RFC 1951 stream, §8.4.1.2). Clients such as
//! elasticsearch-py with `http_compress=True` gzip every request body.
//!
//! Decoding is capped: a body expands to at most `limit` bytes, and the decoder is stopped
//! as soon as it has produced one byte more, so a small "gzip bomb" costs `limit` bytes of
//! memory and the CPU to inflate them, never its full expansion.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read};

use flate2::bufread::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};

/// Most codings a `Content-Encoding` may list (a body compressed twice is already odd).
pub const MAX_CODINGS: usize = 2;

/// Decoded bytes first asked of the decoder; the buffer then doubles up to the cap.
const FIRST_CHUNK: usize = 8 << 10;

/// A content coding the balancer can undo to read a request's query (RFC 9110 §8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// No transformation (RFC 9110 §8.4.1); undoing it is a no-op.
    Identity,
    /// The gzip file format, RFC 1952 (also spelled `x-gzip`).
    Gzip,
    /// The zlib format, RFC 1950 (a raw RFC 1951 stream is accepted as well).
    Deflate,
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A coding the balancer cannot undo (named as sent), or too many codings.
    Unsupported(String),
    /// The decoded body would be larger than this many bytes.
    TooLarge(usize),
    /// The body is not a valid stream of its coding (the decoder's message).
    Corrupt(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Unsupported(coding) => {
                write!(f, "unsupported content coding: {coding}")
            }
            DecodeError::TooLarge(limit) => {
                write!(f, "the decoded body is larger than {limit} bytes")
            }
            DecodeError::Corrupt(msg) => write!(f, "the body does not decode: {msg}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The codings of a `Content-Encoding` value, in the order applied (at most 2; `x-gzip` is gzip; `identity` and empty are skipped; anything else, e.g. `br`, `zstd`, is Unsupported naming it).
///
/// The value is a comma-separated list (RFC 9110 §5.6.1: optional whitespace around
/// commas, empty elements allowed); coding names are case-insensitive (§8.4.1).
pub fn parse(value: &[u8]) -> Result<Vec<Coding>, DecodeError> {
    let mut codings = Vec::new();
    for name in value.split(|&b| b == b',') {
        let Some(coding) = coding(name.trim_ascii())? else {
            continue;
        };
        if codings.len() == MAX_CODINGS {
            return Err(DecodeError::Unsupported(format!(
                "more than {MAX_CODINGS} codings in {:?}",
                String::from_utf8_lossy(value)
            )));
        }
        codings.push(coding);
    }
    Ok(codings)
}

/// The coding `name` stands for; `None` for one that changes nothing.
fn coding(name: &[u8]) -> Result<Option<Coding>, DecodeError> {
    if name.is_empty() || name.eq_ignore_ascii_case(b"identity") {
        Ok(None)
    } else if name.eq_ignore_ascii_case(b"gzip") || name.eq_ignore_ascii_case(b"x-gzip") {
        Ok(Some(Coding::Gzip))
    } else if name.eq_ignore_ascii_case(b"deflate") {
        Ok(Some(Coding::Deflate))
    } else {
        let name = String::from_utf8_lossy(name).into_owned();
        Err(DecodeError::Unsupported(name))
    }
}

/// `body` with `codings` undone (last applied first), at most `limit` decoded bytes: past it TooLarge(limit) *as soon as* the decoder has produced limit+1 bytes — never decode further.
///
/// Every stage is capped, so a body compressed twice cannot expand its inner layer
/// unbounded. `Deflate` is tried as zlib (RFC 1950) first, then as a raw RFC 1951 stream,
/// which some clients send. A gzip body of several members (RFC 1952 §2.2) decodes to all
/// of them. An empty body decodes to an empty body whatever its coding: a request with no
/// content carries nothing to decode, whatever its headers say.
pub fn decode(body: &[u8], codings: &[Coding], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut current = Cow::Borrowed(body);
    for &coding in codings.iter().rev() {
        if coding == Coding::Identity || current.is_empty() {
            continue;
        }
        current = Cow::Owned(undo(&current, coding, limit)?);
    }
    if current.len() > limit {
        return Err(DecodeError::TooLarge(limit));
    }
    Ok(current.into_owned())
}

/// `input` with `coding` undone, at most `limit` bytes of it.
fn undo(input: &[u8], coding: Coding, limit: usize) -> Result<Vec<u8>, DecodeError> {
    match coding {
        Coding::Identity => Ok(input.to_vec()),
        Coding::Gzip => capped(MultiGzDecoder::new(input), limit, "gzip"),
        Coding::Deflate => inflate(input, limit),
    }
}

/// A `deflate` body: the zlib format RFC 9110 names, else the raw RFC 1951 stream some
/// clients send. A stream too large as zlib is too large, not retried.
fn inflate(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let zlib = match capped(ZlibDecoder::new(input), limit, "zlib (RFC 1950)") {
        Err(DecodeError::Corrupt(msg)) => msg,
        done => return done,
    };
    match capped(DeflateDecoder::new(input), limit, "raw deflate (RFC 1951)") {
        Err(DecodeError::Corrupt(raw)) => Err(DecodeError::Corrupt(format!("{zlib}; {raw}"))),
        done => done,
    }
}

/// Everything `reader` decodes, or `TooLarge(limit)` once it has given `limit + 1` bytes.
fn capped(reader: impl Read, limit: usize, what: &str) -> Result<Vec<u8>, DecodeError> {
    let out = read_at_most(reader, limit.saturating_add(1))
        .map_err(|e| DecodeError::Corrupt(format!("{what}: {e}")))?;
    if out.len() > limit {
        return Err(DecodeError::TooLarge(limit));
    }
    Ok(out)
}

/// At most `cap` bytes of `reader`: reading goes through `Read::take(cap)`, so the decoder
/// behind it is never asked for byte `cap + 1`, and the buffer never holds more than
/// `cap` bytes (it doubles from [`FIRST_CHUNK`], so it is also at most twice what was read).
fn read_at_most(reader: impl Read, cap: usize) -> io::Result<Vec<u8>> {
    let mut reader = reader.take(u64::try_from(cap).unwrap_or(u64::MAX));
    let mut out = Vec::new();
    let mut filled = 0;
    loop {
        if filled == out.len() {
            let grow = out
                .len()
                .max(FIRST_CHUNK)
                .min(cap.saturating_sub(out.len()));
            if grow == 0 {
                break;
            }
            // Exactly `grow` more: plain `resize` could round the allocation past `cap`.
            out.reserve_exact(grow);
            out.resize(out.len() + grow, 0);
        }
        let Some(spare) = out.get_mut(filled..) else {
            break;
        };
        match reader.read(spare) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(filled);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use std::io::Write;
    use std::time::{Duration, Instant};

    /// A search body as elasticsearch-py sends it.
    const BODY: &[u8] =
        br#"{"query":{"match":{"title":"rust borrow checker"}},"size":10,"from":0}"#;
    const LIMIT: usize = 1 << 20;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).expect("in memory");
        encoder.finish().expect("in memory")
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).expect("in memory");
        encoder.finish().expect("in memory")
    }

    fn raw_deflate(data: &[u8]) -> Vec<u8> {
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(data).expect("in memory");
        encoder.finish().expect("in memory")
    }

    #[test]
    fn parse_content_encoding_values() {
        assert_eq!(parse(b"gzip"), Ok(vec![Coding::Gzip]));
        assert_eq!(parse(b"X-GZIP"), Ok(vec![Coding::Gzip]));
        assert_eq!(parse(b"deflate"), Ok(vec![Coding::Deflate]));
        assert_eq!(parse(b""), Ok(vec![]));
        assert_eq!(parse(b"identity"), Ok(vec![]));
        assert_eq!(
            parse(b"deflate , ,identity, Gzip"),
            Ok(vec![Coding::Deflate, Coding::Gzip])
        );
        assert_eq!(parse(b"br"), Err(DecodeError::Unsupported("br".to_owned())));
        assert_eq!(
            parse(b"gzip, zstd"),
            Err(DecodeError::Unsupported("zstd".to_owned()))
        );
        assert!(matches!(
            parse(b"gzip, gzip, gzip"),
            Err(DecodeError::Unsupported(_))
        ));
    }

    #[test]
    fn gzip_round_trip() {
        let codings = parse(b"gzip").expect("supported");
        assert_eq!(decode(&gzip(BODY), &codings, LIMIT), Ok(BODY.to_vec()));
    }

    #[test]
    fn deflate_round_trip_zlib_and_raw() {
        let codings = parse(b"deflate").expect("supported");
        assert_eq!(decode(&zlib(BODY), &codings, LIMIT), Ok(BODY.to_vec()));
        assert_eq!(
            decode(&raw_deflate(BODY), &codings, LIMIT),
            Ok(BODY.to_vec())
        );
    }

    #[test]
    fn identity_and_two_codings() {
        assert_eq!(decode(BODY, &[], LIMIT), Ok(BODY.to_vec()));
        assert_eq!(decode(BODY, &[Coding::Identity], LIMIT), Ok(BODY.to_vec()));
        // "deflate, gzip": deflated first, then gzipped; undone gzip first.
        let twice = gzip(&zlib(BODY));
        let codings = parse(b"deflate, gzip").expect("supported");
        assert_eq!(decode(&twice, &codings, LIMIT), Ok(BODY.to_vec()));
    }

    #[test]
    fn multi_member_gzip_decodes_every_member() {
        let mut body = gzip(br#"{"query":{"match":"#);
        body.extend_from_slice(&gzip(br#"{"title":"dune"}}}"#));
        assert_eq!(
            decode(&body, &[Coding::Gzip], LIMIT),
            Ok(br#"{"query":{"match":{"title":"dune"}}}"#.to_vec())
        );
    }

    #[test]
    fn truncated_or_damaged_streams_are_corrupt() {
        let body = gzip(BODY);
        let truncated = body.get(..body.len() - 4).expect("longer than 4");
        assert!(matches!(
            decode(truncated, &[Coding::Gzip], LIMIT),
            Err(DecodeError::Corrupt(_))
        ));
        let mut damaged = zlib(BODY);
        if let Some(last) = damaged.last_mut() {
            *last ^= 1; // the Adler-32 trailer no longer matches
        }
        assert!(matches!(
            decode(&damaged, &[Coding::Deflate], LIMIT),
            Err(DecodeError::Corrupt(_))
        ));
        assert!(matches!(
            decode(BODY, &[Coding::Gzip], LIMIT),
            Err(DecodeError::Corrupt(_))
        ));
    }

    #[test]
    fn empty_body_is_empty_whatever_the_coding() {
        assert_eq!(decode(b"", &[Coding::Gzip], LIMIT), Ok(Vec::new()));
        assert_eq!(
            decode(b"", &[Coding::Deflate, Coding::Gzip], LIMIT),
            Ok(Vec::new())
        );
    }

    #[test]
    fn the_limit_is_inclusive() {
        let exact = decode(&gzip(BODY), &[Coding::Gzip], BODY.len());
        assert_eq!(exact, Ok(BODY.to_vec()));
        let short = decode(&gzip(BODY), &[Coding::Gzip], BODY.len() - 1);
        assert_eq!(short, Err(DecodeError::TooLarge(BODY.len() - 1)));
        assert_eq!(decode(BODY, &[], 8), Err(DecodeError::TooLarge(8)));
    }

    #[test]
    fn bomb_stops_at_the_limit() {
        // 64 MiB of zeros gzip to about 64 KiB; decoding with a 64 KiB limit must stop
        // after 64 KiB + 1 bytes of output, not inflate all 64 MiB.
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            encoder.write_all(&zeros).expect("in memory");
        }
        let bomb = encoder.finish().expect("in memory");
        assert!(bomb.len() < 1 << 20, "the bomb is {} bytes", bomb.len());

        let start = Instant::now();
        let result = decode(&bomb, &[Coding::Gzip], 65536);
        assert_eq!(result, Err(DecodeError::TooLarge(65536)));
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn reading_never_asks_for_more_than_the_cap() {
        // An endless reader: without the take() this would never return.
        let out = read_at_most(io::repeat(7), 65537).expect("in memory");
        assert_eq!(out.len(), 65537);
        assert!(out.capacity() <= 65537, "capacity {}", out.capacity());
        assert_eq!(
            capped(io::repeat(7), 65536, "endless"),
            Err(DecodeError::TooLarge(65536))
        );
    }
}
