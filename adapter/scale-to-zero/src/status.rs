//! What a policy's status says after a round: its rules' states, its
//! conditions (`metav1.Condition`), its park record. Written by server-side
//! apply, and only when something a user reads changed: no read times, no
//! live values, a condition's transition time kept while its status holds.
//! The self-metrics' view of the policy (values included) is kept in step.

use gpuscale_util::rfc3339;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};

use super::bounded::bounded;
use super::context::{Context, ReconcileError};
use super::crd::{
    Condition, MetricSource, Phase, ReadState, RuleStatus, ScaleToZeroPolicy,
    ScaleToZeroPolicyStatus,
};
use super::decide::{Decision, Read, Reason};
use super::inputs::Round;
use super::ownership;
use super::report::PolicyReport;
use gpuscale_signals::provider::Provider;

/// The field manager of every status write.
pub const MANAGER: &str = "gpuscale-scale-to-zero";

/// Which rule a summary is about: the words for its states differ.
#[derive(Clone, Copy)]
enum Rule {
    Idle,
    Activation,
}

/// The rule's state in words, without its value (which changes every round).
fn rule_status(
    rule: Rule,
    read: &Read,
    state: ReadState,
    name: &str,
    threshold: f64,
) -> RuleStatus {
    let summary = match (read, state, rule) {
        (Read::Unknown(why), ..) => format!("{name} unknown: {why}"),
        (_, ReadState::Inactive, Rule::Idle) => format!("{name} ≤ {threshold}: idle"),
        (_, _, Rule::Idle) => format!("{name} > {threshold}: busy"),
        (_, ReadState::Active, Rule::Activation) => format!("{name} > {threshold}: active"),
        (_, _, Rule::Activation) => format!("{name} ≤ {threshold}: inactive"),
    };
    RuleStatus { state, summary }
}

/// The rule's read for `/debug/scalers`, value included.
fn report_summary(read: &Read, state: ReadState, name: &str) -> String {
    match read {
        Read::Value(v) => format!("{name}={v} ({state:?})"),
        Read::Unknown(why) => format!("{name} unknown: {why}"),
    }
}

fn time(now: i64) -> Time {
    Time(Timestamp::from_second(now).unwrap_or_else(|_| Timestamp::now()))
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
        last_transition_time: time(now),
        observed_generation: generation,
    }
}

/// The status after a round that failed: what the last good round said,
/// with `Ready=False` naming the error (and `Conflict=True` on a policy
/// another one outranks, `OwnerConflict=True` on one another autoscaler
/// fights), the error as reason and message, and the
/// current generation.
pub(super) fn error_status(
    policy: &ScaleToZeroPolicy,
    e: &ReconcileError,
    now: i64,
) -> ScaleToZeroPolicyStatus {
    let old = policy.status.clone().unwrap_or_default();
    let generation = policy.meta().generation;
    let (reason, message) = (e.reason(), e.to_string());
    let mut conditions: Vec<Condition> = old
        .conditions
        .iter()
        .filter(|c| !matches!(c.type_.as_str(), "Ready" | "Conflict" | "OwnerConflict"))
        .cloned()
        .map(|c| Condition {
            observed_generation: generation,
            ..c
        })
        .collect();
    conditions.insert(
        0,
        condition("Ready", false, reason, &message, now, generation),
    );
    if let Some(type_) = e.conflict_condition() {
        conditions.push(condition(type_, true, reason, &message, now, generation));
    }
    ScaleToZeroPolicyStatus {
        reason: Some(reason.into()),
        message: Some(message),
        conditions,
        observed_generation: generation,
        ..old
    }
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

/// `status` with the transition times of what did not change carried over
/// from `old`; `None` when it then equals `old` (nothing to write).
fn settled(
    old: &ScaleToZeroPolicyStatus,
    mut status: ScaleToZeroPolicyStatus,
) -> Option<ScaleToZeroPolicyStatus> {
    status.conditions = merge_conditions(&old.conditions, status.conditions);
    if status.phase == old.phase && status.reason == old.reason {
        status.last_transition_time = old.last_transition_time.clone();
    }
    (status != *old).then_some(status)
}

/// Writes `status` by server-side apply (the whole status, absent fields
/// as null), unless it says what the policy's status already says.
pub(super) async fn write_status(
    policy: &ScaleToZeroPolicy,
    client: &Client,
    status: ScaleToZeroPolicyStatus,
) -> Result<(), ReconcileError> {
    let old = policy.status.clone().unwrap_or_default();
    let Some(status) = settled(&old, status) else {
        return Ok(());
    };
    let api: Api<ScaleToZeroPolicy> =
        Api::namespaced(client.clone(), &policy.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": "gpuscale.dev/v1alpha1",
        "kind": "ScaleToZeroPolicy",
        "status": status,
    });
    let params = PatchParams::apply(MANAGER).force();
    bounded(
        "writing the policy's status",
        api.patch_status(&policy.name_any(), &params, &Patch::Apply(&patch)),
    )
    .await
    .map_err(ReconcileError::Status)?;
    Ok(())
}

