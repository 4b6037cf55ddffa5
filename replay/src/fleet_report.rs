//! The fleet's tables and its frontier: KEDA per cooldown on dedicated
//! GPUs against the sleep tier on shared ones.

use std::fmt::Write as _;

use crate::compare::Knobs;
use crate::fleet::{self, Dedicated, FleetModel};
use crate::idle::IdleSignal;
use crate::model::Service;
use crate::shared::SharedOutcome;
use crate::sleep::Tier;

/// A fleet total: GPU-hours and SLO-violation minutes.
#[derive(Debug, Clone, PartialEq)]
pub struct Total {
    pub label: String,
    pub gpu_hours: f64,
    pub slo_minutes: u32,
    pub cold_waits: u32,
}

impl Total {
    pub fn of(d: &Dedicated) -> Self {
        Self {
            label: d.policy.clone(),
            gpu_hours: d.gpu_hours(),
            slo_minutes: d.slo_violation_minutes(),
            cold_waits: d.cold_waits(),
        }
    }
}

/// KEDA per cooldown and dedicated gpuscale per setting (totals), and
/// the shared sleep tier per setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    pub keda: Vec<(u64, Total)>,
    pub gpuscale: Vec<((IdleSignal, u64), Total)>,
    pub shared: Vec<SharedOutcome>,
}

/// The settings searched: the shared tier's and dedicated gpuscale's.
pub struct Grid<'a> {
    pub shared: &'a [Tier],
    pub gpuscale: &'a [(IdleSignal, u64)],
}

/// Replay every setting: dedicated on one thread, shared on another.
pub fn frontier(
    svc: &Service,
    models: &[FleetModel],
    k: &Knobs,
    cooldowns: &[u64],
    grid: &Grid,
) -> Frontier {
    let dedicated = || {
        let keda = cooldowns
            .iter()
            .map(|c| (*c, Total::of(&fleet::keda(svc, models, k, *c))))
            .collect();
        let gpuscale = grid
            .gpuscale
            .iter()
            .filter_map(|s| Some((*s, Total::of(&fleet::gpuscale(svc, models, k, *s)?))))
            .collect();
        (keda, gpuscale)
    };
    let (ded, shared) = std::thread::scope(|s| {
        let d = s.spawn(dedicated);
        let shared: Vec<SharedOutcome> = grid
            .shared
            .iter()
            .map(|t| fleet::shared(svc, models, t))
            .collect();
        (d.join(), shared)
    });
    // A replay does not panic (its input is checked up front); if one
    // did, the panic carries on here.
    let (keda, gpuscale) = ded.unwrap_or_else(|e| std::panic::resume_unwind(e));
    Frontier {
        keda,
        gpuscale,
        shared,
    }
}

/// The shared setting with at most half of `keda`'s GPU-hours and no
/// more SLO-violation minutes, the fewest GPU-hours (ties: minutes).
pub fn best<'a>(shared: &'a [SharedOutcome], keda: &Total) -> Option<&'a SharedOutcome> {
    shared
        .iter()
        .filter(|s| {
            s.gpu_hours <= keda.gpu_hours / 2.0 && s.slo_violation_minutes() <= keda.slo_minutes
        })
        .min_by(|a, b| {
            a.gpu_hours
                .total_cmp(&b.gpu_hours)
                .then(a.slo_violation_minutes().cmp(&b.slo_violation_minutes()))
        })
}

/// Within half of `keda`'s GPU-hours, the fewest minutes.
pub fn nearest<'a>(shared: &'a [SharedOutcome], keda: &Total) -> Option<&'a SharedOutcome> {
    shared
        .iter()
        .filter(|s| s.gpu_hours <= keda.gpu_hours / 2.0)
        .min_by(|a, b| {
            a.slo_violation_minutes()
                .cmp(&b.slo_violation_minutes())
                .then(a.gpu_hours.total_cmp(&b.gpu_hours))
        })
}

/// The longest wait of a request that found its model asleep with the
/// VRAM free, over the fleet, seconds.
pub fn wake_wait_max(s: &SharedOutcome) -> f64 {
    s.models.iter().map(|m| m.wake_wait_max).fold(0.0, f64::max)
}

/// The same for the wakes that first waited for a neighbour's sleep.
pub fn evicted_wait_max(s: &SharedOutcome) -> f64 {
    s.models
        .iter()
        .map(|m| m.evicted_wait_max)
        .fold(0.0, f64::max)
}

