//! The wake signal: the activator scales the parked workload itself,
//! 0 → `wakeReplicas`, through its `scale` subresource, at the first held
//! request. No Prometheus and no adapter in the path; only a target at 0 is
//! touched (the patch carries the `resourceVersion` read, so an autoscaler
//! that moved it meanwhile wins), and nothing here ever scales down.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, discovery};
use serde_json::json;

use crate::config::TargetRef;
use crate::metrics::Metrics;
use crate::route::Route;

/// Each Kubernetes API call gets this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Patched,
    AlreadyUp(i32),
}

/// Waits for held requests and wakes the route's target; retries every
/// `retry` while requests stay held and no endpoint is Ready.
pub async fn run(client: Client, route: Arc<Route>, metrics: Arc<Metrics>, retry: Duration) {
    let name = route.spec.name.clone();
    let ns = route.spec.service.namespace.clone();
    // The target's kind, found by discovery at the first wake and kept.
    let mut kind: Option<ApiResource> = None;
    loop {
        route.wake.notified().await;
        while route.needs_wake() {
            let call = attempt(&client, &route, &mut kind);
            let result = match tokio::time::timeout(CALL_TIMEOUT, call).await {
                Ok(r) => r.map_err(|e| api_error(&e)),
                Err(_) => Err(format!(
                    "the Kubernetes API did not answer within {CALL_TIMEOUT:?}"
                )),
            };
            let label = match &result {
                Ok(Outcome::Patched) => {
                    if let Some(since) = route.take_signal_since() {
                        let secs = since.elapsed().as_secs_f64();
                        metrics
                            .wake_signal
                            .with_label_values(&[&ns, &name])
                            .observe(secs);
                        tracing::info!(route = %name, target = %route.spec.target.name, signal_s = secs, "woke the target");
                    }
                    "patched"
                }
                Ok(Outcome::AlreadyUp(n)) => {
                    route.take_signal_since();
                    tracing::debug!(route = %name, replicas = n, "target already scaled up; waiting for Ready");
                    "already_up"
                }
                Err(_) => "error",
            };
            metrics.wakes.with_label_values(&[&ns, &name, label]).inc();
            let wait = if result.is_err() {
                retry.min(Duration::from_secs(1))
            } else {
                retry
            };
            if let Err(e) = &result {
                let target = format!("{}/{}", route.spec.target.kind, route.spec.target.name);
                tracing::warn!(route = %name, %target, retry_in = ?wait, "wake failed: {e}");
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = route.ready_changed.notified() => {}
            }
        }
    }
}

/// One line for a failed call: the API's code, reason and message, not
/// the whole `Status` object.
fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

async fn attempt(
    client: &Client,
    route: &Route,
    kind: &mut Option<ApiResource>,
) -> Result<Outcome, kube::Error> {
    let ar = match kind {
        Some(ar) => ar.clone(),
        None => {
            let ar = resolve(client, &route.spec.target).await?;
            *kind = Some(ar.clone());
            ar
        }
    };
    let ns = &route.spec.service.namespace;
    scale_up(
        &Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar),
        route,
    )
    .await
}

/// The target's kind by discovery; an error naming it when the cluster
/// does not serve it or it has no `scale` subresource.
async fn resolve(client: &Client, target: &TargetRef) -> Result<ApiResource, kube::Error> {
    let (group, version) = target
        .api_version
        .split_once('/')
        .unwrap_or(("", target.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &target.kind);
    let (ar, caps) = discovery::pinned_kind(client, &gvk).await?;
    if caps.subresources.iter().any(|(s, _)| s.plural == "scale") {
        return Ok(ar);
    }
    Err(kube::Error::Discovery(
        kube::error::DiscoveryError::MissingResource(format!(
            "{} ({}) has no scale subresource",
            target.kind, target.api_version
        )),
    ))
}

async fn scale_up<K>(api: &Api<K>, route: &Route) -> Result<Outcome, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = &route.spec.target.name;
    let scale = api.get_scale(name).await?;
    let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    if replicas > 0 {
        return Ok(Outcome::AlreadyUp(replicas));
    }
    let patch = json!({
        "metadata": {"resourceVersion": scale.metadata.resource_version},
        "spec": {"replicas": route.spec.wake_replicas},
    });
    api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Outcome::Patched)
}
