//! One round for one policy: gather what [`decide`] needs (reads from the
//! poll cache, the target through `scale`, HPAs on the same target), apply
//! its action, and say what happened (status, Events, self-metrics).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_util::rfc3339;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::finalizer::{self, Event as Finalize};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};

pub use super::context::Settings;
use super::context::{Context, ReconcileError, Sighting};
use super::crd::{
    Condition, MetricSource, Phase, ReadState, RuleStatus, ScaleToZeroPolicy,
    ScaleToZeroPolicyStatus,
};
use super::decide::{self, Action, Decision, Memory, Observed, Read, Reason, Rules, Target};
use super::events::event;
use super::ownership;
use super::report::PolicyReport;
use super::target::{self, TargetError};
use crate::provider::{Provider, ProviderError};

/// This leader's last memory of `policy`, else its status's. The count
/// recorded at parking is restored only when the policy asks
/// (`wake.restoreParked`).
fn recall<P>(
    ctx: &Context<P>,
    policy: &ScaleToZeroPolicy,
    annotation: Option<i32>,
    replicas: i32,
) -> Memory {
    let parked_from = ownership::recorded_replicas(policy, annotation)
        .filter(|_| policy.spec.wake.restore_parked);
    match ctx.remembered(policy) {
        Some(m) => Memory { parked_from, ..m },
        None => {
            let status = policy.status.as_ref();
            let parked = ownership::parked_by_us(status, annotation, replicas);
            Memory {
                parked_from,
                parked,
                ..memory_of(status)
            }
        }
    }
}

fn rules_of(policy: &ScaleToZeroPolicy, wake_default: i32) -> Result<Rules, ReconcileError> {
    let spec = &policy.spec;
    let duration = |key: &str, v: &str| {
        gpuscale_util::duration::parse(v)
            .map_err(|e| ReconcileError::InvalidSpec(format!("{key}: {e}")))
    };
    let wake = spec
        .wake
        .replicas
        .or(spec.wake_replicas)
        .unwrap_or(wake_default);
    if wake < 1 {
        return Err(ReconcileError::InvalidSpec(format!(
            "wake.replicas: {wake} must be at least 1"
        )));
    }
    for (key, v) in [
        ("idle.threshold", spec.idle.threshold),
        ("activation.threshold", spec.activation.threshold),
    ] {
        if !v.is_finite() {
            return Err(ReconcileError::InvalidSpec(format!("{key} must be finite")));
        }
    }
    Ok(Rules {
        idle_threshold: spec.idle.threshold,
        idle_for: duration("idle.for", &spec.idle.duration)?,
        activation_threshold: spec.activation.threshold,
        min_up: match &spec.min_up_duration {
            Some(v) => duration("minUpDuration", v)?,
            None => Duration::ZERO,
        },
        wake_replicas: wake,
        paused: spec.paused,
    })
}

/// A rule's read: the sum of the items (as the HPA and KEDA see it), or
/// unknown. An unknown metric, a refused query or a bad selector or
/// template is the policy's error, not a read.
async fn read<P: Provider>(
    provider: &P,
    key: &'static str,
    source: &MetricSource,
    namespace: &str,
    allow_queries: bool,
) -> Result<Read, ReconcileError> {
    let selector = source.label_selector.as_deref().unwrap_or("");
    let got = match (source.metric.as_deref(), source.query.as_deref()) {
        (Some(metric), None) => provider.get(metric, namespace, selector).await,
        (None, Some(_)) if !allow_queries => return Err(ReconcileError::QueryNotAllowed(key)),
        (None, Some(query)) => provider.get_query(query, namespace, selector).await,
        _ => {
            return Err(ReconcileError::InvalidSpec(format!(
                "{key}: give exactly one of metric and query"
            )));
        }
    };
    match got {
        // One definition of unknown for every consumer: no items or a
        // non-finite sum is unknown, never idle.
        Ok(r) => Ok(match crate::activation::total(&r) {
            Ok(v) => Read::Value(v),
            Err(why) => Read::Unknown(why),
        }),
        Err(ProviderError::Unavailable(why)) => Ok(Read::Unknown(why)),
        Err(ProviderError::UnknownMetric(m)) => Err(ReconcileError::UnknownMetric(m)),
        Err(ProviderError::BadRequest(why)) => {
            Err(ReconcileError::InvalidSpec(format!("{key}: {why}")))
        }
    }
}

/// A status time; one that does not parse is forgotten, and said so.
fn parse_time(s: Option<&String>) -> Option<i64> {
    rfc3339::parse(s?)
        .inspect_err(|e| tracing::warn!(error = %e, "ignoring an unreadable status time"))
        .ok()
}

