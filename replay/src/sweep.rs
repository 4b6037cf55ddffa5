//! `--sweep NAME=V1,V2,…`: the saving/SLO curve over one knob, checked
//! whole before anything is replayed.

use std::fmt::Write as _;
use std::time::Duration;

use crate::compare::Knobs;
use crate::limits;
use crate::model::Service;
use crate::sim::{Outcome, replay};
use crate::trace::Arrival;

/// The knob a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    IdleFor,
    Cooldown,
    Activation,
}

/// A checked `--sweep`: the knob and each value as written and as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub knob: Knob,
    pub values: Vec<(String, f64)>,
}

impl Sweep {
    /// Every value is read here, so a bad name or value fails before any
    /// replay.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (name, values) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?}: expected NAME=V1,V2,… (e.g. idle-for=1m,5m,10m)"))?;
        let knob = match name.trim() {
            "idle-for" => Knob::IdleFor,
            "cooldown" => Knob::Cooldown,
            "activation" => Knob::Activation,
            other => {
                return Err(format!(
                    "unknown knob {other:?}: expected idle-for, cooldown or activation"
                ));
            }
        };
        let values = values
            .split(',')
            .map(|v| Ok((v.trim().to_string(), knob.read(v.trim())?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self { knob, values })
    }

    pub fn name(&self) -> &'static str {
        match self.knob {
            Knob::IdleFor => "idle-for",
            Knob::Cooldown => "cooldown",
            Knob::Activation => "activation",
        }
    }

    /// KEDA and gpuscale (both paths) at each value, with the saving
    /// against `peak` GPU-hours.
    pub fn run(&self, svc: &Service, arrivals: &[Arrival], k: Knobs, peak: f64) -> String {
        let mut rows = Vec::new();
        for (text, x) in &self.values {
            let k = self.knob.set(k, *x);
            rows.push((text, replay(svc, arrivals, &mut k.keda())));
            for activator in [false, true] {
                if let Some(mut g) = k.gpuscale(activator) {
                    rows.push((text, replay(svc, arrivals, &mut g)));
                }
            }
        }
        table(self.name(), peak, &rows)
    }
}

impl Knob {
    /// A duration for the two windows (whole seconds, at most 366 days), a
    /// request count (0 or more) for the activation threshold.
    fn read(self, v: &str) -> Result<f64, String> {
        if self == Knob::Activation {
            return v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    format!("activation {v:?}: expected a number of requests, 0 or more")
                });
        }
        let max = Duration::from_secs(limits::MAX_SECONDS);
        let d = gpuscale_util::duration::parse_within(v, Duration::ZERO, max)
            .map_err(|e| e.to_string())?;
        if d.subsec_nanos() != 0 {
            return Err(format!("{v:?} is not a whole number of seconds"));
        }
        Ok(d.as_secs_f64())
    }

    fn set(self, mut k: Knobs, x: f64) -> Knobs {
        match self {
            Knob::IdleFor => k.idle_for = x as u64,
            Knob::Cooldown => k.cooldown = x as u64,
            Knob::Activation => k.activation = x,
        }
        k
    }
}

fn table(name: &str, peak: f64, rows: &[(&String, Outcome)]) -> String {
    let vw = rows
        .iter()
        .map(|r| r.0.len())
        .chain([name.len()])
        .max()
        .unwrap_or(0);
    let pw = crate::report::policy_width(rows.iter().map(|r| &r.1));
    let mut s = format!("sweep {name}: saving vs static at peak ({peak:.2} GPU-h)\n");
    let _ = writeln!(
        s,
        "{name:>vw$} {:<pw$} {:>9} {:>8} {:>8} {:>7}",
        "policy", "GPU-h", "saving", "SLO-min", "cold"
    );
    for (v, o) in rows {
        let _ = writeln!(
            s,
            "{v:>vw$} {:<pw$} {:>9.2} {:>7.1}% {:>8} {:>7}",
            o.policy,
            o.gpu_hours,
            100.0 * (1.0 - o.gpu_hours / peak),
            o.slo_violation_minutes,
            o.cold_waiters
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_checked_whole() {
        let s = Sweep::parse("idle-for=1m,5m").expect("valid");
        assert_eq!(s.knob, Knob::IdleFor);
        assert_eq!(s.values[1], ("5m".to_string(), 300.0));
        let e = Sweep::parse("idle_for=60").unwrap_err();
        assert!(e.contains("\"idle_for\"") && e.contains("idle-for"), "{e}");
        let e = Sweep::parse("cooldown=1m,60").unwrap_err();
        assert!(e.contains("no unit"), "{e}");
        assert!(Sweep::parse("activation=0,1.5").is_ok());
        assert!(Sweep::parse("activation=-1").is_err());
        assert!(Sweep::parse("idle-for").is_err());
    }
}
