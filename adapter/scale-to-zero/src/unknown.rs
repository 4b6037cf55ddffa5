//! A parked target whose activation rule stays unknown (Prometheus down or
//! failing the query, the holder's series stale or missing): after
//! `activation.unknownAfter` it is woken (fail-open, the default) or left
//! parked (`whenUnknown: StayParked`). Fail-open by default because a
//! service stranded at zero while work arrives is an outage, while an
//! unneeded wake costs `wake.replicas` pods' GPU time until the rules read
//! again. Pure: the reconciler keeps the start in the policy's memory and
//! status.

use std::time::Duration;

use super::context::ReconcileError;
use super::crd::{ActivationRule, Phase, WhenUnknown};
use super::decide::{self, Action, Decision, Memory, Observed, Read, Reason, Rules};

/// `unknownAfter` when the policy does not say.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(10 * 60);

/// The policy's rule for a long unknown activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownRule {
    pub after: Duration,
    pub when: WhenUnknown,
}

/// The rule from the policy's `activation`.
pub fn rule_of(activation: &ActivationRule) -> Result<UnknownRule, ReconcileError> {
    let after = match &activation.unknown_after {
        Some(v) => gpuscale_util::duration::parse(v)
            .map_err(|e| ReconcileError::InvalidSpec(format!("activation.unknownAfter: {e}")))?,
        None => DEFAULT_AFTER,
    };
    Ok(UnknownRule {
        after,
        when: activation.when_unknown,
    })
}

/// Since when activation has read unknown, after this round's read.
pub fn since(seen: &Observed, memory: &Memory) -> Option<i64> {
    match seen.activation {
        Read::Unknown(_) => Some(memory.activation_unknown_since.unwrap_or(seen.now)),
        Read::Value(_) => None,
    }
}

/// `d`, or a wake when the target is parked by this controller, its
/// activation has read unknown for `after` and the rule says `Wake`.
pub fn fail_open(
    rule: &UnknownRule,
    rules: &Rules,
    seen: &Observed,
    memory: &Memory,
    d: Decision,
) -> Decision {
    let waiting = d.action == Action::Nothing
        && d.phase == Phase::Parked
        && d.reason == Reason::ActivationUnknown;
    let Some(start) = since(seen, memory).filter(|_| waiting) else {
        return d;
    };
    let unknown_for = Duration::from_secs(u64::try_from(seen.now - start).unwrap_or(0));
    if unknown_for < rule.after {
        return d;
    }
    let after = rule.after.as_secs();
    match rule.when {
        WhenUnknown::StayParked => Decision {
            message: format!(
                "{}; unknown for {}s, staying parked (activation.whenUnknown: StayParked)",
                d.message,
                unknown_for.as_secs()
            ),
            ..d
        },
        WhenUnknown::Wake => {
            let why = format!(
                "activation unknown for {}s, past activation.unknownAfter ({after}s): fail-open",
                unknown_for.as_secs()
            );
            decide::wake(rules, seen.now, d, Reason::ActivationUnknownTooLong, &why)
        }
    }
}

#[cfg(test)]
mod tests;
