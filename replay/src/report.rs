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
/// Left and right margins: the two scales.
const L: f64 = 60.0;
const R: f64 = 60.0;
const PANEL: f64 = H + 50.0;

/// One panel per policy: requests per minute (grey, left scale), mean
/// replicas (blue step line, right scale), minutes violating the SLO (red
/// marks), time of day (UTC) from `t0` (Unix seconds) below each.
pub fn svg(outcomes: &[Outcome], t0: f64) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n",
        PANEL * outcomes.len() as f64 + 40.0
    );
    let _ = writeln!(
        s,
        "<rect x=\"{L}\" y=\"8\" width=\"12\" height=\"10\" fill=\"#ccc\"/><text x=\"{}\" y=\"17\">requests per minute (left scale)</text><path d=\"M{},13 h14\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"{}\" y=\"17\">replicas (right scale)</text><rect x=\"{}\" y=\"10\" width=\"12\" height=\"6\" fill=\"#d62728\"/><text x=\"{}\" y=\"17\">minute violating the TTFT SLO</text>",
        L + 16.0,
        L + 230.0,
        L + 250.0,
        L + 400.0,
        L + 416.0
    );
    for (i, o) in outcomes.iter().enumerate() {
        panel(&mut s, o, 30.0 + PANEL * i as f64, t0);
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

fn panel(s: &mut String, o: &Outcome, top: f64, t0: f64) {
    let cols = columns(&o.minutes);
    let n = cols.len().max(1) as f64;
    let max_a = cols.iter().map(|m| m.arrivals).max().unwrap_or(0).max(1) as f64;
    let max_r = cols.iter().map(|m| m.replicas).fold(1.0, f64::max).ceil();
    let x = |i: usize| L + (W - L - R) * i as f64 / n;
    let base = top + 15.0 + H;
    let _ = writeln!(
        s,
        "<text x=\"{L}\" y=\"{top:.1}\" dy=\"10\">{} — {:.2} GPU-h, {} SLO-violation min</text>",
        o.policy, o.gpu_hours, o.slo_violation_minutes
    );
    axes(s, base, max_a, max_r);
    time_ticks(s, base, o.minutes.len(), t0);
    let mut area = format!("M{:.1},{base:.1}", x(0));
    let (mut line, mut marks) = (String::new(), String::new());
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
                marks,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.2}\" height=\"6\" fill=\"#d62728\"/>",
                x(i),
                base - 6.0,
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
    s.push_str(&marks);
}

/// The frame and both scales: 0 and the maximum, requests per minute on
/// the left, replicas on the right.
fn axes(s: &mut String, base: f64, max_a: f64, max_r: f64) {
    let (x1, top) = (W - R, base - H);
    let _ = writeln!(
        s,
        "<path d=\"M{L},{top:.1} V{base:.1} H{x1} V{top:.1}\" fill=\"none\" stroke=\"#000\"/>\n<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{max_a}</text><text x=\"{}\" y=\"{base:.1}\" text-anchor=\"end\">0</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">req/min</text>\n<text x=\"{}\" y=\"{:.1}\" fill=\"#1f77b4\">{max_r}</text><text x=\"{}\" y=\"{base:.1}\" fill=\"#1f77b4\">0</text><text x=\"{}\" y=\"{:.1}\" fill=\"#1f77b4\" font-size=\"10\">replicas</text>",
        L - 4.0,
        top + 10.0,
        L - 4.0,
        L - 4.0,
        top + 24.0,
        x1 + 4.0,
        top + 10.0,
        x1 + 4.0,
        x1 + 4.0,
        top + 24.0
    );
}

/// Time of day (UTC, HH:MM) every few hours under a panel of `minutes`.
fn time_ticks(s: &mut String, base: f64, minutes: usize, t0: f64) {
    let span = minutes.max(1) as f64 * 60.0;
    let every = [600.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0]
        .into_iter()
        .find(|e| span / e <= 10.0)
        .unwrap_or(43200.0);
    let mut t = (t0 / every).ceil() * every;
    while t <= t0 + span {
        let x = L + (W - L - R) * (t - t0) / span;
        let day = t.rem_euclid(86_400.0);
        let _ = writeln!(
            s,
            "<path d=\"M{x:.1},{base:.1} v4\" stroke=\"#000\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{:02}:{:02}</text>",
            base + 14.0,
            (day / 3600.0) as u32,
            (day % 3600.0 / 60.0) as u32
        );
        t += every;
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">time of day (UTC)</text>",
        W - R,
        base + 26.0
    );
}
