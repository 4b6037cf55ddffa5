//! The ReplicaSet the Deployment controller keeps for a Deployment's pods:
//! `<deployment>-<pod-template-hash>`, owned by the Deployment, with its
//! replicas, selector and template (the `pod-template-hash` label added)
//! and its pods' counts, so `kubectl get rs` and `kubectl describe deploy`
//! read as on a cluster. Its uid is the one the pods' owner references
//! carry ([`super::objects::api_pod`]): deleting the Deployment deletes it,
//! and it its pods, by the API's garbage collection.

use serde_json::{Value, json};

use super::SimNode;
use super::objects::{template_hash, uid_of};
use crate::kubeapi::Gvr;

fn gvr() -> Gvr {
    ("apps".into(), "v1".into(), "replicasets".into())
}

/// The ReplicaSet `deployment` should have now, with (pods, ready pods).
pub fn desired(deployment: &Value, (pods, ready): (usize, usize)) -> Option<Value> {
    let meta = &deployment["metadata"];
    let (ns, name) = (meta["namespace"].as_str()?, meta["name"].as_str()?);
    let hash = template_hash(name);
    let rs = format!("{name}-{hash}");
    let mut selector = deployment["spec"]["selector"].clone();
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let mut template = deployment["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    Some(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": rs, "namespace": ns, "uid": uid_of(&rs),
            "labels": template["metadata"]["labels"],
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                "uid": meta["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": deployment["spec"]["replicas"].as_u64().unwrap_or(1),
            "selector": selector, "template": template},
        "status": {"replicas": pods, "readyReplicas": ready, "availableReplicas": ready,
            "fullyLabeledReplicas": pods, "observedGeneration": 1},
    }))
}

/// Writes the Deployment's ReplicaSet when it changed.
pub fn keep(node: &SimNode, deployment: &Value, counts: (usize, usize)) {
    let Some(want) = desired(deployment, counts) else {
        return;
    };
    let (ns, name) = (
        want["metadata"]["namespace"].as_str().unwrap_or(""),
        want["metadata"]["name"].as_str().unwrap_or(""),
    );
    let have = node.api().get(&gvr(), ns, name);
    let same = have
        .as_ref()
        .is_some_and(|h| h["spec"] == want["spec"] && h["status"] == want["status"]);
    if !same {
        node.api().put(&gvr(), want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replicaset_is_owned_by_its_deployment_and_named_by_the_hash() {
        let d = json!({"metadata": {"name": "llm", "namespace": "ml", "uid": "d-1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}},
                "template": {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": []}}}});
        let rs = desired(&d, (2, 1)).expect("a ReplicaSet");
        let hash = template_hash("llm");
        assert_eq!(rs["metadata"]["name"], format!("llm-{hash}"));
        assert_eq!(rs["metadata"]["uid"], uid_of(&format!("llm-{hash}")));
        assert_eq!(rs["metadata"]["ownerReferences"][0]["uid"], "d-1");
        assert_eq!(
            rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
            hash
        );
        assert_eq!(
            (
                rs["spec"]["replicas"].clone(),
                rs["status"]["readyReplicas"].clone()
            ),
            (json!(2), json!(1))
        );
    }
}
