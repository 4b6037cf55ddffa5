//! Request arrivals: read from an Azure-LLM-trace CSV or turned from a
//! Prometheus range query of a request rate.

use std::fmt::Write as _;
use std::time::Duration;

use thiserror::Error;

use crate::limits;
// A request is part of the model (`limits` checks it without reading traces).
pub use crate::model::Arrival;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("trace is empty: no request rows")]
    Empty,
    #[error("line {line}: {problem}")]
    Line { line: usize, problem: String },
    #[error(
        "line {line}: timestamp {t} is before the previous row's {prev}: the trace must be sorted by time"
    )]
    Unsorted {
        line: usize,
        t: String,
        prev: String,
    },
    #[error("Prometheus {url}: {problem}")]
    Prometheus { url: String, problem: String },
    #[error("{0}")]
    Limit(String),
}

/// Parse `TIMESTAMP,ContextTokens,GeneratedTokens` rows (the Azure LLM
/// inference trace format); TIMESTAMP is `YYYY-MM-DD HH:MM:SS[.frac]` UTC or
/// plain Unix seconds.
pub fn parse_csv(text: &str) -> Result<Vec<Arrival>, TraceError> {
    let mut out: Vec<Arrival> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let row = raw.trim().trim_start_matches('\u{feff}');
        if row.is_empty() || (line == 1 && row.starts_with("TIMESTAMP")) {
            continue;
        }
        let bad = |problem: String| TraceError::Line { line, problem };
        let cols: Vec<&str> = row.split(',').map(str::trim).collect();
        let [ts, input, output] = cols[..] else {
            return Err(bad(format!("expected 3 columns, found {}", cols.len())));
        };
        if out.len() == limits::MAX_REQUESTS {
            return Err(bad(limits::too_many(out.len() as f64 + 1.0) + " (or more)"));
        }
        let t = parse_time(ts).map_err(|p| bad(format!("TIMESTAMP {ts:?}: {p}")))?;
        let input = tokens(input).map_err(|p| bad(format!("ContextTokens {p}")))?;
        let output = tokens(output).map_err(|p| bad(format!("GeneratedTokens {p}")))?;
        if let Some(prev) = out.last().filter(|p| p.t > t) {
            return Err(TraceError::Unsorted {
                line,
                t: ts.to_string(),
                prev: format!("{:.3}", prev.t),
            });
        }
        out.push(Arrival { t, input, output });
    }
    if out.is_empty() {
        return Err(TraceError::Empty);
    }
    limits::trace(&out).map_err(TraceError::Limit)?;
    Ok(out)
}

fn tokens(s: &str) -> Result<u32, String> {
    match s.parse::<i64>() {
        Ok(v) if v < 0 => Err(format!("is negative: {v}")),
        Ok(v) => u32::try_from(v).map_err(|_| format!("is too large: {v}")),
        Err(_) => Err(format!("is not an integer: {s:?}")),
    }
}

/// `YYYY-MM-DD HH:MM:SS[.frac]` (UTC) or Unix seconds.
fn parse_time(s: &str) -> Result<f64, String> {
    if let Ok(v) = s.parse::<f64>() {
        return limits::time(v);
    }
    let bad = || "expected YYYY-MM-DD HH:MM:SS[.frac] or Unix seconds".to_string();
    let (date, time) = s.split_once([' ', 'T']).ok_or_else(bad)?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (Some(Some(y)), Some(Some(m)), Some(Some(day))) = (d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let mut hms = time.trim_end_matches('Z').split(':');
    let mut field = || hms.next().ok_or_else(bad);
    let h: i64 = field()?.parse().map_err(|_| bad())?;
    let mi: i64 = field()?.parse().map_err(|_| bad())?;
    let sec: f64 = field()?.parse().map_err(|_| bad())?;
    // Checked before the arithmetic, which would overflow for huge years.
    if !(1970..=9999).contains(&y) {
        return Err(format!("year {y} is outside 1970 to 9999"));
    }
    let valid = (1..=12).contains(&m) && (1..=31).contains(&day) && (0..24).contains(&h);
    if !(valid && (0..60).contains(&mi) && (0.0..61.0).contains(&sec)) {
        return Err(bad());
    }
    Ok((days_from_civil(y, m, day) * 86_400 + h * 3600 + mi * 60) as f64 + sec)
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Write arrivals back as CSV (Unix-seconds timestamps).
pub fn to_csv(arrivals: &[Arrival]) -> String {
    let mut s = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    for a in arrivals {
        let _ = writeln!(s, "{:.6},{},{}", a.t, a.input, a.output);
    }
    s
}

/// Arrivals from a rate series (requests/s at each `step`-second point):
/// point `t` covers `[t, t + step)`; its requests are spread evenly over it,
/// carrying fractions to the next point so no request is lost to rounding.
/// More than [`limits::MAX_REQUESTS`] in all is an error, before any is made.
pub fn from_rates(
    points: &[(f64, f64)],
    step: f64,
    input: u32,
    output: u32,
) -> Result<Vec<Arrival>, TraceError> {
    let total: f64 = points.iter().map(|(_, rate)| rate * step).sum();
    if !total.is_finite() || total > limits::MAX_REQUESTS as f64 {
        return Err(TraceError::Limit(format!(
            "{} (rate × --step summed over the points)",
            limits::too_many(total)
        )));
    }
    let mut out = Vec::new();
    let mut carry = 0.0;
    for &(t, rate) in points {
        let want = rate * step + carry;
        let n = (want + 1e-9).floor().max(0.0);
        carry = want - n;
        let n = n as usize;
        for i in 0..n {
            let t = t + step * i as f64 / n as f64;
            out.push(Arrival { t, input, output });
        }
    }
    Ok(out)
}

/// A range query: `GET /api/v1/query_range`, one series expected.
pub struct RangeQuery<'a> {
    pub url: &'a str,
    pub query: &'a str,
    pub start: f64,
    pub end: f64,
    pub step: f64,
    /// For the whole query, connecting included.
    pub timeout: Duration,
}

impl RangeQuery<'_> {
    /// Start, end and step within the limits, before Prometheus is asked.
    pub fn check(&self) -> Result<(), String> {
        limits::time(self.start).map_err(|e| format!("--start: {e}"))?;
        limits::time(self.end).map_err(|e| format!("--end: {e}"))?;
        if self.end < self.start {
            return Err(format!(
                "--end {} is before --start {}",
                self.end, self.start
            ));
        }
        limits::span(self.start, self.end)?;
        if !(self.step.is_finite() && self.step >= 0.001) {
            return Err(format!(
                "--step {}: must be at least 0.001 seconds",
                self.step
            ));
        }
        let points = (self.end - self.start) / self.step + 1.0;
        if points > limits::MAX_POINTS {
            return Err(format!(
                "--step {} gives {points:.0} points over the range, more than Prometheus's limit of {}: raise --step",
                self.step,
                limits::MAX_POINTS
            ));
        }
        Ok(())
    }
}

