//! The Pareto frontier against KEDA: for each KEDA `cooldownPeriod`, the
//! gpuscale settings (idle signal × `idleFor` × `minUpDuration`) with no
//! more GPU-hours and no more SLO-violation minutes, and how long a cold
//! request's wake signal took.

use std::fmt::Write as _;

use crate::compare::Knobs;
use crate::idle::IdleSignal;
use crate::model::Service;
use crate::sim::{Outcome, replay};
use crate::trace::Arrival;

/// One policy setting's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// KEDA `cooldownPeriod` or gpuscale `idleFor`, seconds.
    pub knob: u64,
    /// gpuscale `minUpDuration`, seconds (0 for KEDA).
    pub min_up: u64,
    /// What gpuscale idles on (`Rate` for KEDA, unused).
    pub signal: IdleSignal,
    pub gpu_hours: f64,
    pub slo_minutes: u32,
    /// The longest wake signal (first held request → scale-up), seconds.
    pub wake_max: f64,
}

/// One gpuscale setting of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub signal: IdleSignal,
    pub idle_for: u64,
    pub min_up: u64,
}

impl Point {
    fn of(knob: u64, min_up: u64, signal: IdleSignal, o: &Outcome) -> Self {
        Self {
            knob,
            min_up,
            signal,
            gpu_hours: o.gpu_hours,
            slo_minutes: o.slo_violation_minutes,
            wake_max: o.wake_signal.iter().copied().fold(0.0, f64::max),
        }
    }

    /// No more GPU-hours and no more SLO-violation minutes than `other`.
    pub fn dominates(&self, other: &Point) -> bool {
        self.gpu_hours <= other.gpu_hours && self.slo_minutes <= other.slo_minutes
    }
}

/// KEDA at each cooldown; gpuscale at each grid point, through Prometheus
/// and with the activator.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    pub keda: Vec<Point>,
    pub prometheus: Vec<Point>,
    pub activator: Vec<Point>,
}

/// Replay every setting.
pub fn frontier(
    svc: &Service,
    arrivals: &[Arrival],
    k: &Knobs,
    cooldowns: &[u64],
    grid: &[Setting],
) -> Frontier {
    let keda = cooldowns
        .iter()
        .map(|c| {
            let k = Knobs { cooldown: *c, ..*k };
            Point::of(
                *c,
                0,
                IdleSignal::Rate,
                &replay(svc, arrivals, &mut k.keda()),
            )
        })
        .collect();
    // Settings a path cannot have (the activator's count without the
    // activator) are left out.
    let run = |activator: bool| -> Vec<Point> {
        grid.iter()
            .filter_map(|s| {
                let k = Knobs {
                    idle_for: s.idle_for,
                    min_up: s.min_up,
                    idle_signal: s.signal,
                    ..*k
                };
                let o = replay(svc, arrivals, &mut k.gpuscale(activator)?);
                Some(Point::of(s.idle_for, s.min_up, s.signal, &o))
            })
            .collect()
    };
    // The two grids are independent: one thread each.
    let (prometheus, activator) = std::thread::scope(|s| {
        let p = s.spawn(|| run(false));
        let a = run(true);
        (p.join(), a)
    });
    Frontier {
        keda,
        // A replay does not panic (its input is checked up front); if one
        // did, the panic carries on here.
        prometheus: prometheus.unwrap_or_else(|e| std::panic::resume_unwind(e)),
        activator,
    }
}

/// The gpuscale setting that dominates `keda` with the fewest GPU-hours
/// (ties: fewer violation minutes), if any.
pub fn best(points: &[Point], keda: &Point) -> Option<Point> {
    points
        .iter()
        .filter(|p| p.dominates(keda))
        .min_by(|a, b| {
            a.gpu_hours
                .total_cmp(&b.gpu_hours)
                .then(a.slo_minutes.cmp(&b.slo_minutes))
        })
        .copied()
}

/// The settings no other setting of `points` dominates with one of the two
/// strictly lower, by GPU-hours.
pub fn pareto(points: &[Point]) -> Vec<Point> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| {
        a.gpu_hours
            .total_cmp(&b.gpu_hours)
            .then(a.slo_minutes.cmp(&b.slo_minutes))
    });
    let mut out: Vec<Point> = Vec::new();
    for p in sorted {
        if out.last().is_none_or(|l| p.slo_minutes < l.slo_minutes) {
            out.push(p);
        }
    }
    out
}

