//! The Pareto frontier against KEDA: for each KEDA `cooldownPeriod`, the
//! gpuscale settings (an `idleFor` × `minUpDuration` grid) with no more
//! GPU-hours and no more SLO-violation minutes, and how long a cold
//! request's wake signal took.

use std::fmt::Write as _;

use crate::compare::Knobs;
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
    pub gpu_hours: f64,
    pub slo_minutes: u32,
    /// The longest wake signal (first held request → scale-up), seconds.
    pub wake_max: f64,
}

impl Point {
    fn of(knob: u64, min_up: u64, o: &Outcome) -> Self {
        Self {
            knob,
            min_up,
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
    grid: &[(u64, u64)],
) -> Frontier {
    let keda = cooldowns
        .iter()
        .map(|c| {
            let k = Knobs { cooldown: *c, ..*k };
            Point::of(*c, 0, &replay(svc, arrivals, &mut k.keda()))
        })
        .collect();
    let run = |activator: bool| -> Vec<Point> {
        grid.iter()
            .map(|(idle_for, min_up)| {
                let k = Knobs {
                    idle_for: *idle_for,
                    min_up: *min_up,
                    ..*k
                };
                let o = replay(svc, arrivals, &mut k.gpuscale(activator));
                Point::of(*idle_for, *min_up, &o)
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

fn cell(p: Option<Point>) -> String {
    p.map_or_else(
        || "none".to_string(),
        |p| {
            format!(
                "idle {}s, minUp {}s: {:.2} GPU-h, {} min",
                p.knob, p.min_up, p.gpu_hours, p.slo_minutes
            )
        },
    )
}

/// One row per KEDA cooldown: KEDA's point and the dominating gpuscale
/// settings, with the activator and through Prometheus.
pub fn table(f: &Frontier) -> String {
    let mut s = format!(
        "{:>9} {:>7} {:>8} {:>9}  {:<48} {:<48}\n",
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
            "{:>8}s {:>7.2} {:>8} {:>8.0}s  {:<48} {:<48}",
            kp.knob,
            kp.gpu_hours,
            kp.slo_minutes,
            kp.wake_max,
            cell(best(&f.activator, kp)),
            cell(best(&f.prometheus, kp))
        );
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

/// The gpuscale settings searched: `idleFor` 0 to 1800 s every 60 s, each
/// with `minUpDuration` 0, 300, 600, 900 and 1200 s.
pub fn grid() -> Vec<(u64, u64)> {
    (0..=30)
        .flat_map(|i| [0, 300, 600, 900, 1200].map(|m| (60 * i, m)))
        .collect()
}

const W: f64 = 700.0;
const H: f64 = 420.0;
const PAD: f64 = 60.0;

/// GPU-hours (x) against SLO-violation minutes (y): KEDA per cooldown
/// (red dots), gpuscale per `idleFor` with the activator (blue) and
/// through Prometheus (grey). Down and left is better.
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
        "<path d=\"M{x0},{} L{x0},{y0} L{},{y0}\" fill=\"none\" stroke=\"#000\"/>",
        PAD,
        W - PAD
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPU-hours (0 to {max_x:.1})</text>",
        W / 2.0,
        H - 20.0
    );
    let _ = writeln!(
        s,
        "<text x=\"15\" y=\"{}\" transform=\"rotate(-90 15 {})\" text-anchor=\"middle\">SLO-violation minutes (0 to {max_y})</text>",
        H / 2.0,
        H / 2.0
    );
    for (points, colour, label, dy) in [
        (
            &f.prometheus,
            "#999",
            "gpuscale via Prometheus (one dot per setting)",
            20.0,
        ),
        (
            &f.activator,
            "#1f77b4",
            "gpuscale + activator (one dot per setting)",
            36.0,
        ),
    ] {
        for p in points.iter() {
            let (x, y) = xy(p);
            let _ = writeln!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{colour}\"><title>idleFor {}s, minUpDuration {}s</title></circle>",
                p.knob, p.min_up
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{dy}\" fill=\"{colour}\">{label}</text>",
            W - 300.0
        );
    }
    for p in &f.keda {
        let (x, y) = xy(p);
        let _ = writeln!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#d62728\"><title>KEDA cooldown {}s</title></circle>",
            p.knob
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"52\" fill=\"#d62728\">KEDA (one dot per cooldownPeriod)</text>\n</svg>",
        W - 300.0
    );
    s
}