/// Run a range query whose value is requests per second and turn it into
/// arrivals. Steps missing from the result (no sample) are logged and
/// replayed as no traffic.
pub fn from_prometheus(
    q: &RangeQuery,
    input: u32,
    output: u32,
) -> Result<Vec<Arrival>, TraceError> {
    let err = |problem: String| TraceError::Prometheus {
        url: q.url.to_string(),
        problem,
    };
    q.check().map_err(TraceError::Limit)?;
    let url = format!("{}/api/v1/query_range", q.url.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(q.timeout))
        .build()
        .into();
    let body = agent
        .get(&url)
        .query("query", q.query)
        .query("start", format!("{}", q.start))
        .query("end", format!("{}", q.end))
        .query("step", format!("{}", q.step))
        .call()
        .map_err(|e| {
            err(format!(
                "range query failed (--prometheus-timeout {:?}): {e}",
                q.timeout
            ))
        })?
        .body_mut()
        .read_to_string()
        .map_err(|e| err(format!("reading the response: {e}")))?;
    let points = parse_matrix(&body).map_err(err)?;
    let expected = ((q.end - q.start) / q.step).floor() as usize + 1;
    if points.len() < expected {
        tracing::warn!(
            missing = expected - points.len(),
            expected,
            "range query has steps without samples: replayed as no traffic"
        );
    }
    let arrivals = from_rates(&points, q.step, input, output)?;
    if arrivals.is_empty() {
        return Err(TraceError::Empty);
    }
    Ok(arrivals)
}

fn parse_matrix(body: &str) -> Result<Vec<(f64, f64)>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("response is not JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(format!("query failed: {}", v["error"]));
    }
    let result = v["data"]["result"]
        .as_array()
        .ok_or("response has no data.result")?;
    let series = match result.as_slice() {
        [one] => one,
        [] => return Err("the query returned no series".into()),
        many => {
            return Err(format!(
                "the query returned {} series; wrap it in sum(...)",
                many.len()
            ));
        }
    };
    let values = series["values"].as_array().ok_or("series has no values")?;
    let points = values.iter().map(sample).collect::<Result<Vec<_>, _>>()?;
    if let Some(w) = points.windows(2).find(|w| w[1].0 <= w[0].0) {
        return Err(format!(
            "sample times are not increasing: {} after {}",
            w[1].0, w[0].0
        ));
    }
    Ok(points)
}

fn sample(p: &serde_json::Value) -> Result<(f64, f64), String> {
    let t = p[0]
        .as_f64()
        .ok_or_else(|| format!("bad sample time {p}"))?;
    let t = limits::time(t).map_err(|e| format!("sample {p}: {e}"))?;
    let v: f64 = p[1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad sample value {p}"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("sample at {t} is {v}: not a request rate"));
    }
    Ok((t, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_timestamp() {
        let a =
            parse_csv("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,374,44\n")
                .expect("parse");
        assert_eq!(a[0].t, 1_700_158_546.5);
        assert_eq!((a[0].input, a[0].output), (374, 44));
    }

    #[test]
    fn rates_keep_fractions() {
        let a = from_rates(&[(0.0, 0.5), (1.0, 0.5), (2.0, 0.5), (3.0, 0.5)], 1.0, 1, 1)
            .expect("within limits");
        let t: Vec<f64> = a.iter().map(|a| a.t).collect();
        assert_eq!(t, vec![1.0, 3.0]);
    }
}