/// Where nothing dominates `keda`: the fewest violation minutes within its
/// GPU-hours, and the fewest GPU-hours within its violation minutes.
pub fn nearest(points: &[Point], keda: &Point) -> (Option<Point>, Option<Point>) {
    let within_hours = points
        .iter()
        .filter(|p| p.gpu_hours <= keda.gpu_hours)
        .min_by(|a, b| {
            a.slo_minutes
                .cmp(&b.slo_minutes)
                .then(a.gpu_hours.total_cmp(&b.gpu_hours))
        });
    let within_minutes = points
        .iter()
        .filter(|p| p.slo_minutes <= keda.slo_minutes)
        .min_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
    (within_hours.copied(), within_minutes.copied())
}

fn cell(p: Option<Point>) -> String {
    p.map_or_else(
        || "none".to_string(),
        |p| {
            format!(
                "{}, idle {}s, minUp {}s: {:.2} GPU-h, {} min",
                p.signal.name(),
                p.knob,
                p.min_up,
                p.gpu_hours,
                p.slo_minutes
            )
        },
    )
}

/// One row per KEDA cooldown: KEDA's point and the dominating gpuscale
/// settings, with the activator and through Prometheus.
pub fn table(f: &Frontier) -> String {
    let mut s = format!(
        "{:>9} {:>7} {:>8} {:>9}  {:<60} {:<60}\n",
        "cooldown",
        "GPU-h",
        "SLO-min",
        "wake max",
        "gpuscale + activator",
        "gpuscale via Prometheus"
    );
    for kp in &f.keda {
        let _ = writeln!(
            s,
            "{:>8}s {:>7.2} {:>8} {:>8.0}s  {:<60} {:<60}",
            kp.knob,
            kp.gpu_hours,
            kp.slo_minutes,
            kp.wake_max,
            cell(best(&f.activator, kp)),
            cell(best(&f.prometheus, kp))
        );
    }
    for kp in &f.keda {
        for (path, points) in [
            ("+ activator", &f.activator),
            ("via Prometheus", &f.prometheus),
        ] {
            if best(points, kp).is_some() {
                continue;
            }
            let (hours, minutes) = nearest(points, kp);
            let _ = writeln!(
                s,
                "cooldown {}s, gpuscale {path}: none dominates; within KEDA's GPU-h the fewest minutes: {}; within KEDA's minutes the fewest GPU-h: {}",
                kp.knob,
                cell(hours),
                cell(minutes)
            );
        }
    }
    let wake = |ps: &[Point]| ps.iter().map(|p| p.wake_max).fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "longest wake signal (first held request → scale-up): gpuscale + activator {:.0}s, gpuscale via Prometheus {:.0}s, KEDA {:.0}s",
        wake(&f.activator),
        wake(&f.prometheus),
        wake(&f.keda)
    );
    s
}

/// The gpuscale settings searched: each idle signal, `idleFor` 0 to
/// 1800 s every 15 s, each with `minUpDuration` 0, 300, 600, 900 and
/// 1200 s.
pub fn grid() -> Vec<Setting> {
    let mut g = Vec::new();
    for signal in IdleSignal::ALL {
        for i in 0..=120 {
            for min_up in [0, 300, 600, 900, 1200] {
                g.push(Setting {
                    signal,
                    idle_for: 15 * i,
                    min_up,
                });
            }
        }
    }
    g
}

const W: f64 = 700.0;
const H: f64 = 420.0;
const PAD: f64 = 60.0;

