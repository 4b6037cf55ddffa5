//! The fleet frontier's picture: GPU-hours (x) against SLO-violation
//! minutes (y) of the whole fleet. KEDA per cooldown on dedicated GPUs
//! (red, labelled), the target corner of each (half its GPU-hours, its
//! minutes: hollow red), dedicated gpuscale with the activator (blue) and
//! the shared sleep tier (green), each path's Pareto-efficient settings.
//! Down and left is better; a green point below and left of a hollow
//! corner meets the target for that cooldown.

use std::fmt::Write as _;

use crate::fleet_report::{Frontier, Total};

const W: f64 = 760.0;
const H: f64 = 440.0;
const PAD: f64 = 60.0;

/// One point: GPU-hours, minutes, its tooltip.
struct P {
    x: f64,
    y: f64,
    title: String,
}

/// The points no other point beats on one axis without losing on the
/// other, by GPU-hours.
fn pareto(mut points: Vec<P>) -> Vec<P> {
    points.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    let mut out: Vec<P> = Vec::new();
    for p in points {
        if out.last().is_none_or(|l| p.y < l.y) {
            out.push(p);
        }
    }
    out
}

fn total(t: &Total, title: String) -> P {
    P {
        x: t.gpu_hours,
        y: f64::from(t.slo_minutes),
        title,
    }
}

pub fn svg(f: &Frontier) -> String {
    let gpuscale = pareto(
        f.gpuscale
            .iter()
            .map(|((s, i), t)| {
                total(
                    t,
                    format!("gpuscale + activator, idle on {}, idleFor {i}s", s.name()),
                )
            })
            .collect(),
    );
    let shared = pareto(
        f.shared
            .iter()
            .map(|s| P {
                x: s.gpu_hours,
                y: f64::from(s.slo_violation_minutes()),
                title: s.tier.name(),
            })
            .collect(),
    );
    let keda: Vec<(u64, P)> = f
        .keda
        .iter()
        .map(|(c, t)| (*c, total(t, format!("KEDA cooldown {c}s"))))
        .collect();
    let all = || keda.iter().map(|(_, p)| p).chain(&gpuscale).chain(&shared);
    let max_x = all().map(|p| p.x).fold(1.0, f64::max);
    let max_y = all().map(|p| p.y).fold(1.0, f64::max);
    let xy = |x: f64, y: f64| {
        (
            PAD + (W - 2.0 * PAD) * x / max_x,
            H - PAD - (H - 2.0 * PAD) * y / max_y,
        )
    };
    let mut s = frame(max_x, max_y);
    series(
        &mut s,
        &gpuscale,
        "#1f77b4",
        "dedicated GPUs, gpuscale + activator at zero (Pareto-efficient settings)",
        20.0,
        &xy,
    );
    series(
        &mut s,
        &shared,
        "#2ca02c",
        "shared GPUs, sleep tier (Pareto-efficient settings)",
        36.0,
        &xy,
    );
    for (c, p) in &keda {
        let (x, y) = xy(p.x, p.y);
        let (hx, _) = xy(p.x / 2.0, p.y);
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#d62728\"><title>{}</title></circle><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#d62728\">{c}s</text><rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"none\" stroke=\"#d62728\"><title>target for cooldown {c}s: half its GPU-hours, its minutes</title></rect>",
            p.title,
            x + 6.0,
            y - 4.0,
            hx - 3.0,
            y - 3.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"52\" fill=\"#d62728\">KEDA on dedicated GPUs, labelled with its cooldownPeriod; hollow: half its GPU-hours</text>\n</svg>",
        PAD + 10.0
    );
    s
}

/// The canvas, both axes with five ticks each, and their titles.
fn frame(max_x: f64, max_y: f64) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n<path d=\"M{PAD},{PAD} L{PAD},{y0} L{x1},{y0}\" fill=\"none\" stroke=\"#000\"/>\n",
        y0 = H - PAD,
        x1 = W - PAD
    );
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let x = PAD + (W - 2.0 * PAD) * f;
        let y = H - PAD - (H - 2.0 * PAD) * f;
        let _ = writeln!(
            s,
            "<path d=\"M{x:.1},{} v5 M{PAD},{y:.1} h-5\" stroke=\"#000\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{:.0}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">{:.0}</text>",
            H - PAD,
            H - PAD + 16.0,
            max_x * f,
            PAD - 8.0,
            y + 3.0,
            max_y * f
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPU-hours of the fleet over the trace</text>\n<text x=\"15\" y=\"{}\" transform=\"rotate(-90 15 {})\" text-anchor=\"middle\">SLO-violation minutes, all models</text>",
        W / 2.0,
        H - 15.0,
        H / 2.0,
        H / 2.0
    );
    s
}

/// One path: its points joined by a line, with tooltips, and its legend.
fn series(
    s: &mut String,
    points: &[P],
    colour: &str,
    label: &str,
    dy: f64,
    xy: &dyn Fn(f64, f64) -> (f64, f64),
) {
    let line: Vec<String> = points
        .iter()
        .map(|p| {
            let (x, y) = xy(p.x, p.y);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = writeln!(
        s,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\"/>",
        line.join(" ")
    );
    for p in points {
        let (x, y) = xy(p.x, p.y);
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{colour}\"><title>{}</title></circle>",
            p.title
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{dy}\" fill=\"{colour}\">{label}</text>",
        PAD + 10.0
    );
}
