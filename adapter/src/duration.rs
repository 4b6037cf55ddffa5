//! Durations in flags, config keys and policy fields: `humantime`'s grammar
//! (`500ms`, `1.5s`, `2m`, `1h30m`) with only the units the docs name, so
//! `1M` (a month to humantime) or `1d` is refused rather than misread.
//! Callers say which flag or key was wrong.

use std::time::Duration;

const UNITS: [&str; 4] = ["ms", "s", "m", "h"];

/// `None` for anything else, a bare number included.
pub fn parse(s: &str) -> Option<Duration> {
    let s = s.trim();
    let named_units = s
        .split(|c: char| !c.is_ascii_alphabetic())
        .all(|u| u.is_empty() || UNITS.contains(&u));
    let ends_in_unit = s.ends_with(|c: char| c.is_ascii_alphabetic());
    if !(named_units && ends_in_unit) {
        return None;
    }
    humantime::parse_duration(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("2m30s"), Some(Duration::from_secs(150)));
        assert_eq!(parse("5"), None);
        assert_eq!(parse("s"), None);
        assert_eq!(parse("1d"), None);
        assert_eq!(parse("1M"), None);
        assert_eq!(parse("-1s"), None);
    }
}
