//! RFC 3339 times as Kubernetes writes them (`metav1.Time`): UTC, whole
//! seconds, `Z` (`2026-11-30T22:40:00Z`). [`parse`] also reads what other
//! writers send: a fraction of a second (cut to the second, as
//! `metav1.Time` keeps it), a numeric offset, a lowercase `t`/`z`.

/// Seconds since the Unix epoch now (0 for a clock set before it), the
/// time every writer here formats.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch, written `2026-11-30T22:40:00Z`. A time
/// outside the years 0000–9999, which RFC 3339 cannot write (the clock
/// never gives one), gets its year in full (`10000-…`, `-0001-…`) rather
/// than a wrong one; [`parse`] refuses it.
pub fn format(unix_secs: i64) -> String {
    let (days, secs) = (unix_secs.div_euclid(86_400), unix_secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Why a text is not an RFC 3339 time, with the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an RFC 3339 time such as 2026-11-30T22:40:00Z: {problem}")]
pub struct Error {
    pub input: String,
    pub problem: &'static str,
}

/// An RFC 3339 time as seconds since the Unix epoch (UTC).
pub fn parse(s: &str) -> Result<i64, Error> {
    let fail = |problem| Error {
        input: s.to_owned(),
        problem,
    };
    let b = s.as_bytes();
    let shape = "expected YYYY-MM-DDTHH:MM:SS and Z or an offset";
    if b.len() < 20 || !s.is_ascii() {
        return Err(fail(shape));
    }
    let separators = [(4, b"-"), (7, b"-"), (13, b":"), (16, b":")];
    if separators.iter().any(|(at, c)| b[*at] != c[0]) || !b"Tt ".contains(&b[10]) {
        return Err(fail(shape));
    }
    let field = |at: usize, len: usize| number(&b[at..at + len]).ok_or_else(|| fail(shape));
    let (y, m, d) = (field(0, 4)?, field(5, 2)?, field(8, 2)?);
    let (hh, mm, ss) = (field(11, 2)?, field(14, 2)?, field(17, 2)?);
    if !(1..=12).contains(&m) {
        return Err(fail("the month is not 01–12"));
    }
    if d < 1 || d > days_in_month(y, m) {
        return Err(fail("no such day in that month"));
    }
    if hh > 23 || mm > 59 || ss > 59 {
        return Err(fail("the time of day is not 00:00:00–23:59:59"));
    }
    let offset = offset_secs(skip_fraction(&b[19..]).ok_or_else(|| fail(shape))?)
        .ok_or_else(|| fail("expected Z or an offset such as +01:00 at the end"))?;
    Ok(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset)
}

/// The rest after an optional `.` and digits; `None` for a `.` alone.
fn skip_fraction(rest: &[u8]) -> Option<&[u8]> {
    let Some(digits) = rest.strip_prefix(b".") else {
        return Some(rest);
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    (n > 0).then(|| &digits[n..])
}

/// `Z`, `z` or `±HH:MM` (and nothing after) as seconds east of UTC.
fn offset_secs(zone: &[u8]) -> Option<i64> {
    match zone {
        b"Z" | b"z" => Some(0),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (number(&[*h1, *h2])?, number(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            Some(if *sign == b'-' { -secs } else { secs })
        }
        _ => None,
    }
}

/// ASCII digits (at most four here) as a number.
fn number(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |n, c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil calendar algorithms (proleptic Gregorian).

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_kubernetes_does() {
        assert_eq!(format(0), "1970-01-01T00:00:00Z");
        assert_eq!(format(1_796_078_400), "2026-11-30T22:40:00Z");
        assert_eq!(format(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(format(253_402_300_800), "10000-01-01T00:00:00Z");
        // The extremes do not overflow.
        assert!(format(i64::MAX).ends_with('Z'));
        assert!(format(i64::MIN).ends_with('Z'));
    }

    #[test]
    fn parses_what_it_formats_and_what_others_write() {
        for t in [
            0,
            1_796_078_400,
            951_782_400,
            -62_167_219_200,
            253_402_300_799,
        ] {
            assert_eq!(parse(&format(t)), Ok(t), "{}", format(t));
        }
        assert_eq!(parse("2026-11-30T22:40:00.987654Z"), Ok(1_796_078_400));
        assert_eq!(parse("2026-11-30T23:40:00+01:00"), Ok(1_796_078_400));
        assert_eq!(parse("2026-11-30T18:10:00-04:30"), Ok(1_796_078_400));
        assert_eq!(parse("2026-11-30t22:40:00z"), Ok(1_796_078_400));
        assert_eq!(parse("2026-11-30 22:40:00Z"), Ok(1_796_078_400));
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for (s, says) in [
            ("", "expected YYYY"),
            ("1796078400", "expected YYYY"),
            ("2026-11-30T22:40:00", "expected YYYY"),
            ("2026-11-30T22:40Z", "expected YYYY"),
            ("2026-13-01T00:00:00Z", "month"),
            ("2026-02-29T00:00:00Z", "no such day"),
            ("2026-04-31T00:00:00Z", "no such day"),
            ("2026-11-00T00:00:00Z", "no such day"),
            ("2026-11-30T24:00:00Z", "time of day"),
            ("2026-11-30T23:59:60Z", "time of day"),
            ("2026-11-30T22:40:00.Z", "expected YYYY"),
            ("2026-11-30T22:40:00+1:00", "offset"),
            ("2026-11-30T22:40:00+24:00", "offset"),
            ("2026-11-30T22:40:00Zjunk", "offset"),
            ("+2026-11-30T22:40:00Z", "expected YYYY"),
            ("２026-11-30T22:40:00Z", "expected YYYY"),
            ("2026-11-30T22:40:00Ä", "expected YYYY"),
            ("10000-01-01T00:00:00Z", "expected YYYY"),
        ] {
            let e = parse(s).unwrap_err();
            assert!(e.to_string().contains(says), "{s}: {e}");
            assert_eq!(e.input, s);
        }
    }
}