/// The memory a status holds (whether this controller parked the target
/// is [`ownership::parked_by_us`]).
fn memory_of(status: Option<&ScaleToZeroPolicyStatus>) -> Memory {
    Memory {
        idle_since: status.and_then(|s| parse_time(s.idle_since.as_ref())),
        last_wake: status.and_then(|s| parse_time(s.last_wake_time.as_ref())),
        parked_from: None,
        waking: status.and_then(|s| s.phase) == Some(Phase::Waking),
        parked: false,
    }
}

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
fn error_conditions(e: &ReconcileError, now: i64, generation: Option<i64>) -> Vec<Condition> {
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

async fn write_status(
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

/// The round's inputs: the rules, what was seen, what is remembered.
struct Round {
    rules: Rules,
    seen: Observed,
    memory: Memory,
    /// Whether the idle rule was read (not while parked).
    idle_read: bool,
}

/// This round's read of a rule, from the poll cache.
async fn read_rule<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    key: &'static str,
    source: &MetricSource,
) -> Result<Read, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let allow = ctx.settings.allow_queries;
    read(ctx.provider.as_ref(), key, source, &ns, allow).await
}

/// The idle rule's read, or `None` while the target is parked: a parked
/// target has no load to measure, and not asking keeps its key out of the
/// poll cache (it expires after `--idle-expiry`).
async fn read_idle<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    s: &Sighting,
) -> Result<Option<Read>, ReconcileError> {
    if s.read.replicas == 0 {
        return Ok(None);
    }
    read_rule(policy, ctx, "idle", &policy.spec.idle.source)
        .await
        .map(Some)
}

/// The target's API object through the resolved kind.
async fn target_api<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
) -> Result<Api<DynamicObject>, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let ar = ctx.kinds.resolve(&ctx.client, &policy.spec.target).await?;
    Ok(Api::namespaced_with(ctx.client.clone(), &ns, &ar))
}

/// Read the target from the Kubernetes API.
async fn sight<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    activation: &Read,
) -> Result<Sighting, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let spec = &policy.spec;
    let api = target_api(policy, ctx).await?;
    let replicas = target::replicas(&api, &spec.target).await?;
    // A parked target that activation does not wake needs nothing more: its
    // readiness, annotation and HPAs matter only to a park or a wake.
    let wakes =
        decide::activation_state(activation, spec.activation.threshold) == ReadState::Active;
    let (read, hpas) = if replicas == 0 && !wakes {
        let read = target::TargetRead {
            replicas,
            ready: 0,
            parked_from: None,
        };
        (read, Vec::new())
    } else {
        let hpas = target::hpas(&ctx.client, &ns, &spec.target)
            .await
            .map_err(TargetError::Api)?;
        (target::read(&api, &spec.target, replicas).await?, hpas)
    };
    Ok(Sighting {
        target: spec.target.clone(),
        read,
        hpas,
        at: Instant::now(),
    })
}

fn round_of<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    (idle, activation): (Option<Read>, Read),
    s: &Sighting,
    now: i64,
) -> Result<Round, ReconcileError> {
    let idle_read = idle.is_some();
    let idle = idle.unwrap_or_else(|| Read::Unknown("not read while the target is parked".into()));
    let wake_default = s.hpas.iter().map(|(_, min)| *min).max().unwrap_or(1).max(1);
    Ok(Round {
        rules: rules_of(policy, wake_default)?,
        seen: Observed {
            now,
            idle,
            activation,
            target: Target {
                replicas: s.read.replicas,
                ready: s.read.ready,
            },
            hpa_owns_zero: s
                .hpas
                .iter()
                .find(|(_, min)| *min == 0)
                .map(|(n, _)| n.clone()),
        },
        memory: recall(ctx, policy, s.read.parked_from, s.read.replicas),
        idle_read,
    })
}

fn now_secs() -> i64 {
    Timestamp::now().as_second()
}

