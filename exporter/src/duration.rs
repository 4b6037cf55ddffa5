//! Durations of flags, one grammar for every flag: `humantime`'s (`500ms`,
//! `1.5s`, `2m`, `1h30m`) with only the units the docs name (`ms`, `s`,
//! `m`, `h`), so `1M` (a month to humantime) or `1d` is refused, not
//! misread; each flag brings its own range.

use std::time::Duration;

const UNITS: &[&str] = &["ms", "s", "m", "h"];

/// `s` as a duration within `min..=max`; the error says what to write.
pub fn parse(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let s = s.trim();
    let mut units = s.split(|c: char| !c.is_ascii_alphabetic());
    if !s.ends_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("'{s}' has no unit; write e.g. 5s or 500ms"));
    }
    if let Some(unit) = units.find(|u| !u.is_empty() && !UNITS.contains(u)) {
        return Err(format!("unknown unit '{unit}' in '{s}'; use ms, s, m or h"));
    }
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("'{s}' is not a duration ({e}); write e.g. 5s or 500ms"))?;
    if !(min..=max).contains(&d) {
        return Err(format!(
            "'{s}' is out of range: must be between {} and {}",
            show(min),
            show(max)
        ));
    }
    Ok(d)
}

/// A bound in the largest unit that writes it whole (`24h`, not `1day`).
fn show(d: Duration) -> String {
    let ms = d.as_millis();
    match [(3_600_000, "h"), (60_000, "m"), (1000, "s")]
        .into_iter()
        .find(|(per, _)| ms.checked_rem(*per) == Some(0))
    {
        Some((per, unit)) => format!("{}{unit}", ms / per),
        None => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(3600));

    fn p(s: &str) -> Result<Duration, String> {
        parse(s, RANGE.0, RANGE.1)
    }

    #[test]
    fn the_documented_forms() {
        assert_eq!(p("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(p("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(p("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(p("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(p("1m30s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn refusals_say_why() {
        assert!(p("5").unwrap_err().contains("no unit"));
        assert!(p("5d").unwrap_err().contains("unknown unit 'd'"));
        assert!(p("1M").unwrap_err().contains("unknown unit 'M'"));
        assert!(p("-5s").unwrap_err().contains("not a duration"));
        assert!(p("1.5.5s").unwrap_err().contains("not a duration"));
        assert!(p("50ms").unwrap_err().contains("between 100ms and 1h"));
        assert!(p("").unwrap_err().contains("no unit"));
        let day = parse("2d", Duration::ZERO, Duration::from_secs(86_400));
        assert!(day.unwrap_err().contains("unknown unit"));
        let long = parse(
            "25h",
            Duration::from_millis(10),
            Duration::from_secs(86_400),
        );
        assert!(long.unwrap_err().contains("between 10ms and 24h"));
    }
}
