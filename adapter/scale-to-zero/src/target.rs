//! The scale target through the Kubernetes API: resolve its kind once
//! (discovery says whether it has a `scale` subresource), read replicas and
//! readiness, park and wake through `scale` (the HPAs on it: [`super::owners`]).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, discovery};

use super::bounded::bounded;
use super::crd::TargetRef;

/// The annotation on the target in which earlier versions recorded the
/// replicas it was parked from. Read only: the record is now the policy's
/// `status.parked`, so the controller needs the `scale` subresource of its
/// targets and no `patch` on them.
pub const PARKED_FROM: &str = "gpuscale.dev/parked-replicas";

/// Why a target cannot be read or scaled.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("target apiVersion {0:?} is not group/version or version")]
    BadApiVersion(String),
    #[error("{kind} ({api_version}) is not served by the cluster: {source}")]
    UnknownKind {
        kind: String,
        api_version: String,
        source: kube::Error,
    },
    #[error("{0} has no scale subresource")]
    NoScale(String),
    #[error("{kind} {name} not found")]
    NotFound { kind: String, name: String },
    #[error(
        "{0}: its scale subresource gives no status.selector and the object no status.readyReplicas, so its Ready pods cannot be counted"
    )]
    NoReadiness(String),
    #[error("{0}")]
    Api(#[from] kube::Error),
}

impl TargetError {
    /// The condition reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            TargetError::BadApiVersion(_) | TargetError::UnknownKind { .. } => "TargetKindUnknown",
            TargetError::NoScale(_) => "TargetNotScalable",
            TargetError::NotFound { .. } => "TargetNotFound",
            TargetError::NoReadiness(_) => "TargetReadinessUnknown",
            TargetError::Api(_) => "KubernetesAPIError",
        }
    }
}

/// The target as read this round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRead {
    /// `spec.replicas` of the scale subresource.
    pub replicas: i32,
    /// Ready pods, by the kind's rule ([`read`]).
    pub ready: i32,
    /// The [`PARKED_FROM`] annotation of earlier versions.
    pub legacy_parked_from: Option<i32>,
}

/// Kinds resolved through discovery, kept: kinds do not change under a
/// running controller, and one discovery per reconcile would be wasteful.
#[derive(Default)]
pub struct Kinds {
    known: Mutex<HashMap<(String, String), ApiResource>>,
}

fn gvk(target: &TargetRef) -> Result<GroupVersionKind, TargetError> {
    let (group, version) = match target.api_version.split_once('/') {
        Some((g, v)) if !g.is_empty() && !v.is_empty() => (g, v),
        None if !target.api_version.is_empty() => ("", target.api_version.as_str()),
        _ => return Err(TargetError::BadApiVersion(target.api_version.clone())),
    };
    Ok(GroupVersionKind::gvk(group, version, &target.kind))
}

impl Kinds {
    /// The API resource of `target`'s kind; an error when it has no `scale`.
    pub async fn resolve(
        &self,
        client: &Client,
        target: &TargetRef,
    ) -> Result<ApiResource, TargetError> {
        let key = (target.api_version.clone(), target.kind.clone());
        if let Some(ar) = self.lock().get(&key) {
            return Ok(ar.clone());
        }
        let gvk = gvk(target)?;
        let (ar, caps) = bounded(
            "discovering the target's kind",
            discovery::pinned_kind(client, &gvk),
        )
        .await
        .map_err(|source| TargetError::UnknownKind {
            kind: target.kind.clone(),
            api_version: target.api_version.clone(),
            source,
        })?;
        if !caps
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "scale")
        {
            return Err(TargetError::NoScale(format!(
                "{} ({})",
                target.kind, target.api_version
            )));
        }
        self.lock().insert(key, ar.clone());
        Ok(ar)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ApiResource>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn not_found(e: kube::Error, target: &TargetRef) -> TargetError {
    match e {
        kube::Error::Api(s) if s.code == 404 => TargetError::NotFound {
            kind: target.kind.clone(),
            name: target.name.clone(),
        },
        e => TargetError::Api(e),
    }
}

/// The target's scale subresource as read once in a round: what it asks
/// for, and the pod selector the HPA uses (for kinds that do not count
/// their Ready pods themselves).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scale {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.selector`, when the kind's scale gives one.
    pub selector: Option<String>,
}

