//! The controller's decisions, pure over their inputs: what a policy should
//! do now given the reads, the target's state and what it remembers. No I/O,
//! no clock: the reconciler gathers [`Observed`], calls [`decide`], applies
//! the [`Action`] and writes the [`Decision`] back into the status.
//!
//! A crate of its own so that what-if replays (`gpuscale-replay`) run the
//! controller's own decisions without linking the Kubernetes client, gRPC
//! or TLS: its only dependencies are serde and schemars (the [`Phase`] and
//! [`ReadState`] it decides are fields of the `ScaleToZeroPolicy` status).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The policy's lifecycle, as `kubectl get` shows it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// The target runs; the idle window is watched.
    Active,
    /// The target is at 0 replicas; activation is watched.
    Parked,
    /// The target was woken and has no Ready pod yet.
    Waking,
}

/// The state of one read of a rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReadState {
    Active,
    Inactive,
    /// Prometheus failed, the value is stale, NaN, or missing: never idle.
    Unknown,
}

/// One read of a rule, from the adapter's poll cache.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// A good value.
    Value(f64),
    /// Prometheus failed or timed out, the value is stale, NaN or ±Inf, or
    /// the result is empty under policy `error`. Never idle, never active.
    Unknown(String),
}

/// A rule's settings, parsed from the spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Idle while the idle read is at or below this.
    pub idle_threshold: f64,
    /// How long idle must hold on good reads.
    pub idle_for: Duration,
    /// Active while the activation read is above this.
    pub activation_threshold: f64,
    /// Stay up at least this long after a wake.
    pub min_up: Duration,
    /// Replicas to wake to (already defaulted from an HPA's minReplicas or 1).
    pub wake_replicas: i32,
    pub paused: bool,
}

/// The scale target as the scale subresource reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// `spec.replicas` of the scale subresource.
    pub replicas: i32,
    /// Ready pods (the workload's `status.readyReplicas`).
    pub ready: i32,
}

/// What the reconciler saw this round. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub now: i64,
    pub idle: Read,
    pub activation: Read,
    pub target: Target,
    /// An HPA with `minReplicas: 0` on the same target (its name): it owns
    /// zero, and two owners of zero must not fight.
    pub hpa_owns_zero: Option<String>,
}

/// What the policy remembers between rounds (kept in its status and the
/// target's annotation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Start of the current idle window.
    pub idle_since: Option<i64>,
    /// The last wake.
    pub last_wake: Option<i64>,
    /// Replicas recorded when the target was parked.
    pub parked_from: Option<i32>,
    /// Woken and no pod has been Ready since (the last phase was Waking):
    /// a later loss of every Ready pod is not a wake that hangs.
    pub waking: bool,
    /// Parked by this controller and not woken by it since: a target seen
    /// up while this holds was woken by someone else.
    pub parked: bool,
    /// Since when the activation rule has read unknown, while it does
    /// (kept by the controller's `unknown` module).
    pub activation_unknown_since: Option<i64>,
}

/// The scale change to make, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Set replicas to 0, recording `from`.
    Park {
        from: i32,
    },
    /// Set replicas to `to`.
    Wake {
        to: i32,
    },
}

/// Why a decision was taken or refused; the status `reason`, the Event
/// reason and the `refusals` self-metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Paused,
    HpaOwnsZero,
    /// The idle window is open and has not yet held for its duration.
    IdleWindowOpen,
    /// A read of the idle rule was not idle (busy, or activation active).
    Busy,
    /// A read was unknown: the idle window restarts.
    ReadUnknown,
    MinUpDuration,
    PodsNotReady,
    Parked,
    StillIdle,
    ActivationUnknown,
    Woken,
    /// A target at 0 that this controller did not park is not woken
    /// unless the policy opts in (`wake.fromManualZero`).
    ManualZero,
    /// A parked target was scaled up by someone else (an activator,
    /// GitOps, an operator): counted as a wake.
    ExternallyWoken,
    /// Woken because activation read unknown for `activation.unknownAfter`
    /// (fail-open).
    ActivationUnknownTooLong,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Paused => "Paused",
            Reason::HpaOwnsZero => "HPAOwnsZero",
            Reason::IdleWindowOpen => "IdleWindowOpen",
            Reason::Busy => "Busy",
            Reason::ReadUnknown => "ReadUnknown",
            Reason::MinUpDuration => "MinUpDuration",
            Reason::PodsNotReady => "PodsNotReady",
            Reason::Parked => "Parked",
            Reason::StillIdle => "StillIdle",
            Reason::ActivationUnknown => "ActivationUnknown",
            Reason::Woken => "Woken",
            Reason::ExternallyWoken => "ExternallyWoken",
            Reason::ManualZero => "ManualZero",
            Reason::ActivationUnknownTooLong => "ActivationUnknownTooLong",
        }
    }
}

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub phase: Phase,
    pub reason: Reason,
    pub message: String,
    /// Memory for the next round.
    pub memory: Memory,
    pub idle_state: ReadState,
    pub activation_state: ReadState,
}