/// GPU-hours (x) against SLO-violation minutes (y): KEDA per cooldown
/// (red dots), and each gpuscale path's Pareto-efficient settings, with
/// the activator (blue) and through Prometheus (grey). Down and left is
/// better.
pub fn svg(f: &Frontier) -> String {
    let all = || f.keda.iter().chain(&f.prometheus).chain(&f.activator);
    let max_x = all().map(|p| p.gpu_hours).fold(1.0, f64::max);
    let max_y = all().map(|p| f64::from(p.slo_minutes)).fold(1.0, f64::max);
    let xy = |p: &Point| {
        (
            PAD + (W - 2.0 * PAD) * p.gpu_hours / max_x,
            H - PAD - (H - 2.0 * PAD) * f64::from(p.slo_minutes) / max_y,
        )
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    let (x0, y0) = (PAD, H - PAD);
    let _ = writeln!(
        s,
        "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n<path d=\"M{x0},{PAD} L{x0},{y0} L{},{y0}\" fill=\"none\" stroke=\"#000\"/>",
        W - PAD
    );
    ticks(&mut s, max_x, max_y);
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPU-hours over the trace</text>",
        W / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        "<text x=\"15\" y=\"{}\" transform=\"rotate(-90 15 {})\" text-anchor=\"middle\">SLO-violation minutes</text>",
        H / 2.0,
        H / 2.0
    );
    for (points, colour, label, dy) in [
        (
            pareto(&f.prometheus),
            "#999",
            "gpuscale via Prometheus (Pareto-efficient settings)",
            20.0,
        ),
        (
            pareto(&f.activator),
            "#1f77b4",
            "gpuscale + activator (Pareto-efficient settings)",
            36.0,
        ),
    ] {
        series(&mut s, &points, colour, label, dy, &xy);
    }
    for p in &f.keda {
        let (x, y) = xy(p);
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#d62728\"><title>KEDA cooldown {}s</title></circle><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#d62728\">{}s</text>",
            p.knob,
            x + 6.0,
            y - 4.0,
            p.knob
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"52\" fill=\"#d62728\">KEDA, labelled with its cooldownPeriod</text>\n</svg>",
        PAD + 10.0
    );
    s
}

/// Five ticks on each axis, from 0 to the maximum.
fn ticks(s: &mut String, max_x: f64, max_y: f64) {
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let x = PAD + (W - 2.0 * PAD) * f;
        let y = H - PAD - (H - 2.0 * PAD) * f;
        let _ = writeln!(
            s,
            "<path d=\"M{x:.1},{} v5 M{PAD},{y:.1} h-5\" stroke=\"#000\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{:.1}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">{:.0}</text>",
            H - PAD,
            H - PAD + 16.0,
            max_x * f,
            PAD - 8.0,
            y + 3.0,
            max_y * f
        );
    }
}

/// One gpuscale path: its points joined by a line, and its legend.
fn series(
    s: &mut String,
    points: &[Point],
    colour: &str,
    label: &str,
    dy: f64,
    xy: &dyn Fn(&Point) -> (f64, f64),
) {
    let line: Vec<String> = points
        .iter()
        .map(|p| {
            let (x, y) = xy(p);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = writeln!(
        s,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\"/>",
        line.join(" ")
    );
    for p in points {
        let (x, y) = xy(p);
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{colour}\"><title>idle on {}, idleFor {}s, minUpDuration {}s</title></circle>",
            p.signal.name(),
            p.knob,
            p.min_up
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{dy}\" fill=\"{colour}\">{label}</text>",
        PAD + 10.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(knob: u64, gpu_hours: f64, slo_minutes: u32) -> Point {
        Point {
            knob,
            min_up: 0,
            signal: IdleSignal::Rate,
            gpu_hours,
            slo_minutes,
            wake_max: 0.0,
        }
    }

    #[test]
    fn pareto_keeps_the_settings_nothing_beats() {
        let points = [
            p(1, 5.0, 10),
            p(2, 4.0, 12),
            p(3, 6.0, 10),
            p(4, 7.0, 3),
            p(5, 4.0, 11),
        ];
        let knobs: Vec<u64> = pareto(&points).iter().map(|p| p.knob).collect();
        assert_eq!(knobs, [5, 1, 4]);
    }

    #[test]
    fn nearest_answers_on_each_axis_where_nothing_dominates() {
        let keda = p(0, 5.0, 10);
        let points = [p(1, 4.0, 12), p(2, 4.5, 11), p(3, 6.0, 9), p(4, 5.5, 10)];
        assert!(best(&points, &keda).is_none());
        let (hours, minutes) = nearest(&points, &keda);
        assert_eq!(
            hours.map(|p| p.knob),
            Some(2),
            "fewest minutes within 5 GPU-h"
        );
        assert_eq!(
            minutes.map(|p| p.knob),
            Some(4),
            "fewest GPU-h within 10 min"
        );
        assert_eq!(nearest(&[p(1, 9.0, 20)], &keda), (None, None));
    }
}
