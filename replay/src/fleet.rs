//! A fleet of long-tail models, each with its own trace derived from the
//! input traces, on dedicated GPUs (KEDA or gpuscale parking each at zero)
//! against shared GPUs with the sleep tier; and the frontier: for each
//! KEDA `cooldownPeriod`, the shared settings with at most half its
//! GPU-hours and no more SLO-violation minutes.

use crate::compare::Knobs;
use crate::idle::IdleSignal;
use crate::model::{Arrival, Service};
use crate::shared::{self, SharedOutcome};
use crate::sim::{self, Outcome, Policy};
use crate::sleep::{Level, Tier};

/// The fraction of requests model `i` keeps: `KEEPS[i mod 4]`.
pub const KEEPS: [f64; 4] = [0.01, 0.005, 0.02, 0.0025];

/// One model of the fleet and how its trace was derived.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetModel {
    pub name: String,
    /// Rows `phase, phase + k, phase + 2k, …` of each input, k = round(1 / keep).
    pub keep: f64,
    pub phase: usize,
    /// Seconds its stretched trace is rotated by (wrapping within the span).
    pub shift: f64,
    pub arrivals: Vec<Arrival>,
}

/// `n` models from `inputs` (sorted, non-empty): model `i` keeps
/// `KEEPS[i mod 4]` of the rows from row `i`, stretched by `stretch`
/// and rotated by `i / n` of the span, so their busy hours differ.
pub fn models(inputs: &[Vec<Arrival>], n: usize, stretch: f64) -> Vec<FleetModel> {
    let first = inputs.iter().filter_map(|v| v.first()).map(|a| a.t);
    let t0 = first.fold(f64::INFINITY, f64::min);
    let last = inputs.iter().filter_map(|v| v.last()).map(|a| a.t);
    let span = ((last.fold(t0, f64::max) - t0) * stretch).ceil().max(1.0);
    (0..n)
        .map(|i| {
            let keep = KEEPS[i % KEEPS.len()];
            let shift = (span * i as f64 / n as f64).round();
            FleetModel {
                name: format!("model-{i}"),
                keep,
                phase: i,
                shift,
                arrivals: derive(inputs, keep, i, (t0, span, stretch, shift)),
            }
        })
        .collect()
}

/// One model's rows, stretched from `t0` and rotated by `shift` within
/// `span`; millisecond timestamps, sorted.
fn derive(
    inputs: &[Vec<Arrival>],
    keep: f64,
    phase: usize,
    (t0, span, stretch, shift): (f64, f64, f64, f64),
) -> Vec<Arrival> {
    let k = (1.0 / keep).round().max(1.0) as usize;
    let mut out: Vec<Arrival> = inputs
        .iter()
        .flat_map(|v| v.iter().skip(phase % k).step_by(k).copied())
        .map(|mut a| {
            let t = ((a.t - t0) * stretch + shift).rem_euclid(span);
            a.t = ((t0 + t) * 1000.0).round() / 1000.0;
            a
        })
        .collect();
    out.sort_by(|a, b| a.t.total_cmp(&b.t));
    out
}

/// Each model on its own GPUs under its own copy of one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Dedicated {
    pub policy: String,
    pub models: Vec<Outcome>,
}

impl Dedicated {
    pub fn gpu_hours(&self) -> f64 {
        self.models.iter().map(|o| o.gpu_hours).sum()
    }
    pub fn slo_violation_minutes(&self) -> u32 {
        self.models.iter().map(|o| o.slo_violation_minutes).sum()
    }
    pub fn cold_waits(&self) -> u32 {
        self.models.iter().map(|o| o.cold_waiters).sum()
    }
}

/// Replay every model under a fresh policy from `policy`.
pub fn dedicated<P: Policy>(
    svc: &Service,
    fleet: &[FleetModel],
    policy: impl Fn() -> P,
) -> Dedicated {
    let models: Vec<Outcome> = fleet
        .iter()
        .map(|m| sim::replay(svc, &m.arrivals, &mut policy()))
        .collect();
    Dedicated {
        policy: models
            .first()
            .map_or_else(String::new, |o| o.policy.clone()),
        models,
    }
}

/// KEDA on dedicated GPUs at `cooldown` seconds.
pub fn keda(svc: &Service, fleet: &[FleetModel], k: &Knobs, cooldown: u64) -> Dedicated {
    let k = Knobs { cooldown, ..*k };
    dedicated(svc, fleet, || k.keda())
}

/// gpuscale with the activator on dedicated GPUs (idle on `signal` for
/// `idle_for` seconds).
pub fn gpuscale(
    svc: &Service,
    fleet: &[FleetModel],
    k: &Knobs,
    (signal, idle_for): (IdleSignal, u64),
) -> Option<Dedicated> {
    let k = Knobs {
        idle_signal: signal,
        idle_for,
        ..*k
    };
    k.gpuscale(true)?;
    Some(dedicated(svc, fleet, || {
        k.gpuscale(true)
            .unwrap_or_else(|| unreachable!("checked above"))
    }))
}

/// The fleet on shared GPUs with the sleep tier.
pub fn shared(svc: &Service, fleet: &[FleetModel], tier: &Tier) -> SharedOutcome {
    let traces: Vec<Vec<Arrival>> = fleet.iter().map(|m| m.arrivals.clone()).collect();
    shared::replay(svc, tier, &traces)
}

/// `sleep.after` values the frontier searches, seconds.
pub const AFTERS: [u64; 7] = [0, 15, 30, 60, 120, 300, 600];
/// The zero stage's `idleFor` values it searches (`None`: never).
pub const ZEROS: [Option<u64>; 5] = [None, Some(60), Some(300), Some(900), Some(1800)];

/// The sleep-tier settings the frontier searches: [`AFTERS`] × level 1
/// and 2 × [`ZEROS`] × 1, 2 and 4 shared GPUs (those the fleet fits on and
/// has models for); timings, VRAM and sync of `base`.
pub fn grid(base: &Tier, models: usize) -> Vec<Tier> {
    let mut g = Vec::new();
    for gpus in [1, 2, 4] {
        for level in [Level::One, Level::Two] {
            for zero_after in ZEROS {
                for after in AFTERS {
                    let t = Tier {
                        after,
                        level,
                        gpus,
                        zero_after,
                        ..*base
                    };
                    if gpus as usize <= models && t.check(models).is_ok() {
                        g.push(t);
                    }
                }
            }
        }
    }
    g
}

/// The dedicated gpuscale settings drawn beside: idle on the in-flight
/// count or the activator's, `idleFor` 0 to 30 min every 2 minutes.
pub fn gpuscale_grid() -> Vec<(IdleSignal, u64)> {
    let mut g = Vec::new();
    for signal in [IdleSignal::InFlight, IdleSignal::Activator] {
        for i in 0..=15 {
            g.push((signal, 120 * i));
        }
    }
    g
}
