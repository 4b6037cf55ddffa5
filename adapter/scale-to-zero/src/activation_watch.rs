//! The activation watch over parked policies (those whose status says
//! Parked, read from the controller's store): one pass over the poll cache
//! per wake interval reconciles at once each policy whose activation turns
//! active or changes state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::crd::{Phase, ReadState, ScaleToZeroPolicy};
use super::decide;
use super::inputs::read_rule;
use gpuscale_signals::provider::Provider;

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
    let mut last: HashMap<ObjectRef<ScaleToZeroPolicy>, ReadState> = HashMap::new();
    loop {
        tick.tick().await;
        if !ctx.leadership.is_leader() {
            last.clear();
            continue;
        }
        let parked: Vec<_> = ctx
            .policies
            .state()
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Parked))
            .filter(|p| p.meta().deletion_timestamp.is_none())
            .collect();
        let refs: HashSet<_> = parked.iter().map(|p| ObjectRef::from_obj(&**p)).collect();
        last.retain(|r, _| refs.contains(r));
        for policy in parked {
            let state = activation_state(&policy, &ctx).await;
            let r = ObjectRef::from_obj(&*policy);
            let before = last.insert(r.clone(), state);
            let changed = before.is_some_and(|b| b != state);
            if (state == ReadState::Active || changed) && wake.unbounded_send(r).is_err() {
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