fn idle_state(read: &Read, threshold: f64) -> ReadState {
    match read {
        Read::Value(v) if *v <= threshold => ReadState::Inactive,
        Read::Value(_) => ReadState::Active,
        Read::Unknown(_) => ReadState::Unknown,
    }
}

/// Active above the threshold; unknown reads are neither.
pub fn activation_state(read: &Read, threshold: f64) -> ReadState {
    match read {
        Read::Value(v) if *v > threshold => ReadState::Active,
        Read::Value(_) => ReadState::Inactive,
        Read::Unknown(_) => ReadState::Unknown,
    }
}

/// What to do now.
pub fn decide(rules: &Rules, seen: &Observed, memory: Memory) -> Decision {
    let mut d = decide_action(rules, seen, memory);
    d.memory.waking = d.phase == Phase::Waking;
    d
}

fn decide_action(rules: &Rules, seen: &Observed, memory: Memory) -> Decision {
    let idle = idle_state(&seen.idle, rules.idle_threshold);
    let activation = activation_state(&seen.activation, rules.activation_threshold);
    let base = Decision {
        action: Action::Nothing,
        phase: phase_of(seen.target, memory),
        reason: Reason::Paused,
        message: String::new(),
        memory,
        idle_state: idle,
        activation_state: activation,
    };
    if rules.paused {
        return Decision {
            message: "paused: the policy does nothing".into(),
            ..base
        };
    }
    if seen.target.replicas == 0 {
        parked(rules, seen, base)
    } else if memory.parked {
        externally_woken(seen, base)
    } else {
        running(rules, seen, base)
    }
}

/// A target this controller parked is up and it did not wake it: the scale
/// is respected and counted as a wake, so the idle window restarts and
/// `minUpDuration` counts from now (never an immediate re-park).
fn externally_woken(seen: &Observed, base: Decision) -> Decision {
    let memory = Memory {
        idle_since: None,
        last_wake: Some(seen.now),
        parked_from: None,
        waking: true,
        parked: false,
        activation_unknown_since: None,
    };
    Decision {
        phase: phase_of(seen.target, memory),
        reason: Reason::ExternallyWoken,
        message: format!(
            "woken to {} by someone else while parked: counted as a wake",
            seen.target.replicas
        ),
        memory,
        ..base
    }
}

fn phase_of(target: Target, memory: Memory) -> Phase {
    if target.replicas == 0 {
        Phase::Parked
    } else if target.ready == 0 && memory.waking {
        Phase::Waking
    } else {
        Phase::Active
    }
}

/// A parked target: wake on activation, nothing else.
fn parked(rules: &Rules, seen: &Observed, base: Decision) -> Decision {
    match (&seen.activation, base.activation_state) {
        (Read::Unknown(why), _) => Decision {
            reason: Reason::ActivationUnknown,
            message: format!("not woken: activation unknown ({why})"),
            ..base
        },
        (Read::Value(v), ReadState::Active) => {
            let why = format!("activation {v} > {}", rules.activation_threshold);
            wake(rules, seen.now, base, Reason::Woken, &why)
        }
        (Read::Value(v), _) => Decision {
            reason: Reason::StillIdle,
            message: format!("parked: activation {v} ≤ {}", rules.activation_threshold),
            ..base
        },
    }
}

