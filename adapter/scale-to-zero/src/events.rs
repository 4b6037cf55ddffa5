//! The Events a policy's rounds publish.

use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::crd::ScaleToZeroPolicy;

/// Publish an Event on `policy`; one that cannot be recorded is logged.
pub(super) async fn event<P>(
    ctx: &Context<P>,
    policy: &ScaleToZeroPolicy,
    warning: bool,
    reason: &str,
    note: String,
) {
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note),
        action: "Scale".into(),
        secondary: None,
    };
    let reference = policy.object_ref(&());
    let publish = ctx.recorder.publish(&ev, &reference);
    if let Err(e) = super::bounded::bounded("publishing an Event", publish).await {
        tracing::warn!(error = %e, policy = %policy.name_any(), "event not recorded");
    }
}
