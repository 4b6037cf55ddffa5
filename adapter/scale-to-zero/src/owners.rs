//! Other autoscalers on a policy's target, and which of them fight a park.
//!
//! KEDA fights: its operator scales a target below a ScaledObject's
//! `minReplicaCount` back up and wakes it on its own triggers, so a park
//! would be undone at its next poll and redone after every `idle.for`: a
//! cold start per idle window. A policy whose target a ScaledObject names
//! (or an HPA that KEDA manages, found even where ScaledObjects cannot be
//! listed) acts on nothing. A plain HPA with `minReplicas ≥ 1` does not
//! fight: Kubernetes pauses it while its target is at 0 (`ScalingDisabled`)
//! and it resumes after a wake. An HPA with `minReplicas: 0` owns zero
//! itself ([`super::decide::Reason::HpaOwnsZero`]).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};

use super::bounded::bounded;
use super::crd::TargetRef;

/// The label KEDA puts on the HPA it creates for a ScaledObject.
const KEDA_HPA_LABEL: &str = "scaledobject.keda.sh/name";

/// Another autoscaler that would undo a park.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `ScaledObject` or `HorizontalPodAutoscaler`.
    pub kind: &'static str,
    pub name: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            "ScaledObject" => write!(f, "KEDA ScaledObject {}", self.name),
            _ => write!(f, "{} {} (managed by KEDA)", self.kind, self.name),
        }
    }
}

/// Why a policy does not act because of another autoscaler.
#[derive(Debug, thiserror::Error)]
pub enum OwnersError {
    #[error(
        "{target} is also scaled by {owner}, which would undo every park: this policy acts on \
         nothing (remove one of the two)"
    )]
    Conflict { owner: Owner, target: String },
    #[error("not parked: the other autoscalers on {target} could not be read ({why})")]
    Unknown { target: String, why: String },
}

impl OwnersError {
    pub fn reason(&self) -> &'static str {
        match self {
            OwnersError::Conflict { .. } => "OwnerConflict",
            OwnersError::Unknown { .. } => "OwnersUnknown",
        }
    }

    /// The kind of the other owner, for a conflict.
    pub fn owner_kind(&self) -> Option<&'static str> {
        match self {
            OwnersError::Conflict { owner, .. } => Some(owner.kind),
            OwnersError::Unknown { .. } => None,
        }
    }
}

/// The HPAs on a target and the autoscaler that would fight a park.
#[derive(Debug, Clone, PartialEq)]
pub struct Owners {
    /// HPAs on the target: (name, minReplicas).
    pub hpas: Vec<(String, i32)>,
    /// A fighting owner, none, or why that is not known.
    pub fight: Result<Option<Owner>, String>,
}

impl Owners {
    /// What a round may do: a fight acts on nothing; an unknown answer
    /// refuses a park (a running target) but not a wake (`replicas` 0):
    /// waking is the safe side.
    pub fn check(&self, target: &TargetRef, replicas: i32) -> Result<(), OwnersError> {
        let on = || format!("{} {}", target.kind, target.name);
        match &self.fight {
            Ok(Some(owner)) => Err(OwnersError::Conflict {
                owner: owner.clone(),
                target: on(),
            }),
            Err(why) if replicas > 0 => Err(OwnersError::Unknown {
                target: on(),
                why: why.clone(),
            }),
            _ => Ok(()),
        }
    }
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Whether a reference names `target`: same name and kind, and the same
/// API group (versions differ between writers: `autoscaling/v1` HPAs,
/// `apps/v1beta2` references). A reference without an apiVersion matches
/// on kind and name.
pub fn same_target(api_version: Option<&str>, kind: &str, name: &str, target: &TargetRef) -> bool {
    name == target.name
        && kind == target.kind
        && api_version.is_none_or(|v| group(v) == group(&target.api_version))
}

/// The HPAs and ScaledObjects in `namespace` on `target`. A failed HPA list
/// is an error (the wake count and `HPAOwnsZero` depend on it); a failed
/// ScaledObject list is an unknown fight.
pub async fn read(
    client: &Client,
    namespace: &str,
    target: &TargetRef,
) -> Result<Owners, kube::Error> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    let hpas: Vec<HorizontalPodAutoscaler> =
        bounded("listing HPAs", api.list(&ListParams::default()))
            .await?
            .items
            .into_iter()
            .filter(|h| {
                let r = &h.spec.scale_target_ref;
                same_target(r.api_version.as_deref(), &r.kind, &r.name, target)
            })
            .collect();
    let keda_hpa = hpas.iter().find_map(keda_managed);
    let fight = match keda_hpa {
        Some(owner) => Ok(Some(owner)),
        None => scaled_objects(client, namespace, target)
            .await
            .map(|names| {
                names.into_iter().next().map(|name| Owner {
                    kind: "ScaledObject",
                    name,
                })
            })
            .map_err(|e| format!("listing keda.sh ScaledObjects: {e}")),
    };
    let hpas = hpas
        .into_iter()
        .map(|h| (h.name_any(), h.spec.min_replicas.unwrap_or(1)))
        .collect();
    Ok(Owners { hpas, fight })
}

/// An HPA that KEDA created for a ScaledObject (its label or owner).
fn keda_managed(h: &HorizontalPodAutoscaler) -> Option<Owner> {
    let by_label = h.labels().contains_key(KEDA_HPA_LABEL);
    let by_owner = h
        .owner_references()
        .iter()
        .any(|o| o.kind == "ScaledObject" && group(&o.api_version) == "keda.sh");
    (by_label || by_owner).then(|| Owner {
        kind: "HorizontalPodAutoscaler",
        name: h.name_any(),
    })
}

/// Names of the ScaledObjects in `namespace` whose `scaleTargetRef` is
/// `target` (KEDA's defaults: `apps/v1`, `Deployment`). A cluster without
/// KEDA's CRD answers 404: no ScaledObject, not an error.
async fn scaled_objects(
    client: &Client,
    namespace: &str,
    target: &TargetRef,
) -> Result<Vec<String>, kube::Error> {
    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "scaledobjects");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let list = match bounded("listing ScaledObjects", api.list(&ListParams::default())).await {
        Ok(list) => list,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(list
        .items
        .into_iter()
        .filter(|so| names_target(&so.data["spec"]["scaleTargetRef"], target))
        .map(|so| so.name_any())
        .collect())
}

/// A ScaledObject's `scaleTargetRef` names `target`.
fn names_target(r: &serde_json::Value, target: &TargetRef) -> bool {
    let field = |k: &str, default: &'static str| r[k].as_str().unwrap_or(default).to_string();
    let Some(name) = r["name"].as_str() else {
        return false;
    };
    same_target(
        Some(&field("apiVersion", "apps/v1")),
        &field("kind", "Deployment"),
        name,
        target,
    )
}

#[cfg(test)]
mod tests;
