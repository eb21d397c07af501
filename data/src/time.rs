//! Calendar time without a date-time dependency: `YYYY-MM-DD[ T]HH:MM:SS` and
//! `YYYY-MM-DD` in UTC to unix milliseconds and back, using Howard Hinnant's
//! days-from-civil and civil-from-days algorithms ("chrono-Compatible Low-Level Date
//! Algorithms").

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `YYYY-MM-DD HH:MM:SS`, `YYYY-MM-DDTHH:MM:SS` (optional trailing `Z`) or
/// `YYYY-MM-DD` as UTC; returns unix milliseconds, or `None` if it is not a valid time.
pub fn parse_datetime_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut d = date.split('-');
    let (y, m, day) = (d.next()?, d.next()?, d.next()?);
    if d.next().is_some() || y.len() != 4 || m.len() != 2 || day.len() != 2 {
        return None;
    }
    let (y, m, day) = (digits(y)?, digits(m)?, digits(day)?);
    if !(1..=12).contains(&m) || day == 0 || day > days_in_month(i64::from(y), m) {
        return None;
    }
    let (hh, mm, ss) = match time {
        None => (0, 0, 0),
        Some(t) => {
            let mut p = t.split(':');
            let (h, mi, se) = (p.next()?, p.next()?, p.next()?);
            if p.next().is_some() || h.len() != 2 || mi.len() != 2 || se.len() != 2 {
                return None;
            }
            (digits(h)?, digits(mi)?, digits(se)?)
        }
    };
    if hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, day);
    Some((days * 86_400 + i64::from(hh) * 3600 + i64::from(mm) * 60 + i64::from(ss)) * 1000)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

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
        ] {
            assert_eq!(parse_datetime_ms(s), None, "{s}");
        }
    }

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