/// The reconcile function of the controller.
pub async fn reconcile<P: Provider>(
    policy: Arc<ScaleToZeroPolicy>,
    ctx: Arc<Context<P>>,
) -> Result<Requeue, ReconcileError> {
    if !ctx.leadership.is_leader() {
        // Another replica may act meanwhile: a new term reads targets afresh.
        ctx.forget_term();
        return Ok(Requeue::requeue(ctx.settings.wake_interval));
    }
    let api: Api<ScaleToZeroPolicy> =
        Api::namespaced(ctx.client.clone(), &policy.namespace().unwrap_or_default());
    if ownership::add_finalizer(&api, &policy)
        .await
        .map_err(ReconcileError::Status)?
    {
        return Ok(Requeue::await_change());
    }
    finalizer::finalizer(&api, ownership::FINALIZER, policy, |event| async {
        match event {
            Finalize::Apply(p) => act(p, &ctx).await,
            Finalize::Cleanup(p) => ownership::release(&p, &ctx).await,
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

/// A round for a policy that stays: unless another policy owns its target
/// or its target changed under a park, decide and act; errors become its
/// status and a retry with backoff.
async fn act<P: Provider>(
    policy: Arc<ScaleToZeroPolicy>,
    ctx: &Context<P>,
) -> Result<Requeue, ReconcileError> {
    let key = (policy.namespace().unwrap_or_default(), policy.name_any());
    let now = now_secs();
    match owned_round(&policy, ctx, now).await {
        Ok(requeue) => {
            ctx.succeeded(&key);
            Ok(requeue)
        }
        Err(e) => {
            let wait = ctx.backoff(&key);
            tracing::warn!(policy = %key.1, namespace = %key.0, error = %e, retry_in = ?wait, "scale-to-zero policy not acted on");
            let old = policy.status.clone().unwrap_or_default();
            if old.reason.as_deref() != Some(e.reason()) {
                event(ctx, &policy, true, e.reason(), e.to_string()).await;
            }
            let status = ScaleToZeroPolicyStatus {
                reason: Some(e.reason().into()),
                message: Some(e.to_string()),
                conditions: error_conditions(&e, now, policy.meta().generation),
                ..old
            };
            if !matches!(e, ReconcileError::Status(_)) {
                write_status(&policy, &ctx.client, status).await?;
            }
            ctx.report.policy(PolicyReport {
                namespace: key.0.clone(),
                name: key.1.clone(),
                target: policy.spec.target.name.clone(),
                phase: "Error".into(),
                idle: String::new(),
                activation: String::new(),
                idle_for_seconds: None,
                waking_since: None,
                reason: e.reason().into(),
                message: e.to_string(),
                time: now,
            });
            Ok(Requeue::requeue(wait))
        }
    }
}

/// [`round`] for the policy that owns its target and has not changed it.
async fn owned_round<P: Provider>(
    policy: &Arc<ScaleToZeroPolicy>,
    ctx: &Context<P>,
    now: i64,
) -> Result<Requeue, ReconcileError> {
    let store = ctx.policies.state();
    if let Some(owner) = ownership::other_owner(policy, store.iter().map(|p| &**p)) {
        let t = &policy.spec.target;
        return Err(ReconcileError::Conflict {
            owner,
            target: format!("{} {}", t.kind, t.name),
        });
    }
    if let Some(why) = ownership::guard_target_change(policy, ctx).await? {
        return Err(ReconcileError::TargetChanged(why));
    }
    round(policy, ctx, now).await
}

async fn round<P: Provider>(
    policy: &Arc<ScaleToZeroPolicy>,
    ctx: &Context<P>,
    now: i64,
) -> Result<Requeue, ReconcileError> {
    let activation = read_rule(policy, ctx, "activation", &policy.spec.activation.source).await?;
    // Most rounds change nothing (a parked target stays parked, an idle
    // window stays open): decided on the target as last read, they touch
    // only the poll cache. A park, a wake or a Waking target is decided
    // again on a fresh read before anything is done.
    if let Some(s) = ctx.sighting(policy) {
        let idle = read_idle(policy, ctx, &s).await?;
        let r = round_of(policy, ctx, (idle, activation.clone()), &s, now)?;
        let d = decide_round(policy, &r);
        if d.action == Action::Nothing && d.phase != Phase::Waking && !r.memory.waking {
            apply(policy, ctx, &r, &d).await?;
            return conclude(policy, ctx, &r, &d).await;
        }
    }
    let s = sight(policy, ctx, &activation).await?;
    let idle = read_idle(policy, ctx, &s).await?;
    let r = round_of(policy, ctx, (idle, activation), &s, now)?;
    let d = decide_round(policy, &r);
    apply(policy, ctx, &r, &d).await?;
    // After a park or a wake the target is what the patch made it; the
    // next round reads it again.
    ctx.sighted(policy, (d.action == Action::Nothing).then_some(s));
    conclude(policy, ctx, &r, &d).await
}

/// [`decide::decide`], with the wake of a target this controller did not
/// park refused unless the policy opts in.
fn decide_round(policy: &ScaleToZeroPolicy, r: &Round) -> Decision {
    let d = decide::decide(&r.rules, &r.seen, r.memory);
    ownership::refuse_manual_zero(policy, &r.memory, d)
}

/// Remember the decision, say it, and requeue. A parked policy waits for
/// the activation watch, which reconciles it when its activation turns
/// active or changes state; else it is looked at every resync interval.
async fn conclude<P: Provider>(
    policy: &Arc<ScaleToZeroPolicy>,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
) -> Result<Requeue, ReconcileError> {
    ctx.remember(policy, d.memory);
    let parked = d.phase == Phase::Parked;
    ctx.watch_if_parked(policy, parked);
    record(policy, ctx, r, d).await?;
    Ok(Requeue::requeue(if parked {
        ctx.settings.resync_interval
    } else {
        ctx.settings.check_interval
    }))
}

/// The activation watch: every wake interval, each parked policy's
/// activation rule is read from the poll cache, and the policy is
/// reconciled at once when it reads active (which wakes it) or its read
/// changes state (so the status says "unknown" as soon as it is). One pass
/// over the cache instead of a reconcile round per parked policy per wake
/// interval.
pub async fn watch_parked<P: Provider>(
    ctx: Arc<Context<P>>,
    wake: futures::channel::mpsc::UnboundedSender<ObjectRef<ScaleToZeroPolicy>>,
) {
    let mut tick = tokio::time::interval(ctx.settings.wake_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: HashMap<String, ReadState> = HashMap::new();
    loop {
        tick.tick().await;
        if !ctx.leadership.is_leader() {
            last.clear();
            continue;
        }
        let parked = ctx.parked();
        last.retain(|uid, _| parked.iter().any(|(u, _)| u == uid));
        for (uid, policy) in parked {
            let state = activation_state(&policy, &ctx).await;
            let before = last.insert(uid, state);
            let changed = before.is_some_and(|b| b != state);
            if (state == ReadState::Active || changed)
                && wake.unbounded_send(ObjectRef::from_obj(&*policy)).is_err()
            {
                return;
            }
        }
    }
}

/// `policy`'s activation rule as read from the poll cache now.
async fn activation_state<P: Provider>(policy: &ScaleToZeroPolicy, ctx: &Context<P>) -> ReadState {
    let source = &policy.spec.activation.source;
    match read_rule(policy, ctx, "activation", source).await {
        Ok(read) => decide::activation_state(&read, policy.spec.activation.threshold),
        Err(_) => ReadState::Unknown,
    }
}

async fn apply<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
) -> Result<(), ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let target = &policy.spec.target;
    match d.action {
        Action::Nothing => {
            if is_refusal(d.reason) && last_reason(policy) != Some(d.reason.as_str()) {
                ctx.report.refused(d.reason.as_str());
                event(ctx, policy, true, d.reason.as_str(), d.message.clone()).await;
            }
            if d.reason == Reason::ExternallyWoken {
                event(ctx, policy, false, d.reason.as_str(), d.message.clone()).await;
                tracing::info!(namespace = %ns, target = %target.name, "woken by someone else");
            }
        }
        Action::Park { from } => {
            target::scale(&target_api(policy, ctx).await?, target, 0, Some(from)).await?;
            ctx.report.parked(&ns, &target.name);
            event(ctx, policy, false, "Parked", d.message.clone()).await;
            tracing::info!(namespace = %ns, target = %target.name, from, "parked");
        }
        Action::Wake { to } => {
            target::scale(&target_api(policy, ctx).await?, target, to, None).await?;
            let latency = (Timestamp::now().as_millisecond() as f64 / 1000.0) - r.seen.now as f64;
            ctx.report.woken(&ns, &target.name, latency.max(0.0));
            event(ctx, policy, false, "Woken", d.message.clone()).await;
            tracing::info!(namespace = %ns, target = %target.name, to, "woken");
        }
    }
    Ok(())
}

/// Reasons that refuse a park the idle rule asked for, or a wake.
fn is_refusal(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::HpaOwnsZero
            | Reason::ManualZero
            | Reason::MinUpDuration
            | Reason::PodsNotReady
            | Reason::ReadUnknown
            | Reason::ActivationUnknown
    )
}

fn last_reason(policy: &ScaleToZeroPolicy) -> Option<&str> {
    policy.status.as_ref()?.reason.as_deref()
}

async fn record<P: Provider>(
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

/// Errors the controller could not turn into a status: retry later.
pub fn error_policy<P>(
    _policy: Arc<ScaleToZeroPolicy>,
    error: &ReconcileError,
    ctx: Arc<Context<P>>,
) -> Requeue {
    tracing::warn!(error = %error, "scale-to-zero reconcile failed");
    Requeue::requeue(ctx.settings.max_backoff.min(Duration::from_secs(30)))
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

    #[test]
    fn times_round_trip_through_the_status() {
        let s = rfc3339::format(1_790_000_000);
        assert_eq!(parse_time(Some(&s)), Some(1_790_000_000));
    }
}
