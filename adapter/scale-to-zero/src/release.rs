//! Giving targets back in bulk: `gpuscale-adapter wake-parked` (run before an uninstall)
//! wakes every target any policy parked and removes gpuscale's finalizers;
//! orphan repair (at the controller's start, and in `wake-parked`) wakes
//! targets carrying the parked annotation of earlier versions whose policy
//! is gone. (This version records a park only in the policy's status, kept
//! by its finalizer until the target is woken.)

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource, ResourceExt};

use super::bounded::bounded;
use super::crd::{ScaleToZeroPolicy, TargetRef};
use super::ownership::{self, FINALIZER, Wake};
use super::target::{Kinds, PARKED_FROM};

/// What a bulk release did, one line per target or policy.
#[derive(Debug, Default)]
pub struct Released {
    pub lines: String,
    pub failures: usize,
}

impl Released {
    fn said(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.lines, "{line}");
    }

    fn failed(&mut self, line: impl std::fmt::Display) {
        self.failures += 1;
        self.said(format_args!("FAILED {line}"));
    }
}

/// Orphan repair when this replica first leads: targets carrying the
/// parked annotation whose policy is gone (deleted while no controller
/// ran) are woken, each with an Event.
pub async fn repair_orphans<P>(ctx: std::sync::Arc<super::context::Context<P>>) {
    while !ctx.leadership.is_leader() {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    if ctx.policies.wait_until_ready().await.is_err() {
        return;
    }
    let policies: Vec<ScaleToZeroPolicy> =
        ctx.policies.state().iter().map(|p| (**p).clone()).collect();
    let mut out = Released::default();
    let r = Some(&ctx.recorder);
    if let Err(e) = wake_orphans(&ctx.client, &ctx.kinds, &policies, r, &mut out).await {
        tracing::warn!(error = %e, "orphan repair: listing failed");
    }
    for line in out.lines.lines() {
        tracing::info!("orphan repair: {line}");
    }
}

/// Wakes what every policy parked, removes gpuscale's finalizer from each,
/// then wakes orphans. A policy whose wake failed keeps its finalizer.
pub async fn wake_parked(client: &Client) -> Result<Released, kube::Error> {
    let kinds = Kinds::default();
    let mut out = Released::default();
    let policies = readable_policies(client, &mut out).await?;
    for p in &policies {
        let ns = p.namespace().unwrap_or_default();
        let name = format!("{ns}/{}", p.name_any());
        if let Some(r) = ownership::record(p.status.as_ref()) {
            match ownership::wake(client, &kinds, &ns, &r.target, r.replicas).await {
                Ok(w) => out.said(format_args!("policy {name}: {}", says(&r.target, &w))),
                Err(e) => {
                    out.failed(format_args!(
                        "policy {name}: {} {}: {e}",
                        r.target.kind, r.target.name
                    ));
                    continue;
                }
            }
        }
        match drop_finalizer(client, p).await {
            Ok(true) => out.said(format_args!("policy {name}: finalizer {FINALIZER} removed")),
            Ok(false) => {}
            Err(e) => out.failed(format_args!("policy {name}: removing the finalizer: {e}")),
        }
    }
    wake_orphans(client, &kinds, &[], None, &mut out).await?;
    Ok(out)
}

/// Every policy in the cluster, read one by one: a policy that does not
/// decode is a failure naming it and why (its target is left as it is:
/// the park record cannot be read), not the end of the list.
async fn readable_policies(
    client: &Client,
    out: &mut Released,
) -> Result<Vec<ScaleToZeroPolicy>, kube::Error> {
    let resource = ApiResource::erase::<ScaleToZeroPolicy>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let listed = bounded("listing policies", api.list(&ListParams::default())).await?;
    let mut policies = Vec::new();
    for obj in &listed.items {
        match super::invalid::decode(obj) {
            Ok(p) => policies.push(p),
            Err(why) => out.failed(format_args!(
                "policy {}/{}: cannot be read ({why}); its target, if parked, is left as it is",
                obj.namespace().unwrap_or_default(),
                obj.name_any()
            )),
        }
    }
    Ok(policies)
}

/// `gpuscale-adapter wake-parked`: [`wake_parked`], printed; the error
/// says what is left.
pub async fn command(client: &Client) -> Result<(), String> {
    let out = wake_parked(client)
        .await
        .map_err(|e| format!("wake-parked: {e}"))?;
    print!("{}", out.lines);
    if out.failures > 0 {
        return Err(format!(
            "wake-parked: {} target(s) or finalizer(s) not released; run it again",
            out.failures
        ));
    }
    println!("done: nothing parked by gpuscale is left at 0");
    Ok(())
}

fn says(t: &TargetRef, w: &Wake) -> String {
    match w {
        Wake::Woken(n) => format!("{} {} woken to {n}", t.kind, t.name),
        Wake::AlreadyUp(n) => format!("{} {} already at {n}, left alone", t.kind, t.name),
        Wake::Gone => format!("{} {} no longer exists", t.kind, t.name),
    }
}

/// Removes gpuscale's finalizer ([`ownership::set_finalizers`]); false
/// when it had none.
async fn drop_finalizer(client: &Client, p: &ScaleToZeroPolicy) -> Result<bool, kube::Error> {
    if !p.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(false);
    }
    let rest: Vec<String> = p
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let api: Api<ScaleToZeroPolicy> =
        Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
    bounded(
        "removing the finalizer",
        ownership::set_finalizers(&api, p, &rest),
    )
    .await?;
    Ok(true)
}

