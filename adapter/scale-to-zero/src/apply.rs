//! Doing what a round decided: park or wake the target through `scale`,
//! and say so (an Event, a log line, the self-metrics), refusals included.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::context::{Context, ReconcileError};
use super::crd::ScaleToZeroPolicy;
use super::decide::{Action, Decision, Reason};
use super::events::event;
use super::inputs::{Round, target_api};
use super::target;
use gpuscale_signals::provider::Provider;

pub(super) async fn apply<P: Provider>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    r: &Round,
    d: &Decision,
) -> Result<(), ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let target = &policy.spec.target;
    let unknown_since = d.memory.activation_unknown_since;
    ctx.report
        .activation_unknown(&ns, &target.name, unknown_since);
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
            target::scale(&target_api(policy, ctx).await?, target, 0).await?;
            ctx.report.parked(&ns, &target.name);
            event(ctx, policy, false, "Parked", d.message.clone()).await;
            tracing::info!(namespace = %ns, target = %target.name, from, "parked");
        }
        Action::Wake { to } => {
            target::scale(&target_api(policy, ctx).await?, target, to).await?;
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
