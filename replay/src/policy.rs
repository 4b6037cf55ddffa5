//! The scaling policies compared: static, the HPA's documented algorithm,
//! KEDA's defaults, and gpuscale's scale-to-zero controller (its own
//! `decide`) with the HPA above it.

use std::collections::VecDeque;
use std::time::Duration;

use gpuscale_decide::{self as decide, Action, Memory, Observed, Read, Rules, Target};

use crate::idle::IdleSignal;
use crate::sim::{Policy, Signals};

/// A fixed replica count.
pub struct Static {
    pub label: &'static str,
    pub replicas: i32,
}

impl Policy for Static {
    fn name(&self) -> String {
        format!("{} ({})", self.label, self.replicas)
    }
    fn initial(&self) -> i32 {
        self.replicas
    }
    fn step(&mut self, _: &Signals) -> i32 {
        self.replicas
    }
}

/// The HorizontalPodAutoscaler on an `AverageValue` external metric
/// (in-flight requests), with the default behavior: 15 s sync, 10 %
/// tolerance, no scale-up stabilization, 300 s scale-down stabilization,
/// scale-up by max(100 %, 4 pods) and scale-down by 100 % per 15 s.
pub struct Hpa {
    /// Target average value per replica.
    pub target: f64,
    pub min: i32,
    pub max: i32,
    pub tolerance: f64,
    pub sync: i64,
    pub down_window: i64,
    recommendations: VecDeque<(i64, i32)>,
}

impl Hpa {
    pub fn new(target: f64, min: i32, max: i32) -> Self {
        Self {
            target,
            min,
            max,
            tolerance: 0.1,
            sync: 15,
            down_window: 300,
            recommendations: VecDeque::new(),
        }
    }

    /// The replica calculator for an external `AverageValue` metric: keep
    /// `current` within tolerance, else `ceil(metric / target)`. From zero
    /// replicas a positive metric scales up, a zero one stays (0/0).
    pub fn raw(&self, current: i32, metric: f64) -> i32 {
        let ratio = metric / (self.target * f64::from(current));
        if (1.0 - ratio).abs() > self.tolerance {
            (metric / self.target).ceil() as i32
        } else {
            current
        }
    }

    /// One sync: raw recommendation, stabilized, rate-limited, clamped.
    pub fn sync_once(&mut self, now: i64, current: i32, metric: f64) -> i32 {
        let raw = self.raw(current, metric);
        while self
            .recommendations
            .front()
            .is_some_and(|(t, _)| *t <= now - self.down_window)
        {
            self.recommendations.pop_front();
        }
        let down = self.recommendations.iter().map(|r| r.1).fold(raw, i32::max);
        self.recommendations.push_back((now, raw));
        let stabilized = current.max(raw).min(down);
        let up_limit = (current * 2).max(current + 4);
        stabilized.min(up_limit).clamp(self.min, self.max)
    }

    /// Act on sync ticks only; an HPA with `minReplicas ≥ 1` is disabled
    /// while its target is at zero.
    pub fn tick(&mut self, s: &Signals) -> i32 {
        if s.now % self.sync != 0 || (s.replicas == 0 && self.min > 0) {
            return s.replicas;
        }
        self.sync_once(s.now, s.replicas, s.in_flight)
    }
}

impl Policy for Hpa {
    fn name(&self) -> String {
        format!("HPA (min {})", self.min)
    }
    fn initial(&self) -> i32 {
        self.min.max(1)
    }
    fn step(&mut self, s: &Signals) -> i32 {
        self.tick(s)
    }
}

/// KEDA's ScaledObject defaults: polls every 30 s, wakes from zero when the
/// metric is above the activation threshold, returns to zero 300 s after the
/// last active poll; its HPA (minReplicas 1) scales above zero.
pub struct Keda {
    pub polling: i64,
    pub cooldown: i64,
    pub activation: f64,
    pub hpa: Hpa,
    last_active: Option<i64>,
}

impl Keda {
    pub fn new(hpa: Hpa, activation: f64, cooldown: i64) -> Self {
        Self {
            polling: 30,
            cooldown,
            activation,
            hpa,
            last_active: None,
        }
    }
}

impl Policy for Keda {
    fn name(&self) -> String {
        format!("KEDA (cooldown {}s)", self.cooldown)
    }
    fn initial(&self) -> i32 {
        1
    }
    fn step(&mut self, s: &Signals) -> i32 {
        let since = *self.last_active.get_or_insert(s.now);
        if s.now % self.polling == 0 {
            if s.in_flight > self.activation {
                self.last_active = Some(s.now);
                if s.replicas == 0 {
                    return 1;
                }
            } else if s.replicas > 0 && s.now - since >= self.cooldown {
                return 0;
            }
        }
        self.hpa.tick(s)
    }
}

/// gpuscale's scale-to-zero controller: every `sync` seconds it calls the
/// adapter's own [`decide::decide`] with the idle read (its `idle` signal)
/// and the activation read (in-flight requests, which include those queued
/// while parked); the HPA scales above zero. An activator's wake reaches
/// `decide` as a scale it did not make (`ExternallyWoken`).
pub struct Gpuscale {
    pub rules: Rules,
    pub idle: IdleSignal,
    pub sync: i64,
    pub hpa: Hpa,
    memory: Memory,
}

impl Gpuscale {
    pub fn new(hpa: Hpa, rules: Rules, idle: IdleSignal, sync: i64) -> Self {
        Self {
            rules,
            idle,
            sync,
            hpa,
            memory: Memory::default(),
        }
    }

    /// Rules from the replay's flags (idle at a read of 0).
    pub fn rules(idle_for: u64, activation: f64, min_up: u64) -> Rules {
        Rules {
            idle_threshold: 0.0,
            idle_for: Duration::from_secs(idle_for),
            activation_threshold: activation,
            min_up: Duration::from_secs(min_up),
            wake_replicas: 1,
            paused: false,
        }
    }
}

impl Policy for Gpuscale {
    fn name(&self) -> String {
        format!(
            "gpuscale (idle {}s on {})",
            self.rules.idle_for.as_secs(),
            self.idle.name()
        )
    }
    fn initial(&self) -> i32 {
        1
    }
    fn step(&mut self, s: &Signals) -> i32 {
        if s.now % self.sync == 0 {
            let seen = Observed {
                now: s.now,
                idle: Read::Value(self.idle.read(s)),
                activation: Read::Value(s.in_flight),
                target: Target {
                    replicas: s.replicas,
                    ready: s.ready,
                },
                hpa_owns_zero: None,
            };
            let d = decide::decide(&self.rules, &seen, self.memory);
            self.memory = d.memory;
            match d.action {
                Action::Park { .. } => return 0,
                Action::Wake { to } => return to,
                Action::Nothing => {}
            }
        }
        self.hpa.tick(s)
    }
}
