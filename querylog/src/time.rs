//! Calendar time of query logs, on the [`jiff`] crate (no time-zone database, UTC only):
//! parsing a log's time column to unix milliseconds, and formatting milliseconds back.
//!
//! A log says when a query was issued in one of a few ways, each a [`TimeFormat`]:
//!
//! - [`TimeFormat::Iso`] (the default): ISO 8601 / RFC 3339 as logs write it,
//!   `YYYY-MM-DD HH:MM:SS` (AOL), `YYYY-MM-DDTHH:MM:SS`, optional fraction, optional `Z` or
//!   `±hh:mm` offset, or a bare date `YYYY-MM-DD`; without an offset the time is UTC;
//! - [`TimeFormat::EpochS`] / [`TimeFormat::EpochMs`]: seconds or milliseconds since
//!   1970-01-01 UTC;
//! - [`TimeFormat::Strftime`]: a strftime-style pattern (`%y%m%d%H%M%S` for the Excite log),
//!   parsed by jiff's `strptime`; UTC unless the pattern has `%z`/`%:z` or `%s`.
//!
//! Every parsed instant lies in jiff's range (years -9999 to 9999), so it can always be
//! formatted back.

use std::fmt;
use std::str::FromStr;

use jiff::fmt::strtime;
use jiff::fmt::temporal::Pieces;
use jiff::tz::Offset;
use jiff::Timestamp;

/// How a log writes its times.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimeFormat {
    /// `YYYY-MM-DD[ T]HH:MM:SS[.fff][Z|±hh:mm]` or `YYYY-MM-DD`; UTC without an offset.
    Iso,
    /// Seconds since 1970-01-01 UTC, optionally with a decimal fraction.
    EpochS,
    /// Milliseconds since 1970-01-01 UTC.
    EpochMs,
    /// A strftime-style pattern, e.g. `%y%m%d%H%M%S`.
    Strftime(String),
}

/// The instant every example in a message is shown at: 2006-03-01 07:17:12 UTC.
pub const EXAMPLE_MS: i64 = 1_141_197_432_000;

impl TimeFormat {
    /// The Excite 1997 log's `YYMMDDhhmmss`.
    pub fn excite() -> TimeFormat {
        TimeFormat::Strftime("%y%m%d%H%M%S".to_owned())
    }

    /// Parses one time field (surrounding whitespace ignored) to unix milliseconds, or
    /// `None` if it is not a time in this format.
    pub fn parse_ms(&self, s: &str) -> Option<i64> {
        let s = s.trim();
        match self {
            TimeFormat::Iso => parse_iso(s),
            TimeFormat::EpochS => parse_epoch_s(s),
            TimeFormat::EpochMs => {
                let ms = parse_int(s)?;
                Timestamp::from_millisecond(ms).ok().map(|_| ms)
            }
            TimeFormat::Strftime(pattern) => parse_strftime(pattern, s),
        }
    }

    /// What a field in this format looks like, for error messages: `YYYY-MM-DD HH:MM:SS`,
    /// `seconds since 1970 (epoch-s)`, `%y%m%d%H%M%S (e.g. 060301071712)`.
    pub fn expected(&self) -> String {
        match self {
            TimeFormat::Iso => "YYYY-MM-DD HH:MM:SS".to_owned(),
            TimeFormat::EpochS => "seconds since 1970 (epoch-s)".to_owned(),
            TimeFormat::EpochMs => "milliseconds since 1970 (epoch-ms)".to_owned(),
            TimeFormat::Strftime(p) => match self.example() {
                Some(e) => format!("{p} (e.g. {e})"),
                None => p.clone(),
            },
        }
    }

    /// [`EXAMPLE_MS`] written in this format (None if the pattern cannot write it).
    pub fn example(&self) -> Option<String> {
        match self {
            TimeFormat::Iso => Some(format_timestamp(EXAMPLE_MS)),
            TimeFormat::EpochS => Some((EXAMPLE_MS / 1000).to_string()),
            TimeFormat::EpochMs => Some(EXAMPLE_MS.to_string()),
            TimeFormat::Strftime(p) => {
                let ts = Timestamp::from_millisecond(EXAMPLE_MS).ok()?;
                strtime::format(p.as_bytes(), ts).ok()
            }
        }
    }
}

