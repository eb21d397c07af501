//! Calendar time without a date-time dependency: `YYYY-MM-DD[ T]HH:MM:SS` and
//! `YYYY-MM-DD` in UTC to unix milliseconds, using Howard Hinnant's days-from-civil
//! algorithm ("chrono-Compatible Low-Level Date Algorithms").

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
}