/// Objects of any kind with a `scale` subresource, at 0 and carrying the
/// parked annotation, that no policy in `policies` (or, when empty, none
/// in the cluster) targets: woken to the annotated count.
pub async fn wake_orphans(
    client: &Client,
    kinds: &Kinds,
    policies: &[ScaleToZeroPolicy],
    recorder: Option<&Recorder>,
    out: &mut Released,
) -> Result<(), kube::Error> {
    let listed;
    let policies = if policies.is_empty() {
        listed = readable_policies(client, &mut Released::default()).await?;
        &listed
    } else {
        policies
    };
    let mut parked = Vec::new();
    for kind in scalable_kinds(client).await {
        parked.extend(annotated(client, &kind).await?);
    }
    for (ns, target, n) in parked {
        let owned = policies.iter().any(|p| {
            p.namespace().as_deref() == Some(ns.as_str())
                && p.spec.target == target
                && p.meta().deletion_timestamp.is_none()
        });
        if owned {
            continue;
        }
        let name = format!("{ns}/{} {}", target.kind, target.name);
        match ownership::wake(client, kinds, &ns, &target, n).await {
            Ok(w) => {
                let note = format!(
                    "no policy targets it: {}; the annotation of an earlier gpuscale stays \
                     (remove it: kubectl annotate -n {ns} {} {} {PARKED_FROM}-)",
                    says(&target, &w),
                    target.kind.to_lowercase(),
                    target.name
                );
                if let (Some(r), Wake::Woken(_)) = (recorder, &w) {
                    orphan_event(r, &ns, &target, &note).await;
                }
                out.said(format_args!("orphan {ns}: {note}"));
            }
            Err(e) => out.failed(format_args!("orphan {name}: {e}")),
        }
    }
    Ok(())
}

/// A Normal `OrphanWoken` Event on the woken target.
async fn orphan_event(recorder: &Recorder, ns: &str, t: &TargetRef, note: &str) {
    let object = ObjectReference {
        api_version: Some(t.api_version.clone()),
        kind: Some(t.kind.clone()),
        name: Some(t.name.clone()),
        namespace: Some(ns.into()),
        ..ObjectReference::default()
    };
    let ev = Event {
        type_: EventType::Normal,
        reason: "OrphanWoken".into(),
        note: Some(note.into()),
        action: "Scale".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &object).await {
        tracing::warn!(error = %e, target = %t.name, "event not recorded");
    }
}

/// Deployments and StatefulSets: what is listed when discovery fails.
fn builtin_kinds() -> Vec<ApiResource> {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
    vec![
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<StatefulSet>(&()),
    ]
}

/// Every namespaced kind the cluster serves with a `scale` subresource, at
/// its preferred version: what a policy can target, so what an earlier
/// version can have parked. Deployments and StatefulSets when discovery
/// fails (logged).
async fn scalable_kinds(client: &Client) -> Vec<ApiResource> {
    let discovery = bounded(
        "discovering kinds with a scale subresource",
        Discovery::new(client.clone()).run(),
    )
    .await;
    let discovery = match discovery {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "orphan repair: discovery failed; listing Deployments and StatefulSets only");
            return builtin_kinds();
        }
    };
    let mut kinds = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            let scalable = caps.subresources.iter().any(|(s, _)| s.plural == "scale");
            if scalable && caps.scope == Scope::Namespaced {
                kinds.push(ar);
            }
        }
    }
    kinds
}

/// Objects per page of orphan repair's list.
pub const LIST_PAGE: u32 = 500;

/// Objects of one kind with the parked annotation: (namespace, target,
/// count). A kind the controller may not list (no `list` in the chart's
/// `targetRules` for it) cannot be one it parked: skipped, logged.
async fn annotated(
    client: &Client,
    kind: &ApiResource,
) -> Result<Vec<(String, TargetRef, i32)>, kube::Error> {
    // Metadata only, a page at a time, keeping the annotated: a cluster's
    // Deployments in full would be the controller's largest read by far.
    let api: Api<DynamicObject> = Api::all_with(client.clone(), kind);
    let mut parked = Vec::new();
    let mut lp = ListParams::default().limit(LIST_PAGE);
    loop {
        let page = match bounded("listing parked workloads", api.list_metadata(&lp)).await {
            Ok(page) => page,
            Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => {
                tracing::info!(kind = %kind.kind, group = %kind.group, code = s.code,
                    "orphan repair: kind not listed (not granted, or gone)");
                return Ok(parked);
            }
            Err(e) => return Err(e),
        };
        parked.extend(page.items.iter().filter_map(|o| {
            let v = o.annotations().get(PARKED_FROM)?;
            let Ok(n) = v.parse() else {
                tracing::warn!(namespace = ?o.namespace(), name = %o.name_any(), value = %v,
                    "ignoring an unreadable {PARKED_FROM} annotation");
                return None;
            };
            let target = TargetRef {
                api_version: kind.api_version.clone(),
                kind: kind.kind.clone(),
                name: o.name_any(),
            };
            Some((o.namespace().unwrap_or_default(), target, n))
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(parked),
        }
    }
}
