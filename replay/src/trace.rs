//! Request arrivals: read from an Azure-LLM-trace CSV or turned from a
//! Prometheus range query of a request rate.

use std::fmt::Write as _;

use thiserror::Error;

/// One request: arrival (seconds since the Unix epoch) and its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    pub t: f64,
    pub input: u32,
    pub output: u32,
}

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
        let t = parse_time(ts).ok_or_else(|| bad(format!("bad TIMESTAMP {ts:?}")))?;
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
fn parse_time(s: &str) -> Option<f64> {
    if let Ok(v) = s.parse::<f64>() {
        return (v.is_finite() && v >= 0.0).then_some(v);
    }
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut hms = time.trim_end_matches('Z').split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let mi: i64 = hms.next()?.parse().ok()?;
    let sec: f64 = hms.next()?.parse().ok()?;
    let valid = (1..=12).contains(&m) && (1..=31).contains(&day) && h < 24 && mi < 60;
    (valid && (0.0..61.0).contains(&sec))
        .then(|| (days_from_civil(y, m, day) * 86_400 + h * 3600 + mi * 60) as f64 + sec)
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
pub fn from_rates(points: &[(f64, f64)], step: f64, input: u32, output: u32) -> Vec<Arrival> {
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
    out
}

/// A range query: `GET /api/v1/query_range`, one series expected.
pub struct RangeQuery<'a> {
    pub url: &'a str,
    pub query: &'a str,
    pub start: f64,
    pub end: f64,
    pub step: f64,
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
    let url = format!("{}/api/v1/query_range", q.url.trim_end_matches('/'));
    let body = ureq::get(&url)
        .query("query", q.query)
        .query("start", format!("{}", q.start))
        .query("end", format!("{}", q.end))
        .query("step", format!("{}", q.step))
        .call()
        .map_err(|e| err(format!("range query failed: {e}")))?
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
    let arrivals = from_rates(&points, q.step, input, output);
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
    values.iter().map(sample).collect()
}

fn sample(p: &serde_json::Value) -> Result<(f64, f64), String> {
    let t = p[0]
        .as_f64()
        .ok_or_else(|| format!("bad sample time {p}"))?;
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
        let a = from_rates(&[(0.0, 0.5), (1.0, 0.5), (2.0, 0.5), (3.0, 0.5)], 1.0, 1, 1);
        let t: Vec<f64> = a.iter().map(|a| a.t).collect();
        assert_eq!(t, vec![1.0, 3.0]);
    }
}
