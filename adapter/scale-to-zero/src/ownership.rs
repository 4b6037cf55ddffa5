//! What a policy owns and gives back: one policy per target (the oldest),
//! the park record in the policy's status, waking what a deleted policy
//! parked (its finalizer), a target parked under another `spec.target`, and
//! a target at 0 that this controller did not park.

use kube::api::Api;
use kube::runtime::controller::Action as Requeue;
use kube::{Client, Resource, ResourceExt};

use super::context::{Context, ReconcileError};
use super::crd::{ParkRecord, ScaleToZeroPolicy, ScaleToZeroPolicyStatus, TargetRef};
use super::decide::{Action, Decision, Memory, Reason};
use super::target::{self, Kinds, TargetError};

/// The finalizer on every policy: its target is woken before it goes.
pub const FINALIZER: &str = "gpuscale.dev/scale-to-zero";

/// Adds the finalizer to a live policy that lacks it; true when added (the
/// watch then brings the policy back).
pub async fn add_finalizer(
    api: &Api<ScaleToZeroPolicy>,
    policy: &ScaleToZeroPolicy,
) -> Result<bool, kube::Error> {
    let has = policy.finalizers().iter().any(|f| f == FINALIZER);
    if has || policy.meta().deletion_timestamp.is_some() {
        return Ok(false);
    }
    let mut all = policy.finalizers().to_vec();
    all.push(FINALIZER.into());
    set_finalizers(api, policy, &all).await?;
    Ok(true)
}

/// Sets a policy's finalizers to `all` by a merge patch carrying the
/// resourceVersion, so a concurrent change is refused, not overwritten
/// (rather than `kube::runtime::finalizer`'s JSON patch, whose `test` of
/// an absent list some API servers refuse).
pub async fn set_finalizers(
    api: &Api<ScaleToZeroPolicy>,
    policy: &ScaleToZeroPolicy,
    all: &[String],
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {
        "finalizers": all, "resourceVersion": policy.resource_version()}});
    api.patch(
        &policy.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// The policy that owns `policy`'s target when it is another one: of the
/// policies in its namespace on the same target and not being deleted, the
/// oldest (creation time, then name).
pub fn other_owner<'a>(
    policy: &'a ScaleToZeroPolicy,
    all: impl IntoIterator<Item = &'a ScaleToZeroPolicy>,
) -> Option<String> {
    let key = |p: &ScaleToZeroPolicy| {
        let created = p.meta().creation_timestamp.as_ref().map(|t| t.0);
        (created, p.name_any())
    };
    let ns = policy.namespace();
    let owner = all
        .into_iter()
        .filter(|p| p.namespace() == ns && p.spec.target == policy.spec.target)
        .filter(|p| p.meta().deletion_timestamp.is_none())
        .chain(std::iter::once(policy))
        .min_by_key(|p| key(p))?;
    (owner.name_any() != policy.name_any()).then(|| owner.name_any())
}

/// The park recorded in `status`, if any.
pub fn record(status: Option<&ScaleToZeroPolicyStatus>) -> Option<&ParkRecord> {
    status?.parked.as_ref()
}

/// The record to keep after a round: a new one on a park, the old one
/// while the target stays parked, none once it is up (or was never parked
/// by this policy).
pub fn next_record(
    old: Option<&ParkRecord>,
    target: &TargetRef,
    d: &Decision,
    now: i64,
) -> Option<ParkRecord> {
    match d.action {
        Action::Park { from } => Some(ParkRecord {
            target: target.clone(),
            replicas: from,
            at: gpuscale_util::rfc3339::format(now),
        }),
        Action::Nothing if d.memory.parked => old.cloned(),
        _ => None,
    }
}

/// The parked-replicas annotation of earlier versions, honoured only as
/// they wrote it: on a policy whose status says Parked and holds no record.
/// (This version never writes it, so it cannot remove it either: a stale
/// one on a woken target must not make a later manual zero look parked.)
pub fn legacy_parked(
    status: Option<&ScaleToZeroPolicyStatus>,
    annotation: Option<i32>,
) -> Option<i32> {
    let says_parked = status.and_then(|s| s.phase) == Some(super::crd::Phase::Parked);
    annotation.filter(|_| says_parked && record(status).is_none())
}

/// Whether this controller parked the target: a record in the status, or
/// the [`legacy_parked`] annotation.
pub fn parked_by_us(status: Option<&ScaleToZeroPolicyStatus>, legacy: Option<i32>) -> bool {
    record(status).is_some() || legacy.is_some()
}

/// The replicas recorded at parking: the status's record, else the
/// [`legacy_parked`] annotation.
pub fn recorded_replicas(policy: &ScaleToZeroPolicy, legacy: Option<i32>) -> Option<i32> {
    record(policy.status.as_ref())
        .filter(|r| r.target == policy.spec.target)
        .map(|r| r.replicas)
        .or(legacy)
}