/// The target's scale subresource.
pub async fn scale_of(api: &Api<DynamicObject>, target: &TargetRef) -> Result<Scale, TargetError> {
    let scale = bounded("reading the target's scale", api.get_scale(&target.name))
        .await
        .map_err(|e| not_found(e, target))?;
    Ok(Scale {
        replicas: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        selector: scale
            .status
            .and_then(|s| s.selector)
            .filter(|s| !s.is_empty()),
    })
}

/// Kinds whose own controller counts their Ready pods in
/// `status.readyReplicas` (absent when 0, as the API server omits it).
fn counts_ready_itself(target: &TargetRef) -> bool {
    target.api_version == "apps/v1"
        && matches!(
            target.kind.as_str(),
            "Deployment" | "StatefulSet" | "ReplicaSet"
        )
}

fn ready_replicas(object: &DynamicObject) -> Option<i32> {
    object
        .data
        .pointer("/status/readyReplicas")
        .and_then(serde_json::Value::as_i64)
        .and_then(|v| i32::try_from(v).ok())
}

/// Ready pods of any other kind: the pods its scale subresource's
/// `status.selector` matches (the selector the HPA uses), counted when
/// their `Ready` condition is True and they are not being deleted; a kind
/// whose scale gives no selector falls back to its `status.readyReplicas`.
async fn ready_pods(
    api: &Api<DynamicObject>,
    target: &TargetRef,
    scale: &Scale,
    object: &DynamicObject,
) -> Result<i32, TargetError> {
    let Some(selector) = &scale.selector else {
        return ready_replicas(object)
            .ok_or_else(|| TargetError::NoReadiness(format!("{} {}", target.kind, target.name)));
    };
    let ns = api.namespace().unwrap_or_default().to_string();
    let pods: Api<Pod> = Api::namespaced(api.clone().into_client(), &ns);
    let list = bounded(
        "listing the target's pods",
        pods.list(&ListParams::default().labels(selector)),
    )
    .await?;
    let ready = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .count();
    Ok(i32::try_from(ready).unwrap_or(i32::MAX))
}

/// Readiness and the legacy parked-from annotation of the target, with its
/// `scale` as read this round. Readiness is per kind: `apps/v1`
/// Deployments, StatefulSets and ReplicaSets say it in
/// `status.readyReplicas`; any other kind with `/scale` (KServe,
/// LeaderWorkerSet, Argo Rollouts, a CRD of one's own) is counted from its
/// pods ([`ready_pods`]).
pub async fn read(
    api: &Api<DynamicObject>,
    target: &TargetRef,
    scale: &Scale,
) -> Result<TargetRead, TargetError> {
    let replicas = scale.replicas;
    let object = bounded("reading the target", api.get(&target.name))
        .await
        .map_err(|e| not_found(e, target))?;
    let ready = if counts_ready_itself(target) {
        ready_replicas(&object).unwrap_or(0)
    } else if replicas == 0 {
        0
    } else {
        ready_pods(api, target, scale, &object).await?
    };
    let legacy_parked_from = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PARKED_FROM))
        .and_then(|v| v.parse().ok());
    Ok(TargetRead {
        replicas,
        ready,
        legacy_parked_from,
    })
}

/// Sets replicas through the scale subresource, the only write to a
/// target (what it was parked from is recorded in the policy's status).
pub async fn scale(
    api: &Api<DynamicObject>,
    target: &TargetRef,
    replicas: i32,
) -> Result<(), TargetError> {
    let body = serde_json::json!({"spec": {"replicas": replicas}});
    bounded(
        "scaling the target",
        api.patch_scale(&target.name, &PatchParams::default(), &Patch::Merge(&body)),
    )
    .await
    .map_err(|e| not_found(e, target))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(api_version: &str) -> TargetRef {
        TargetRef {
            api_version: api_version.into(),
            kind: "Deployment".into(),
            name: "chat".into(),
        }
    }

    #[test]
    fn api_versions_split_into_group_and_version() {
        assert_eq!(gvk(&t("apps/v1")).unwrap().group, "apps");
        assert_eq!(gvk(&t("v1")).unwrap().group, "");
        assert!(matches!(gvk(&t("")), Err(TargetError::BadApiVersion(_))));
        assert!(matches!(gvk(&t("/v1")), Err(TargetError::BadApiVersion(_))));
    }
}