/// The status message: the decision's, except a busy one, whose values
/// change every round (the status says which rule is busy, the values are
/// in `/debug/scalers`).
fn status_message(d: &Decision, idle: &RuleStatus, activation: &RuleStatus) -> String {
    match d.reason {
        Reason::Busy => format!("busy: {}; {}", idle.summary, activation.summary),
        _ => d.message.clone(),
    }
}

pub(super) async fn record<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
    sleep: Vec<crate::crd::PodSleep>,
) -> Result<(), ReconcileError> {
    let now = r.seen.now;
    let metric = |s: &MetricSource| s.metric.clone().unwrap_or_else(|| "query".into());
    let (idle_name, act_name) = (
        metric(&policy.spec.idle.source),
        metric(&policy.spec.activation.source),
    );
    let idle_now = || {
        rule_status(
            Rule::Idle,
            &r.seen.idle,
            d.idle_state,
            &idle_name,
            policy.spec.idle.threshold,
        )
    };
    // Not read while parked: the status keeps the last read.
    let idle = match policy.status.as_ref().and_then(|s| s.idle.clone()) {
        Some(last) if !r.idle_read => last,
        _ => idle_now(),
    };
    let activation = rule_status(
        Rule::Activation,
        &r.seen.activation,
        d.activation_state,
        &act_name,
        policy.spec.activation.threshold,
    );
    let generation = policy.meta().generation;
    let parked = d.phase == Phase::Parked;
    let old = ownership::record(policy.status.as_ref());
    let message = status_message(d, &idle, &activation);
    let status = ScaleToZeroPolicyStatus {
        phase: Some(d.phase),
        parked: ownership::next_record(old, &policy.spec.target, d, now),
        idle_since: d.memory.idle_since.map(rfc3339::format),
        last_wake_time: d.memory.last_wake.map(rfc3339::format),
        activation_unknown_since: d.memory.activation_unknown_since.map(rfc3339::format),
        last_transition_time: Some(rfc3339::format(now)),
        reason: Some(d.reason.as_str().into()),
        message: Some(message.clone()),
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
                &message,
                now,
                generation,
            ),
        ],
        observed_generation: generation,
        idle: Some(idle),
        activation: Some(activation),
        sleep,
    };
    report(policy, ctx, r, d, (&idle_name, &act_name));
    write_status(policy, &ctx.client, status).await
}

/// The round as `/debug/scalers` and the self-metrics show it, values
/// included.
fn report<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
    (idle_name, act_name): (&str, &str),
) {
    let now = r.seen.now;
    let idle = if r.idle_read {
        report_summary(&r.seen.idle, d.idle_state, idle_name)
    } else {
        format!("{idle_name} not read while parked")
    };
    ctx.report.policy(PolicyReport {
        namespace: policy.namespace().unwrap_or_default(),
        name: policy.name_any(),
        target: policy.spec.target.name.clone(),
        phase: format!("{:?}", d.phase),
        idle,
        activation: report_summary(&r.seen.activation, d.activation_state, act_name),
        idle_for_seconds: d.memory.idle_since.map(|s| now - s),
        waking_since: d.memory.last_wake.filter(|_| d.phase == Phase::Waking),
        reason: d.reason.as_str().into(),
        message: d.message.clone(),
        time: now,
    });
}

#[cfg(test)]
mod tests;
