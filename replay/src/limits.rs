//! What a replay accepts (`docs/replay.md`, "Limits"). The replay steps
//! once a second and keeps every request in memory, so spans, request
//! counts and replica counts are bounded up front with an error naming the
//! limit, instead of an allocation that aborts or a run that never ends.

use crate::model::{Arrival, Service};

/// Latest timestamp: 9999-12-31T23:59:59Z.
pub const MAX_TIME: f64 = 253_402_300_799.0;
/// Longest trace: 366 days of one-second steps (a few seconds per policy).
pub const MAX_SPAN: f64 = 366.0 * 86_400.0;
/// Requests in a trace (16 bytes each in memory).
pub const MAX_REQUESTS: usize = 10_000_000;
/// Points of a range query, Prometheus's own limit per series.
pub const MAX_POINTS: f64 = 11_000.0;
/// Replicas any policy may ask for (static at peak included).
pub const MAX_REPLICAS: u32 = 100_000;
/// `--ttft-slo`, `--cooldown`, `--idle-for`, `--min-up`, `--sync`: seconds.
pub const MAX_SECONDS: u64 = 366 * 86_400;

/// A timestamp from input: finite, not before 1970, not past [`MAX_TIME`].
pub fn time(t: f64) -> Result<f64, String> {
    if t.is_finite() && (0.0..=MAX_TIME).contains(&t) {
        Ok(t)
    } else {
        Err(format!(
            "timestamp {t} is outside 0 (1970-01-01) to {MAX_TIME} (9999-12-31)"
        ))
    }
}

/// Span and size of a sorted trace.
pub fn trace(arrivals: &[Arrival]) -> Result<(), String> {
    if arrivals.len() > MAX_REQUESTS {
        return Err(too_many(arrivals.len() as f64));
    }
    if let (Some(first), Some(last)) = (arrivals.first(), arrivals.last()) {
        span(first.t, last.t)?;
    }
    Ok(())
}

/// From `start` to `end`, at most [`MAX_SPAN`].
pub fn span(start: f64, end: f64) -> Result<(), String> {
    let span = end - start;
    if span > MAX_SPAN {
        return Err(format!(
            "the trace spans {:.0} days ({start} to {end}), more than the limit of {} days",
            span / 86_400.0,
            MAX_SPAN / 86_400.0
        ));
    }
    Ok(())
}

pub fn too_many(n: f64) -> String {
    format!("the trace has {n:.0} requests, more than the limit of {MAX_REQUESTS}")
}

/// The replicas the busiest minute needs, within [`MAX_REPLICAS`].
pub fn demand(svc: &Service, arrivals: &[Arrival]) -> Result<(), String> {
    let peak = svc
        .demand_per_minute(arrivals)
        .into_iter()
        .max()
        .unwrap_or(1);
    if peak > MAX_REPLICAS {
        return Err(format!(
            "the busiest minute needs {peak} replicas, more than the limit of {MAX_REPLICAS}: check the token counts, --decode-tps and --max-seqs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_spans_are_bounded() {
        assert!(time(1.7e9).is_ok());
        for bad in [-1.0, 1e12 * 3.15e7, f64::NAN, f64::INFINITY] {
            assert!(time(bad).is_err(), "{bad}");
        }
        assert!(span(0.0, MAX_SPAN).is_ok());
        let err = span(0.0, 1e12).err().unwrap_or_default();
        assert!(err.contains("limit of 366 days"), "{err}");
    }
}