impl fmt::Display for TimeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeFormat::Iso => f.write_str("iso"),
            TimeFormat::EpochS => f.write_str("epoch-s"),
            TimeFormat::EpochMs => f.write_str("epoch-ms"),
            TimeFormat::Strftime(p) => f.write_str(p),
        }
    }
}

/// A `--time-format` that is not a usable time format.
#[derive(Debug, thiserror::Error)]
#[error(
    "time format {format:?}: {reason} (expected iso, epoch-s, epoch-ms or a strftime pattern \
     such as %Y-%m-%d %H:%M:%S or %y%m%d%H%M%S)"
)]
pub struct BadTimeFormat {
    /// The format given.
    pub format: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for TimeFormat {
    type Err = BadTimeFormat;

    /// `iso`, `epoch-s` (also `epoch`, `unix`), `epoch-ms`, or a strftime pattern (anything
    /// with a `%`), which must be able to write and read back a full date and time.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| BadTimeFormat {
            format: s.to_owned(),
            reason: reason.to_owned(),
        };
        match s.trim() {
            "iso" | "ISO" => Ok(TimeFormat::Iso),
            "epoch-s" | "epoch" | "unix" | "epoch-seconds" => Ok(TimeFormat::EpochS),
            "epoch-ms" | "epoch-milliseconds" | "unix-ms" => Ok(TimeFormat::EpochMs),
            p if p.contains('%') => {
                let f = TimeFormat::Strftime(p.to_owned());
                let example = f
                    .example()
                    .ok_or_else(|| bad("the pattern cannot be written (unknown directive?)"))?;
                if f.parse_ms(&example).is_none() {
                    return Err(bad(&format!(
                        "{example:?} written with it does not read back as a date and time \
                         (it needs a year, month, day and time, or %s)"
                    )));
                }
                Ok(f)
            }
            _ => Err(bad("not a known format")),
        }
    }
}

fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_epoch_s(s: &str) -> Option<i64> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = parse_int(int)?;
    let mut ms = 0i64;
    for (i, b) in frac.bytes().take(3).enumerate() {
        ms += i64::from(b - b'0') * [100, 10, 1][i];
    }
    let ms = if secs < 0 || int.starts_with('-') {
        secs.checked_mul(1000)?.checked_sub(ms)?
    } else {
        secs.checked_mul(1000)?.checked_add(ms)?
    };
    Timestamp::from_millisecond(ms).ok().map(|_| ms)
}

fn parse_iso(s: &str) -> Option<i64> {
    let pieces = Pieces::parse(s).ok()?;
    if pieces.time_zone_annotation().is_some() {
        // `[America/New_York]` needs a time-zone database; this crate has none.
        return None;
    }
    let date = pieces.date();
    let time = pieces.time().unwrap_or_default();
    let offset = pieces.to_numeric_offset().unwrap_or(Offset::UTC);
    let ts = offset.to_timestamp(date.to_datetime(time)).ok()?;
    Some(ts.as_millisecond())
}

fn parse_strftime(pattern: &str, s: &str) -> Option<i64> {
    let tm = strtime::parse(pattern.as_bytes(), s.as_bytes()).ok()?;
    let ts = if tm.timestamp().is_some() || tm.offset().is_some() {
        tm.to_timestamp().ok()?
    } else {
        Offset::UTC.to_timestamp(tm.to_datetime().ok()?).ok()?
    };
    Some(ts.as_millisecond())
}

/// Parses an ISO time (see [`TimeFormat::Iso`]) to unix milliseconds, or `None` if it is
/// not a valid time.
pub fn parse_datetime_ms(s: &str) -> Option<i64> {
    TimeFormat::Iso.parse_ms(s)
}