/// A wake of a target at 0 that this controller did not park, refused
/// unless the policy opts in (`wake.fromManualZero`): an operator who
/// scaled it to 0 during an incident meant it.
pub fn refuse_manual_zero(policy: &ScaleToZeroPolicy, memory: &Memory, d: Decision) -> Decision {
    let manual = matches!(d.action, Action::Wake { .. }) && !memory.parked;
    if !manual || policy.spec.wake.from_manual_zero {
        return d;
    }
    Decision {
        action: Action::Nothing,
        phase: super::crd::Phase::Parked,
        reason: Reason::ManualZero,
        message: "not woken: the target is at 0 and this controller did not park it \
                  (set wake.fromManualZero to wake it)"
            .into(),
        memory: *memory,
        ..d
    }
}

/// What waking a recorded park did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Scaled from 0 to this many replicas.
    Woken(i32),
    /// Already above 0 (someone else woke it): left alone.
    AlreadyUp(i32),
    /// The target no longer exists.
    Gone,
}

/// Wakes `target` in `namespace` to `replicas` if it is still at 0.
pub async fn wake(
    client: &Client,
    kinds: &Kinds,
    namespace: &str,
    target: &TargetRef,
    replicas: i32,
) -> Result<Wake, TargetError> {
    let ar = kinds.resolve(client, target).await?;
    let api = Api::namespaced_with(client.clone(), namespace, &ar);
    match target::scale_of(&api, target).await.map(|s| s.replicas) {
        Ok(0) => {}
        Ok(n) => return Ok(Wake::AlreadyUp(n)),
        Err(TargetError::NotFound { .. }) => return Ok(Wake::Gone),
        Err(e) => return Err(e),
    }
    let to = replicas.max(1);
    target::scale(&api, target, to).await?;
    Ok(Wake::Woken(to))
}

/// The finalizer's cleanup: wake what the policy parked, say so, and let
/// the finalizer go. A failed wake keeps the finalizer and is retried.
pub async fn release<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
) -> Result<Requeue, ReconcileError> {
    let ns = policy.namespace().unwrap_or_default();
    let Some((target, replicas)) = parked_target(policy, ctx).await? else {
        return Ok(Requeue::await_change());
    };
    let outcome = wake(&ctx.client, &ctx.kinds, &ns, &target, replicas).await?;
    let note = match outcome {
        Wake::Woken(n) => format!(
            "policy deleted: {} {} woken to {n} (its count when parked)",
            target.kind, target.name
        ),
        Wake::AlreadyUp(n) => format!(
            "policy deleted: {} {} already at {n}, left alone",
            target.kind, target.name
        ),
        Wake::Gone => format!(
            "policy deleted: {} {} no longer exists",
            target.kind, target.name
        ),
    };
    tracing::info!(namespace = %ns, policy = %policy.name_any(), "{note}");
    super::events::event(ctx, policy, false, "Released", note).await;
    Ok(Requeue::await_change())
}

/// The target a policy parked and the replicas to restore: its status's
/// record, else (earlier versions) the annotation on its target while it
/// says Parked.
async fn parked_target<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
) -> Result<Option<(TargetRef, i32)>, ReconcileError> {
    if let Some(r) = record(policy.status.as_ref()) {
        return Ok(Some((r.target.clone(), r.replicas)));
    }
    let says_parked =
        policy.status.as_ref().and_then(|s| s.phase) == Some(super::crd::Phase::Parked);
    if !says_parked {
        return Ok(None);
    }
    let ns = policy.namespace().unwrap_or_default();
    let target = &policy.spec.target;
    let ar = ctx.kinds.resolve(&ctx.client, target).await?;
    let api = Api::namespaced_with(ctx.client.clone(), &ns, &ar);
    // At 0 (as read with the record): no pods to count.
    match target::read(&api, target, &target::Scale::default()).await {
        Ok(read) => Ok(read.legacy_parked_from.map(|n| (target.clone(), n))),
        Err(TargetError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The runtime guard behind the CRD's immutable `spec.target` (an API
/// server without CEL, or a CRD installed by hand): a policy whose record
/// names another target wakes that one and acts on nothing else.
pub async fn guard_target_change<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
) -> Result<Option<String>, ReconcileError> {
    let Some(r) = record(policy.status.as_ref()) else {
        return Ok(None);
    };
    if r.target == policy.spec.target {
        return Ok(None);
    }
    let ns = policy.namespace().unwrap_or_default();
    let outcome = wake(&ctx.client, &ctx.kinds, &ns, &r.target, r.replicas).await?;
    Ok(Some(format!(
        "spec.target changed from {} {} to {} {} while the first was parked: \
         spec.target is immutable, nothing is done on the new one ({} {} {outcome:?}); \
         delete this policy and create another",
        r.target.kind,
        r.target.name,
        policy.spec.target.kind,
        policy.spec.target.name,
        r.target.kind,
        r.target.name
    )))
}

#[cfg(test)]
mod tests;
