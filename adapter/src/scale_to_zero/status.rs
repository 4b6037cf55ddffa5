//! What a policy's status says after a round: its rules' reads, its
//! conditions, its park record; written only when something a user reads
//! changed. The self-metrics' view of the policy is kept in step.

use gpuscale_util::rfc3339;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};

use super::context::{Context, ReconcileError};
use super::crd::{
    Condition, MetricSource, Phase, ReadState, RuleStatus, ScaleToZeroPolicy,
    ScaleToZeroPolicyStatus,
};
use super::decide::{Decision, Read};
use super::inputs::Round;
use super::ownership;
use super::report::PolicyReport;
use crate::provider::Provider;

fn rule_status(read: &Read, state: ReadState, name: &str, now: i64) -> RuleStatus {
    let (value, summary) = match read {
        Read::Value(v) => (Some(*v), format!("{name}={v} ({state:?})")),
        Read::Unknown(why) => (None, format!("{name} unknown: {why}")),
    };
    RuleStatus {
        value,
        state,
        time: rfc3339::format(now),
        summary,
    }
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: i64,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: rfc3339::format(now),
        observed_generation: generation,
    }
}

/// `Ready=False` with the error's reason; a conflict also says `Conflict=True`.
pub(super) fn error_conditions(
    e: &ReconcileError,
    now: i64,
    generation: Option<i64>,
) -> Vec<Condition> {
    let (reason, message) = (e.reason(), e.to_string());
    let mut out = vec![condition("Ready", false, reason, &message, now, generation)];
    if matches!(e, ReconcileError::Conflict { .. }) {
        out.push(condition(
            "Conflict", true, reason, &message, now, generation,
        ));
    }
    out
}

/// Keeps a condition's transition time when its status did not change.
fn merge_conditions(old: &[Condition], new: Vec<Condition>) -> Vec<Condition> {
    new.into_iter()
        .map(|mut c| {
            if let Some(o) = old
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
            {
                c.last_transition_time = o.last_transition_time.clone();
            }
            c
        })
        .collect()
}

/// A status worth writing differs in something other than read times.
/// Compared in place (the times set aside and put back): most rounds
/// change nothing, and cloning two statuses each was a measurable share of
/// the controller's CPU.
fn meaningful_change(new: &mut ScaleToZeroPolicyStatus, old: &mut ScaleToZeroPolicyStatus) -> bool {
    let take = |s: &mut ScaleToZeroPolicyStatus| {
        [&mut s.idle, &mut s.activation].map(|r| r.as_mut().map(|r| std::mem::take(&mut r.time)))
    };
    let put = |s: &mut ScaleToZeroPolicyStatus, times: [Option<String>; 2]| {
        for (r, t) in [&mut s.idle, &mut s.activation].into_iter().zip(times) {
            if let (Some(r), Some(t)) = (r.as_mut(), t) {
                r.time = t;
            }
        }
    };
    let (tn, to) = (take(new), take(old));
    let changed = new != old;
    put(new, tn);
    put(old, to);
    changed
}

pub(super) async fn write_status(
    policy: &ScaleToZeroPolicy,
    client: &Client,
    mut status: ScaleToZeroPolicyStatus,
) -> Result<(), ReconcileError> {
    let mut old = policy.status.clone().unwrap_or_default();
    status.conditions = merge_conditions(&old.conditions, status.conditions);
    if status.phase == old.phase && status.reason == old.reason {
        status.last_transition_time = old.last_transition_time.clone();
    }
    if !meaningful_change(&mut status, &mut old) {
        return Ok(());
    }
    let api: Api<ScaleToZeroPolicy> =
        Api::namespaced(client.clone(), &policy.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": status });
    api.patch_status(
        &policy.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(ReconcileError::Status)?;
    Ok(())
}

pub(super) async fn record<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
) -> Result<(), ReconcileError> {
    let now = r.seen.now;
    let metric = |s: &MetricSource| s.metric.clone().unwrap_or_else(|| "query".into());
    let idle_now = || {
        rule_status(
            &r.seen.idle,
            d.idle_state,
            &metric(&policy.spec.idle.source),
            now,
        )
    };
    // Not read while parked: the status keeps the last read.
    let idle = match policy.status.as_ref().and_then(|s| s.idle.clone()) {
        Some(last) if !r.idle_read => last,
        _ => idle_now(),
    };
    let activation = rule_status(
        &r.seen.activation,
        d.activation_state,
        &metric(&policy.spec.activation.source),
        now,
    );
    let generation = policy.meta().generation;
    let parked = d.phase == Phase::Parked;
    let old = ownership::record(policy.status.as_ref());
    let status = ScaleToZeroPolicyStatus {
        phase: Some(d.phase),
        parked: ownership::next_record(old, &policy.spec.target, d, now),
        idle_since: d.memory.idle_since.map(rfc3339::format),
        last_wake_time: d.memory.last_wake.map(rfc3339::format),
        last_transition_time: Some(rfc3339::format(now)),
        reason: Some(d.reason.as_str().into()),
        message: Some(d.message.clone()),
        conditions: vec![
            condition(
                "Ready",
                true,
                "TargetScalable",
                "target and metrics resolved",
                now,
                generation,
            ),
            condition(
                "Parked",
                parked,
                d.reason.as_str(),
                &d.message,
                now,
                generation,
            ),
        ],
        observed_generation: generation,
        idle: Some(idle.clone()),
        activation: Some(activation.clone()),
    };
    ctx.report.policy(PolicyReport {
        namespace: policy.namespace().unwrap_or_default(),
        name: policy.name_any(),
        target: policy.spec.target.name.clone(),
        phase: format!("{:?}", d.phase),
        idle: idle.summary,
        activation: activation.summary,
        idle_for_seconds: d.memory.idle_since.map(|s| now - s),
        waking_since: d.memory.last_wake.filter(|_| d.phase == Phase::Waking),
        reason: d.reason.as_str().into(),
        message: d.message.clone(),
        time: now,
    });
    write_status(policy, &ctx.client, status).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_times_alone_are_not_worth_a_write() {
        let a = ScaleToZeroPolicyStatus {
            idle: Some(RuleStatus {
                value: Some(0.0),
                state: ReadState::Inactive,
                time: "2026-11-30T06:00:00Z".into(),
                summary: "q=0".into(),
            }),
            ..ScaleToZeroPolicyStatus::default()
        };
        let mut b = a.clone();
        if let Some(i) = b.idle.as_mut() {
            i.time = "2026-11-30T06:00:10Z".into();
        }
        let (mut a2, mut b2) = (a.clone(), b.clone());
        assert!(!meaningful_change(&mut a2, &mut b2));
        assert_eq!((a2, b2), (a.clone(), b.clone()), "times put back");
        if let Some(i) = b.idle.as_mut() {
            i.value = Some(1.0);
        }
        assert!(meaningful_change(&mut a.clone(), &mut b));
    }
}