/// Formats unix milliseconds as `YYYY-MM-DD HH:MM:SS` (UTC; milliseconds are dropped, times
/// before 1970 round down to the second). An instant outside years -9999..=9999 is written
/// as `<ms> ms since 1970`.
pub fn format_timestamp(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => {
            let dt = Offset::UTC.to_datetime(ts);
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                dt.year(),
                dt.month(),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second()
            )
        }
        Err(_) => format!("{ms} ms since 1970"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_instants() {
        assert_eq!(parse_datetime_ms("1970-01-01 00:00:00"), Some(0));
        // 2006-03-01 00:01:44 UTC = 1141171304 s.
        assert_eq!(
            parse_datetime_ms("2006-03-01 00:01:44"),
            Some(1_141_171_304_000)
        );
        assert_eq!(
            parse_datetime_ms("2006-05-01T00:00:00"),
            Some(1_146_441_600_000)
        );
        assert_eq!(parse_datetime_ms("2006-05-01"), Some(1_146_441_600_000));
        assert_eq!(
            parse_datetime_ms("2000-02-29 12:00:00Z"),
            Some(951_825_600_000)
        );
        assert_eq!(
            parse_datetime_ms("2000-02-29T14:00:00+02:00"),
            Some(951_825_600_000)
        );
        assert_eq!(
            parse_datetime_ms(" 2006-03-01 00:01:44.250 "),
            Some(1_141_171_304_250)
        );
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "2006-13-01",
            "2006-02-30",
            "06-01-01",
            "2006-05-01 25:00:00",
            "abc",
            "2006-05-01 1:2:3",
            "2006-05-01T00:00:00[Europe/Paris]",
            "1141171304",
        ] {
            assert_eq!(parse_datetime_ms(s), None, "{s}");
        }
    }

    #[test]
    fn format_inverts_parse() {
        for s in [
            "1970-01-01 00:00:00",
            "2006-03-01 00:01:44",
            "2006-05-31 23:59:39",
            "1999-12-31 23:59:59",
            "2000-02-29 12:00:00",
            "2400-02-29 01:02:03",
        ] {
            let ms = parse_datetime_ms(s).unwrap();
            assert_eq!(format_timestamp(ms), s);
        }
        assert_eq!(format_timestamp(-1), "1969-12-31 23:59:59");
        assert_eq!(format_timestamp(1_141_171_304_999), "2006-03-01 00:01:44");
        assert_eq!(
            format_timestamp(i64::MAX),
            format!("{} ms since 1970", i64::MAX)
        );
    }

    #[test]
    fn epochs() {
        let s = TimeFormat::EpochS;
        assert_eq!(s.parse_ms("1141171304"), Some(1_141_171_304_000));
        assert_eq!(s.parse_ms("1141171304.5"), Some(1_141_171_304_500));
        assert_eq!(s.parse_ms("-1.5"), Some(-1_500));
        assert_eq!(s.parse_ms("0"), Some(0));
        for bad in ["", "-", "1e9", "12a", "1.2.3", "99999999999999999999"] {
            assert_eq!(s.parse_ms(bad), None, "{bad}");
        }
        let ms = TimeFormat::EpochMs;
        assert_eq!(ms.parse_ms("1141171304123"), Some(1_141_171_304_123));
        assert_eq!(ms.parse_ms("1141171304.1"), None);
        assert_eq!(ms.parse_ms(&i64::MAX.to_string()), None, "out of range");
    }

    #[test]
    fn excite_pattern() {
        let f = TimeFormat::excite();
        assert_eq!(
            f.parse_ms("970916105432"),
            parse_datetime_ms("1997-09-16 10:54:32")
        );
        assert_eq!(f.parse_ms("060301071712"), Some(EXAMPLE_MS));
        assert_eq!(f.parse_ms("971316105432"), None, "month 13");
        assert_eq!(f.parse_ms("9709161054"), None, "too short");
        assert_eq!(f.expected(), "%y%m%d%H%M%S (e.g. 060301071712)");
    }

    #[test]
    fn names_round_trip_and_bad_patterns_are_refused() {
        for name in ["iso", "epoch-s", "epoch-ms", "%Y/%m/%d %H:%M:%S", "%s"] {
            let f: TimeFormat = name.parse().unwrap();
            assert_eq!(f.to_string(), name);
            let ex = f.example().unwrap();
            assert_eq!(f.parse_ms(&ex), Some(EXAMPLE_MS), "{name}: {ex}");
        }
        let f: TimeFormat = "%d/%b/%Y:%H:%M:%S %z".parse().unwrap();
        assert_eq!(
            f.parse_ms("01/Mar/2006:02:17:12 -0500"),
            Some(EXAMPLE_MS),
            "offsets are honoured"
        );
        for bad in ["%H:%M:%S", "%Y-%m", "yesterday", "%Q"] {
            let e = bad.parse::<TimeFormat>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
