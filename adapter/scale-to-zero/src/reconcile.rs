//! One round for one policy, the controller's reconcile: its finalizer, one
//! owner per target, then gather what [`decide`] needs (`inputs`), apply its
//! action (`apply`) and say what happened (`status`); errors become the
//! status and a retry with backoff.
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::finalizer::{self, Event as Finalize};

use super::apply::apply;
use super::bounded::bounded;
pub use super::context::Settings;
use super::context::{Context, ReconcileError};
use super::crd::{Phase, ScaleToZeroPolicy};
use super::decide::{self, Action, Decision};
use super::events::event;
use super::inputs::{Round, read_idle, read_rule, round_of, sight};
use super::ownership;
use super::report::PolicyReport;
use super::status::{error_status, record, write_status};
use super::unknown;
use gpuscale_signals::provider::Provider;

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
    if bounded(
        "adding the finalizer",
        ownership::add_finalizer(&api, &policy),
    )
    .await
    .map_err(ReconcileError::Status)?
    {
        // The finalizer's update reconciles the policy again.
        return Ok(Requeue::await_change());
    }
    // Every call of a round is bounded on its own; this bounds the
    // finalizer's own patches too.
    let round = finalizer::finalizer(&api, ownership::FINALIZER, policy, |event| async {
        match event {
            Finalize::Apply(p) => act(p, &ctx).await,
            Finalize::Cleanup(p) => ownership::release(&p, &ctx).await,
        }
    });
    match tokio::time::timeout(ROUND_TIMEOUT, round).await {
        Ok(r) => r.map_err(|e| ReconcileError::Finalizer(Box::new(e))),
        Err(_) => Err(ReconcileError::Deadline(ROUND_TIMEOUT)),
    }
}

/// The longest a round may take, its calls' timeouts included.
const ROUND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A round for a policy that stays: unless another policy owns its target
/// or its target changed under a park, decide and act. An error is said
/// (status, Event, self-metrics) and returned: [`error_policy`] retries
/// with backoff.
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
            fail(&policy, ctx, &e, now).await;
            Err(e)
        }
    }
}

/// Says what went wrong: a Warning Event when the reason is new, the
/// status (unless writing it is what failed), the self-metrics. A status
/// that cannot be written is logged: the round's own error is the one to
/// retry on.
async fn fail<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    e: &ReconcileError,
    now: i64,
) {
    let key = (policy.namespace().unwrap_or_default(), policy.name_any());
    if last_reason(policy) != Some(e.reason()) {
        event(ctx, policy, true, e.reason(), e.to_string()).await;
    }
    if let Some(kind) = e.owner_kind() {
        ctx.report.conflict(&key.0, &key.1, kind);
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
    if !matches!(e, ReconcileError::Status(_))
        && let Err(w) = write_status(policy, &ctx.client, error_status(policy, e, now)).await
    {
        tracing::warn!(policy = %key.1, namespace = %key.0, error = %w, "error status not written");
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

/// [`decide::decide`], with a parked target woken once its activation has
/// read unknown for `activation.unknownAfter` (fail-open, [`unknown`]), and
/// the wake of a target this controller did not park refused unless the
/// policy opts in.
fn decide_round(policy: &ScaleToZeroPolicy, r: &Round) -> Decision {
    let d = decide::decide(&r.rules, &r.seen, r.memory);
    let d = unknown::fail_open(&r.unknown, &r.rules, &r.seen, &r.memory, d);
    let mut d = ownership::refuse_manual_zero(policy, &r.memory, d);
    d.memory.activation_unknown_since = unknown::since(&r.seen, &r.memory);
    d
}

/// Remember the decision, say it, and requeue. A parked policy waits for
/// the activation watch, which reconciles it when its activation turns
/// active or changes state, and the resync interval; a waking one is read
/// again every wake interval (its pods come up), a running one every check
/// interval.
async fn conclude<P: Provider>(
    policy: &Arc<ScaleToZeroPolicy>,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
) -> Result<Requeue, ReconcileError> {
    ctx.remember(policy, d.memory);
    let sleep = super::sleep::stage(policy, ctx, d, r.seen.now).await;
    let sleeping = (policy.spec.sleep.as_ref())
        .map(|_| sleep.iter().filter(|p| p.phase == "Sleeping").count());
    let (ns, target) = (policy.namespace().unwrap_or_default(), &policy.spec.target);
    ctx.report.sleeping(&ns, &target.name, sleeping);
    record(policy, ctx, r, d, sleep).await?;
    Ok(Requeue::requeue(match d.phase {
        Phase::Parked => ctx.settings.resync_interval,
        Phase::Waking => ctx.settings.wake_interval,
        Phase::Active => ctx.settings.check_interval,
    }))
}

fn last_reason(policy: &ScaleToZeroPolicy) -> Option<&str> {
    policy.status.as_ref()?.reason.as_deref()
}

/// The controller's error policy: retry the policy with backoff, 2 s
/// doubling to `--scale-to-zero-max-backoff`, jittered.
pub fn error_policy<P>(
    policy: Arc<ScaleToZeroPolicy>,
    error: &ReconcileError,
    ctx: Arc<Context<P>>,
) -> Requeue {
    let key = (policy.namespace().unwrap_or_default(), policy.name_any());
    let wait = ctx.backoff(&key);
    tracing::warn!(policy = %key.1, namespace = %key.0, error = %error, retry_in = ?wait, "scale-to-zero policy not acted on");
    Requeue::requeue(wait)
}
