//! Durations of flags in the workspace's one grammar
//! (`gpuscale_util::duration`: `500ms`, `1.5s`, `2m`, `1h30m`); each flag
//! brings its own range.

use std::time::Duration;

/// `s` as a duration within `min..=max`; the error says what to write.
pub fn parse(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    gpuscale_util::duration::parse_within(s, min, max).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_why() {
        let p = |s| parse(s, Duration::from_millis(100), Duration::from_secs(3600));
        assert_eq!(p("1m30s"), Ok(Duration::from_secs(90)));
        assert!(p("5").unwrap_err().contains("no unit"));
        assert!(p("1M").unwrap_err().contains("unknown unit \"M\""));
        assert!(p("50ms").unwrap_err().contains("between 100ms and 1h"));
        let day = parse("25h", Duration::ZERO, Duration::from_secs(86_400));
        assert!(day.unwrap_err().contains("between 0s and 24h"));
    }
}