fn cell(s: Option<&SharedOutcome>) -> String {
    s.map_or_else(
        || "none".to_string(),
        |s| {
            format!(
                "{}: {:.2} GPU-h, {} min, wake wait max {:.1}s",
                s.tier.name(),
                s.gpu_hours,
                s.slo_violation_minutes(),
                wake_wait_max(s)
            )
        },
    )
}

/// One row per KEDA cooldown: its totals, half its GPU-hours, whether the
/// target holds, the cheapest shared setting that meets it and, within
/// half the GPU-hours, the one with the fewest minutes.
pub fn frontier_table(f: &Frontier) -> String {
    let mut s = format!(
        "{:>9} {:>8} {:>8} {:>8}  {:<6}  {:<70}  {}\n",
        "cooldown",
        "GPU-h",
        "SLO-min",
        "half",
        "target",
        "cheapest shared setting meeting it",
        "within half the GPU-h, the fewest minutes"
    );
    for (c, kp) in &f.keda {
        let b = best(&f.shared, kp);
        let _ = writeln!(
            s,
            "{:>8}s {:>8.2} {:>8} {:>8.2}  {:<6}  {:<70}  {}",
            c,
            kp.gpu_hours,
            kp.slo_minutes,
            kp.gpu_hours / 2.0,
            if b.is_some() { "holds" } else { "fails" },
            cell(b),
            cell(nearest(&f.shared, kp))
        );
    }
    let wake = f.shared.iter().map(wake_wait_max).fold(0.0, f64::max);
    let evicted = f.shared.iter().map(evicted_wait_max).fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "longest wait of a request that found its model asleep, over all shared settings: {wake:.1}s with the VRAM free, {evicted:.1}s when a neighbour had to sleep first"
    );
    s
}

/// One row per model and a total: dedicated KEDA and gpuscale, and the
/// shared sleep tier.
pub fn fleet_table(
    models: &[FleetModel],
    keda: &Dedicated,
    gpuscale: &Dedicated,
    shared: &SharedOutcome,
) -> String {
    let mut s = format!(
        "dedicated GPUs: {} | {}; shared: {}\n{:<9} {:>6} {:>6} {:>6} | {:>6} {:>5} {:>5} | {:>6} {:>5} {:>5} | {:>6} {:>7} {:>5} {:>5} {:>6} {:>6}\n",
        keda.policy,
        gpuscale.policy,
        shared.tier.name(),
        "model",
        "reqs",
        "keep",
        "shift",
        "GPU-h",
        "SLO",
        "cold",
        "GPU-h",
        "SLO",
        "cold",
        "awakeh",
        "asleeph",
        "SLO",
        "cold",
        "asleep",
        "wakemx"
    );
    let rows = models
        .iter()
        .zip(&keda.models)
        .zip(&gpuscale.models)
        .zip(&shared.models);
    for (((m, k), g), sh) in rows {
        let _ = writeln!(
            s,
            "{:<9} {:>6} {:>6} {:>5.1}h | {:>6.2} {:>5} {:>5} | {:>6.2} {:>5} {:>5} | {:>6.2} {:>7.2} {:>5} {:>5} {:>6} {:>5.1}s",
            m.name,
            m.arrivals.len(),
            m.keep,
            m.shift / 3600.0,
            k.gpu_hours,
            k.slo_violation_minutes,
            k.cold_waiters,
            g.gpu_hours,
            g.slo_violation_minutes,
            g.cold_waiters,
            sh.awake_hours,
            sh.asleep_hours,
            sh.slo_violation_minutes,
            sh.cold_waits,
            sh.sleep_waits,
            sh.wake_wait_max
        );
    }
    let requests: usize = models.iter().map(|m| m.arrivals.len()).sum();
    let _ = writeln!(
        s,
        "{:<9} {:>6} {:>6} {:>6} | {:>6.2} {:>5} {:>5} | {:>6.2} {:>5} {:>5} | {:>6.2} GPU-h on {} shared GPU(s) {:>5} {:>5} {:>6}",
        "total",
        requests,
        "",
        "",
        keda.gpu_hours(),
        keda.slo_violation_minutes(),
        keda.cold_waits(),
        gpuscale.gpu_hours(),
        gpuscale.slo_violation_minutes(),
        gpuscale.cold_waits(),
        shared.gpu_hours,
        shared.tier.gpus,
        shared.slo_violation_minutes(),
        shared.models.iter().map(|m| m.cold_waits).sum::<u32>(),
        shared.models.iter().map(|m| m.sleep_waits).sum::<u32>()
    );
    s
}
