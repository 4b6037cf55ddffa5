//! Durations: one grammar for every flag, config key, policy field and
//! PromQL range, Prometheus's (`500ms`, `90s`, `1h30m`, `7d`, `2w`, `1y`).
//!
//! - Terms of a number and a unit: `ms`, `s`, `m`, `h`, `d` (24 h), `w`
//!   (7 d), `y` (365 d), as Prometheus counts them; the largest unit first,
//!   each at most once (`1h30m`, not `30m1h`).
//! - A number may have a decimal fraction (`1.5s`), read to the nanosecond
//!   (finer digits are cut); PromQL itself takes whole numbers only.
//! - A bare number, `0` included, is refused: without a unit it is seconds
//!   to one tool and milliseconds to another.
//! - No sign and no spaces between terms; spaces around the whole are
//!   ignored.
//! - At most [`MAX`], about 292 years (Kubernetes' Go durations), so no
//!   caller's arithmetic on a parsed duration overflows.
//! - `0s` is a duration; [`parse_within`] adds the caller's range.

use std::fmt::Write as _;
use std::time::Duration;

const NS_PER_SEC: u64 = 1_000_000_000;

/// Units, largest first, in nanoseconds.
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 86_400 * NS_PER_SEC),
    ("w", 7 * 86_400 * NS_PER_SEC),
    ("d", 86_400 * NS_PER_SEC),
    ("h", 3_600 * NS_PER_SEC),
    ("m", 60 * NS_PER_SEC),
    ("s", NS_PER_SEC),
    ("ms", 1_000_000),
];

const MAX_NANOS: u64 = i64::MAX.unsigned_abs();

/// The longest duration: `i64::MAX` nanoseconds, as Go's `time.Duration`.
pub const MAX: Duration = Duration::from_nanos(MAX_NANOS);

/// Fraction digits read; the 19th digit of even a year is below 1 ns.
const FRACTION_DIGITS: usize = 18;

/// Why a text is not a duration, with the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} {problem}")]
pub struct Error {
    pub input: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("is not a duration: it is empty; write e.g. 500ms, 90s or 1h30m")]
    Empty,
    #[error("is not a duration: {0:?} has no unit; write e.g. {0}s or {0}ms")]
    NoUnit(String),
    #[error("is not a duration: expected a number before {0:?}")]
    NoNumber(String),
    #[error(
        "is not a duration: unexpected {0:?} (no sign, no spaces); write e.g. 500ms, 90s or 1h30m"
    )]
    Unexpected(char),
    #[error("is not a duration: {0:?} is not a number")]
    BadNumber(String),
    #[error("is not a duration: unknown unit {0:?}; use ms, s, m, h, d, w or y")]
    UnknownUnit(String),
    #[error(
        "is not a duration: {0:?} comes after a unit no larger; write the largest unit first, each once (1h30m)"
    )]
    Order(String),
    #[error("is not a duration: longer than the longest, about 292 years")]
    TooLong,
    #[error("is out of range: must be between {min} and {max}")]
    OutOfRange { min: String, max: String },
}

/// Reads `s` in the grammar above.
pub fn parse(s: &str) -> Result<Duration, Error> {
    let fail = |problem| Error {
        input: s.to_owned(),
        problem,
    };
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(fail(Problem::Empty));
    }
    let mut total: u128 = 0;
    let mut smallest_yet = None;
    while let Some(first) = rest.chars().next() {
        if first.is_alphabetic() {
            return Err(fail(Problem::NoNumber(rest.to_owned())));
        }
        if !is_number_char(first) {
            return Err(fail(Problem::Unexpected(first)));
        }
        let number_end = rest.find(|c| !is_number_char(c)).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        if unit.is_empty() {
            return Err(fail(match next.chars().next() {
                Some(c) => Problem::Unexpected(c),
                None => Problem::NoUnit(number.to_owned()),
            }));
        }
        let Some(at) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(fail(Problem::UnknownUnit(unit.to_owned())));
        };
        if smallest_yet.is_some_and(|prev| at <= prev) {
            return Err(fail(Problem::Order(unit.to_owned())));
        }
        smallest_yet = Some(at);
        total = term_nanos(number, UNITS[at].1)
            .map_err(fail)?
            .checked_add(total)
            .ok_or_else(|| fail(Problem::TooLong))?;
        rest = next;
    }
    u64::try_from(total)
        .ok()
        .filter(|&ns| ns <= MAX_NANOS)
        .map(Duration::from_nanos)
        .ok_or_else(|| fail(Problem::TooLong))
}

/// [`parse`], then `min..=max`; the error writes both bounds.
pub fn parse_within(s: &str, min: Duration, max: Duration) -> Result<Duration, Error> {
    let d = parse(s)?;
    if (min..=max).contains(&d) {
        Ok(d)
    } else {
        Err(Error {
            input: s.to_owned(),
            problem: Problem::OutOfRange {
                min: format(min),
                max: format(max),
            },
        })
    }
}

