//! Unix milliseconds back to the logs' `YYYY-MM-DD HH:MM:SS` (UTC), for writing text logs and
//! for reports. Parsing is [`crate::time::parse_datetime_ms`], which the readers use.
//!
//! No date crate: Howard Hinnant's `civil_from_days`, the inverse of
//! [`crate::time::days_from_civil`] ("chrono-Compatible Low-Level Date Algorithms",
//! <https://howardhinnant.github.io/date_algorithms.html>).

/// The proleptic Gregorian date `(year, month, day)` of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Formats unix milliseconds as `YYYY-MM-DD HH:MM:SS` (UTC; milliseconds are dropped, times
/// before 1970 round down to the second).
pub fn format_timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{days_from_civil, parse_datetime_ms};

    #[test]
    fn civil_round_trip_over_centuries() {
        for days in (-800_000..800_000).step_by(7) {
            let (y, m, d) = civil_from_days(days);
            if y >= 0 {
                assert_eq!(days_from_civil(y, m, d), days);
            }
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
    }
}