/// A wake of a parked target to `wake.replicas` (or, with
/// `wake.restoreParked`, the larger recorded count), `why` in its message.
pub fn wake(rules: &Rules, now: i64, base: Decision, reason: Reason, why: &str) -> Decision {
    let to = rules
        .wake_replicas
        .max(base.memory.parked_from.unwrap_or(0))
        .max(1);
    Decision {
        action: Action::Wake { to },
        phase: Phase::Waking,
        reason,
        message: format!("woken to {to}: {why}"),
        memory: Memory {
            idle_since: None,
            last_wake: Some(now),
            parked_from: None,
            waking: true,
            parked: false,
            activation_unknown_since: base.memory.activation_unknown_since,
        },
        ..base
    }
}

/// A running target: keep the idle window, park when it has held.
fn running(rules: &Rules, seen: &Observed, base: Decision) -> Decision {
    let window = next_window(seen, &base, base.memory.idle_since);
    let memory = Memory {
        idle_since: window.as_ref().ok().copied(),
        ..base.memory
    };
    let since = match window {
        Ok(since) => since,
        Err((reason, message)) => {
            return Decision {
                reason,
                message,
                memory,
                ..base
            };
        }
    };
    if let Some(refusal) = refusal(rules, seen, base.memory) {
        return Decision {
            reason: refusal.0,
            message: refusal.1,
            memory,
            ..base
        };
    }
    let held = Duration::from_secs(u64::try_from(seen.now - since).unwrap_or(0));
    if held < rules.idle_for {
        // No running count here: the message goes into the status, and a
        // status that changed every round would be written every round
        // (/debug/scalers shows how long the window has held).
        return Decision {
            reason: Reason::IdleWindowOpen,
            message: format!(
                "idle window open: parks after {}s idle",
                rules.idle_for.as_secs()
            ),
            memory,
            ..base
        };
    }
    let from = seen.target.replicas;
    Decision {
        action: Action::Park { from },
        phase: Phase::Parked,
        reason: Reason::Parked,
        message: format!(
            "parked after {}s idle: {}",
            held.as_secs(),
            describe(&seen.idle)
        ),
        memory: Memory {
            idle_since: None,
            last_wake: base.memory.last_wake,
            parked_from: Some(from),
            waking: false,
            parked: true,
            activation_unknown_since: None,
        },
        ..base
    }
}

/// The idle window after this round's reads: its start, or why it is closed.
/// An unknown read, a busy read or an active activation rule restart it.
fn next_window(
    seen: &Observed,
    base: &Decision,
    since: Option<i64>,
) -> Result<i64, (Reason, String)> {
    if let Read::Unknown(why) = &seen.idle {
        return Err((
            Reason::ReadUnknown,
            format!("not parked: idle rule unknown ({why})"),
        ));
    }
    if let Read::Unknown(why) = &seen.activation {
        return Err((
            Reason::ReadUnknown,
            format!("not parked: activation unknown ({why})"),
        ));
    }
    if base.idle_state != ReadState::Inactive || base.activation_state == ReadState::Active {
        return Err((
            Reason::Busy,
            format!(
                "busy: {}, activation {}",
                describe(&seen.idle),
                describe(&seen.activation)
            ),
        ));
    }
    Ok(since.unwrap_or(seen.now))
}

/// Why a target whose idle window is open must not be parked now.
fn refusal(rules: &Rules, seen: &Observed, memory: Memory) -> Option<(Reason, String)> {
    if let Some(hpa) = &seen.hpa_owns_zero {
        return Some((
            Reason::HpaOwnsZero,
            format!("not parked: HorizontalPodAutoscaler {hpa} has minReplicas 0 and owns zero"),
        ));
    }
    if let Some(woke) = memory.last_wake {
        let up = seen.now - woke;
        if up >= 0 && Duration::from_secs(up.unsigned_abs()) < rules.min_up {
            return Some((
                Reason::MinUpDuration,
                format!(
                    "not parked: inside minUpDuration ({}s) after the wake",
                    rules.min_up.as_secs()
                ),
            ));
        }
    }
    if seen.target.ready < seen.target.replicas {
        return Some((
            Reason::PodsNotReady,
            format!(
                "not parked: {} of {} pods Ready",
                seen.target.ready, seen.target.replicas
            ),
        ));
    }
    None
}

fn describe(read: &Read) -> String {
    match read {
        Read::Value(v) => v.to_string(),
        Read::Unknown(why) => format!("unknown ({why})"),
    }
}

#[cfg(test)]
mod tests;