/// `d` in the grammar, hours the largest unit (`24h`, `1m30s`, `1s500ms`,
/// `1.5ms`); [`parse`] reads it back.
pub fn format(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let secs = d.as_secs();
    let mut out = String::new();
    for (n, unit) in [(secs / 3600, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    let (ms, ns) = (d.subsec_millis(), d.subsec_nanos() % 1_000_000);
    if ns > 0 {
        let fraction = format!("{ns:06}");
        let _ = write!(out, "{ms}.{}ms", fraction.trim_end_matches('0'));
    } else if ms > 0 {
        let _ = write!(out, "{ms}ms");
    }
    out
}

fn is_number_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.'
}

/// `number` (digits, optionally `.` and digits) units of `unit_ns`.
fn term_nanos(number: &str, unit_ns: u64) -> Result<u128, Problem> {
    let bad = || Problem::BadNumber(number.to_owned());
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits_only(whole)
        || !digits_only(fraction)
        || (number.contains('.') && fraction.is_empty())
    {
        return Err(bad());
    }
    let unit = u128::from(unit_ns);
    let mut ns = decimal(whole)
        .and_then(|w| w.checked_mul(unit))
        .ok_or(Problem::TooLong)?;
    let kept = &fraction[..fraction.len().min(FRACTION_DIGITS)];
    if !kept.is_empty() {
        let scale = 10u128.pow(kept.len() as u32);
        // At most 10^18 · 3.2·10^16: inside u128.
        ns += decimal(kept).ok_or_else(bad)? * unit / scale;
    }
    Ok(ns)
}

/// ASCII digits as a number; `None` when it would not fit.
fn decimal(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |n, b| {
        n.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(s: &str) -> Problem {
        parse(s).unwrap_err().problem
    }

    #[test]
    fn the_grammar() {
        let secs = Duration::from_secs;
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("90s"), Ok(secs(90)));
        assert_eq!(parse("1h30m"), Ok(secs(5400)));
        assert_eq!(parse("7d"), Ok(secs(7 * 86_400)));
        assert_eq!(parse("2w"), Ok(secs(14 * 86_400)));
        assert_eq!(parse("1y"), Ok(secs(365 * 86_400)));
        assert_eq!(
            parse("1y2w3d4h5m6s7ms"),
            Ok(Duration::new(33_019_506, 7_000_000))
        );
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0.25h"), Ok(secs(900)));
        assert_eq!(parse("1.5h30m"), Ok(secs(7200)));
        assert_eq!(parse("1.0000000015s"), Ok(Duration::new(1, 1)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("  5m\n"), Ok(secs(300)));
    }

    #[test]
    fn refusals_name_the_input_and_the_problem() {
        assert_eq!(problem(""), Problem::Empty);
        assert_eq!(problem("   "), Problem::Empty);
        assert_eq!(problem("5"), Problem::NoUnit("5".into()));
        assert_eq!(problem("0"), Problem::NoUnit("0".into()));
        assert_eq!(problem("1h5"), Problem::NoUnit("5".into()));
        assert_eq!(problem("s"), Problem::NoNumber("s".into()));
        assert_eq!(problem("-5s"), Problem::Unexpected('-'));
        assert_eq!(problem("+5s"), Problem::Unexpected('+'));
        assert_eq!(problem("1h 30m"), Problem::Unexpected(' '));
        assert_eq!(problem("5 s"), Problem::Unexpected(' '));
        assert_eq!(problem("1.5.5s"), Problem::BadNumber("1.5.5".into()));
        assert_eq!(problem(".5s"), Problem::BadNumber(".5".into()));
        assert_eq!(problem("5.s"), Problem::BadNumber("5.".into()));
        assert_eq!(problem("1M"), Problem::UnknownUnit("M".into()));
        assert_eq!(problem("1sec"), Problem::UnknownUnit("sec".into()));
        assert_eq!(problem("30s1m"), Problem::Order("m".into()));
        assert_eq!(problem("1s1s"), Problem::Order("s".into()));
        assert_eq!(problem("$__range"), Problem::Unexpected('$'));
        let e = parse("5").unwrap_err().to_string();
        assert_eq!(
            e,
            r#""5" is not a duration: "5" has no unit; write e.g. 5s or 5ms"#
        );
    }

    #[test]
    fn hostile_input_is_refused_not_wrapped() {
        assert_eq!(problem("99999999999h"), Problem::TooLong);
        assert_eq!(problem("293y"), Problem::TooLong);
        assert_eq!(problem("292y52w"), Problem::TooLong);
        let digits = "9".repeat(60);
        assert_eq!(problem(&format!("{digits}ms")), Problem::TooLong);
        assert_eq!(
            parse(&format!("1.{digits}s")),
            Ok(Duration::new(1, 999_999_999))
        );
        assert_eq!(parse("292y"), Ok(Duration::from_secs(292 * 365 * 86_400)));
        assert_eq!(problem("5µs"), Problem::UnknownUnit("µs".into()));
        assert_eq!(problem("５s"), Problem::Unexpected('５'));
        assert_eq!(problem("5秒"), Problem::UnknownUnit("秒".into()));
        assert_eq!(problem("5s\u{0}"), Problem::Unexpected('\u{0}'));
    }

    #[test]
    fn a_range_names_both_bounds() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(86_400));
        assert_eq!(parse_within("1d", min, max), Ok(max));
        let e = parse_within("50ms", min, max).unwrap_err().to_string();
        assert_eq!(
            e,
            r#""50ms" is out of range: must be between 100ms and 24h"#
        );
        assert!(matches!(
            parse_within("5", min, max).unwrap_err().problem,
            Problem::NoUnit(_)
        ));
    }

    #[test]
    fn format_reads_back() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(1500), "1s500ms"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(86_400), "24h"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(1), "0.000001ms"),
            (MAX, "2562047h47m16s854.775807ms"),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Ok(d), "{text}");
        }
    }
}
