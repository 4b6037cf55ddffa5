//! The results as a table and as an SVG picture.

use std::fmt::Write as _;

use crate::sim::{Minute, Outcome};

/// The policy column's width: the longest name (an "+ activator" row
/// included), so every row's columns start at the same offsets.
pub fn policy_width<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> usize {
    outcomes
        .map(|o| o.policy.chars().count())
        .chain(["policy".len()])
        .max()
        .unwrap_or(0)
}

/// One row per policy.
pub fn table(outcomes: &[Outcome]) -> String {
    let w = policy_width(outcomes.iter());
    let mut s = format!(
        "{:<w$} {:>9} {:>9} {:>8} {:>9} {:>9} {:>7} {:>7} {:>9}\n",
        "policy", "GPU-h", "cost", "SLO-min", "TTFT p50", "TTFT p95", "cold", "events", "unserved"
    );
    for o in outcomes {
        let _ = writeln!(
            s,
            "{:<w$} {:>9.2} {:>9.2} {:>8} {:>8.2}s {:>8.2}s {:>7} {:>7} {:>9}",
            o.policy,
            o.gpu_hours,
            o.cost,
            o.slo_violation_minutes,
            o.ttft_p50,
            o.ttft_p95,
            o.cold_waiters,
            o.scale_events,
            o.unserved
        );
    }
    s
}

const W: f64 = 900.0;
const H: f64 = 120.0;

/// One panel per policy: arrivals per minute (grey), replicas (blue step
/// line), minutes violating the SLO (red marks).
pub fn svg(outcomes: &[Outcome]) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        (H + 30.0) * outcomes.len() as f64 + 10.0
    );
    for (i, o) in outcomes.iter().enumerate() {
        panel(&mut s, o, 10.0 + (H + 30.0) * i as f64);
    }
    s.push_str("</svg>\n");
    s
}

/// At most `COLUMNS` columns: the busiest minute's arrivals, the mean
/// replicas (so time at zero shows) and whether any minute violated.
const COLUMNS: usize = 300;

struct Column {
    arrivals: u32,
    replicas: f64,
    violated: bool,
}

fn columns(minutes: &[Minute]) -> Vec<Column> {
    let per = minutes.len().div_ceil(COLUMNS).max(1);
    minutes
        .chunks(per)
        .map(|c| Column {
            arrivals: c.iter().map(|m| m.arrivals).max().unwrap_or(0),
            replicas: c.iter().map(|m| f64::from(m.replicas)).sum::<f64>() / c.len() as f64,
            violated: c.iter().any(|m| m.violated),
        })
        .collect()
}

fn panel(s: &mut String, o: &Outcome, top: f64) {
    let cols = columns(&o.minutes);
    let n = cols.len().max(1) as f64;
    let max_a = cols.iter().map(|m| m.arrivals).max().unwrap_or(0).max(1) as f64;
    let max_r = cols.iter().map(|m| m.replicas).fold(1.0, f64::max);
    let x = |i: usize| 40.0 + (W - 50.0) * i as f64 / n;
    let base = top + 15.0 + H;
    let _ = writeln!(
        s,
        "<text x=\"40\" y=\"{top:.1}\" dy=\"10\">{} — {:.2} GPU-h, {} SLO-violation min (max {max_r} replicas)</text>",
        o.policy, o.gpu_hours, o.slo_violation_minutes
    );
    let mut area = format!("M{:.1},{base:.1}", x(0));
    let mut line = String::new();
    for (i, m) in cols.iter().enumerate() {
        let ya = base - H * f64::from(m.arrivals) / max_a;
        let yr = base - H * m.replicas / max_r;
        let _ = write!(area, " L{:.1},{ya:.1} L{:.1},{ya:.1}", x(i), x(i + 1));
        let _ = write!(
            line,
            "{}{:.1},{yr:.1} L{:.1},{yr:.1} ",
            if i == 0 { "M" } else { "L" },
            x(i),
            x(i + 1)
        );
        if m.violated {
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.2}\" height=\"6\" fill=\"#d62728\"/>",
                x(i),
                base + 2.0,
                (x(i + 1) - x(i)).max(1.0)
            );
        }
    }
    let _ = write!(area, " L{:.1},{base:.1} Z", x(cols.len()));
    let _ = writeln!(s, "<path d=\"{area}\" fill=\"#ccc\"/>");
    let _ = writeln!(
        s,
        "<path d=\"{line}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>"
    );
}
