//! One round for one policy, the controller's reconcile: its finalizer, one
//! owner per target, then gather what [`decide`] needs (`inputs`), apply its
//! action (`apply`) and say what happened (`status`); errors become the
//! status and a retry with backoff.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::finalizer::{self, Event as Finalize};
use kube::{Resource, ResourceExt};

use super::apply::apply;
pub use super::context::Settings;
use super::context::{Context, ReconcileError};
use super::crd::{Phase, ScaleToZeroPolicy, ScaleToZeroPolicyStatus};
use super::decide::{self, Action, Decision};
use super::events::event;
use super::inputs::{Round, read_idle, read_rule, round_of, sight};
use super::ownership;
use super::report::PolicyReport;
use super::status::{error_conditions, record, write_status};
use crate::provider::Provider;

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
            if let Some(kind) = super::owners::owner_kind(&e) {
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

/// Errors the controller could not turn into a status: retry later.
pub fn error_policy<P>(
    _policy: Arc<ScaleToZeroPolicy>,
    error: &ReconcileError,
    ctx: Arc<Context<P>>,
) -> Requeue {
    tracing::warn!(error = %error, "scale-to-zero reconcile failed");
    Requeue::requeue(ctx.settings.max_backoff.min(Duration::from_secs(30)))
}
