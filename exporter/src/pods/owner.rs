//! Pod owner → workload. A ReplicaSet is named `<deployment>-<pod-template-hash>`
//! by the Deployment controller and its pods carry that hash as a label, so the
//! Deployment is resolved from the pod alone: no ReplicaSet watch, no API call.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Workload name and kind (`Deployment`, `StatefulSet`, `DaemonSet`, `Job`,
/// `ReplicaSet`, …; `Pod` for a bare pod).
pub fn workload(
    pod_name: &str,
    owners: &[OwnerReference],
    labels: &BTreeMap<String, String>,
) -> (String, String) {
    let Some(owner) = owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| owners.first())
    else {
        return (pod_name.to_owned(), "Pod".to_owned());
    };
    if owner.kind == "ReplicaSet"
        && let Some(hash) = labels.get("pod-template-hash")
        && let Some(deployment) = owner
            .name
            .strip_suffix(hash.as_str())
            .and_then(|n| n.strip_suffix('-'))
        && !deployment.is_empty()
    {
        return (deployment.to_owned(), "Deployment".to_owned());
    }
    (owner.name.clone(), owner.kind.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn replicaset_resolves_to_deployment_by_hash() {
        let got = workload(
            "web-7d4b9c-x2x",
            &[owner("ReplicaSet", "web-7d4b9c", true)],
            &labels(&[("pod-template-hash", "7d4b9c")]),
        );
        assert_eq!(got, ("web".into(), "Deployment".into()));
    }

    #[test]
    fn bare_replicaset_stays_replicaset() {
        let got = workload("rs-abc", &[owner("ReplicaSet", "rs", true)], &labels(&[]));
        assert_eq!(got, ("rs".into(), "ReplicaSet".into()));
    }

    #[test]
    fn other_owners_as_they_are() {
        for kind in ["StatefulSet", "DaemonSet", "Job"] {
            let got = workload(
                "p",
                &[owner("Other", "x", false), owner(kind, "w", true)],
                &labels(&[]),
            );
            assert_eq!(got, ("w".into(), kind.into()));
        }
    }

    #[test]
    fn bare_pod_is_its_own_workload() {
        assert_eq!(workload("p", &[], &labels(&[])), ("p".into(), "Pod".into()));
    }
}
