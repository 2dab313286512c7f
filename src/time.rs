//! The service's timestamps, read and written by hand because they run on every event and
//! every webhook record: `parse_iso` (ISO 8601 with a zone, the colon-less offsets senders use
//! included), `parse_time` (that, or anything RFC 3339 allows), `push_time` (the service's form,
//! `2026-01-05T09:15:23.123-05:00`) and `format_ms` (a query's UTC form with `Z`).

/// Why a text is not a timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsoError {
    /// A well-formed date and time with no zone: ambiguous, so rejected with a hint.
    MissingZone,
    /// Not an ISO 8601 date and time.
    Invalid,
}

/// Milliseconds in a day (a UTC day: the service's days, and its quota's, start at UTC midnight).
pub const DAY_MS: i64 = 86_400_000;

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff...](Z|±HH:MM|±HHMM)` into epoch milliseconds, by hand
/// because it runs on every record and must accept the colon-less offsets senders use.
pub fn parse_iso(b: &[u8]) -> Result<i64, IsoError> {
    use IsoError::{Invalid, MissingZone};
    let digits = |from: usize, len: usize| -> Result<i64, IsoError> {
        let part = b.get(from..from + len).ok_or(Invalid)?;
        part.iter().try_fold(0i64, |acc, &c| {
            if c.is_ascii_digit() {
                Ok(acc * 10 + i64::from(c - b'0'))
            } else {
                Err(Invalid)
            }
        })
    };
    let at = |i: usize, want: &[u8]| b.get(i).is_some_and(|c| want.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt") && at(13, b":") && at(16, b":")) {
        return Err(Invalid);
    }
    let year = digits(0, 4)?;
    let month = digits(5, 2)?;
    let day = digits(8, 2)?;
    let hour = digits(11, 2)?;
    let minute = digits(14, 2)?;
    let second = digits(17, 2)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(Invalid);
    }
    let mut i = 19;
    let mut millis = 0;
    if at(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            // Digits past the third only refine below a millisecond.
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        match i - start {
            0 => return Err(Invalid),
            1 => millis *= 100,
            2 => millis *= 10,
            _ => {}
        }
    }
    let offset_minutes = match b.get(i) {
        None => return Err(MissingZone),
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let hours = digits(i + 1, 2)?;
            let (minutes, end) = if at(i + 3, b":") {
                (digits(i + 4, 2)?, i + 6)
            } else {
                (digits(i + 3, 2)?, i + 5)
            };
            if end != b.len() || hours > 23 || minutes > 59 {
                return Err(Invalid);
            }
            let total = hours * 60 + minutes;
            if sign == b'-' {
                -total
            } else {
                total
            }
        }
        Some(_) => return Err(Invalid),
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
        - offset_minutes * 60;
    Ok(seconds * 1_000 + millis)
}

/// Days in `month` of `year` (proleptic Gregorian).
fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats epoch ms as the service wants it: `2026-01-05T00:00:00.000Z`.
pub fn format_ms(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => format!("{ms}"),
    }
}

/// Parses an ISO-8601 timestamp with an offset into epoch ms: the service's usual form
/// (`2026-01-05T09:15:23.123-05:00`, or `Z`, any fraction, or an offset without its colon) by
/// hand, as every event has three; anything else as chrono reads RFC 3339.
pub fn parse_time(s: &str) -> Option<i64> {
    parse_iso(s.as_bytes()).ok().or_else(|| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_millis())
    })
}

/// Appends `ms` as `2026-01-05T09:15:23.123-05:00` in the given UTC offset (by hand: three per
/// event, on every page served).
pub fn push_time(out: &mut String, ms: i64, offset_min: i16) {
    let local = ms + offset_min as i64 * 60_000;
    let (days, in_day) = (local.div_euclid(DAY_MS), local.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        out.push_str("1970-01-01T00:00:00.000Z");
        return;
    }
    let abs = offset_min.unsigned_abs() as i64;
    let mut buf = *b"0000-00-00T00:00:00.000+00:00";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for slot in buf[at..at + width].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, in_day / 3_600_000);
    put(14, 2, in_day / 60_000 % 60);
    put(17, 2, in_day / 1000 % 60);
    put(20, 3, in_day % 1000);
    put(24, 2, abs / 60);
    put(27, 2, abs % 60);
    if offset_min < 0 {
        buf[23] = b'-';
    }
    // Digits and separators only: always ASCII.
    out.extend(buf.iter().map(|&b| b as char));
}

/// (year, month, day) of a count of days since 1970-01-01 (proleptic Gregorian; H. Hinnant's
/// `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    /// 2026-11-17T05:00:00Z.
    const T0: i64 = 1_794_891_600_000;

    #[test]
    fn iso_parse_agrees_with_chrono() {
        for s in [
            "2026-11-17T05:00:00.000Z",
            "2026-11-17T00:00:00.000-05:00",
            "2026-11-17T10:30:15.7+05:30",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999Z",
            "2000-02-29T12:00:00.25-11:45",
            "2100-03-01T00:00:00+14:00",
            "9999-12-31T23:59:59.999Z",
        ] {
            let expected = DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis();
            assert_eq!(parse_iso(s.as_bytes()).ok(), Some(expected), "{s}");
        }
        assert_eq!(
            parse_iso(b"2026-11-17T00:00:00.000-0500").ok(),
            parse_iso(b"2026-11-17T00:00:00.000-05:00").ok()
        );
        assert_eq!(parse_iso(b"2026-11-17T05:00:00.000Z").ok(), Some(T0));
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
    }

    #[test]
    fn time_formatting_agrees_with_chrono() {
        let mut s = String::new();
        let mut ms = -62_135_596_800_000i64; // 0001-01-01
        while ms < 253_402_300_799_000 {
            for offset in [-720i16, -210, 0, 345, 840] {
                s.clear();
                push_time(&mut s, ms, offset);
                let parsed = DateTime::parse_from_rfc3339(&s).expect("rfc3339");
                assert_eq!(parsed.timestamp_millis(), ms, "{s}");
                assert_eq!(parsed.offset().local_minus_utc(), offset as i32 * 60, "{s}");
            }
            ms += 7_777_777_777;
        }
    }

    #[test]
    fn time_formatting_handles_odd_offsets() {
        let mut s = String::new();
        push_time(&mut s, 0, 345);
        assert_eq!(s, "1970-01-01T05:45:00.000+05:45");
        s.clear();
        push_time(&mut s, 1234, -210);
        assert_eq!(s, "1969-12-31T20:30:01.234-03:30");
    }
}
