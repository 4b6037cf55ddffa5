//! Node economics on the simulated cluster (`gpuscale-sim
//! --node-economics`, and the stories): the node's instance and capacity
//! type labels, CPU-only pods with each reason the node autoscalers refuse
//! to move a pod, the PodDisruptionBudgets of some, a DaemonSet pod that
//! keeps nothing, and a parked GPU workload (a Deployment at 0 replicas)
//! whose node should have gone.

use serde_json::{Value, json};

use super::objects::uid_of;
use crate::kubeapi::{Gvr, KubeFake, core};

/// The node's labels the fixtures set.
pub const NODE_LABELS: &[(&str, &str)] = &[
    ("node.kubernetes.io/instance-type", "p5.48xlarge"),
    ("karpenter.sh/capacity-type", "on-demand"),
    ("karpenter.sh/nodepool", "gpu-h100"),
];

pub fn pdbs() -> Gvr {
    ("policy".into(), "v1".into(), "poddisruptionbudgets".into())
}

pub fn deployments() -> Gvr {
    ("apps".into(), "v1".into(), "deployments".into())
}

/// Sets `labels` (and `annotations`) on the node's Node object, keeping
/// the rest; false when there is no such Node.
pub fn label_node(
    api: &KubeFake,
    node: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> bool {
    let Some(mut obj) = api.get(&core("nodes"), "", node) else {
        return false;
    };
    for (field, kv) in [("labels", labels), ("annotations", annotations)] {
        let map = &mut obj["metadata"][field];
        if !map.is_object() {
            *map = json!({});
        }
        for (k, v) in kv {
            map[*k] = json!(v);
        }
    }
    api.put(&core("nodes"), obj);
    true
}

/// A running CPU-only pod on `node`.
pub struct CpuPod<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// Controller (kind, name); `None`: a bare pod.
    pub owner: Option<(&'a str, &'a str)>,
    pub labels: Value,
    pub annotations: Value,
    pub volumes: Value,
}

impl CpuPod<'_> {
    pub fn object(&self, node: &str) -> Value {
        let owners = self.owner.map(|(kind, name)| {
            let api = if kind == "Job" { "batch/v1" } else { "apps/v1" };
            json!([{ "apiVersion": api, "kind": kind, "name": name, "uid": uid_of(name), "controller": true, "blockOwnerDeletion": true }])
        });
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": self.namespace, "name": self.name,
                "uid": uid_of(&format!("{}/{}", self.namespace, self.name)),
                "labels": self.labels, "annotations": self.annotations,
                "ownerReferences": owners.unwrap_or(json!([])),
            },
            "spec": {
                "nodeName": node,
                "containers": [{ "name": "main", "image": "registry.example/app:1", "resources": { "requests": { "cpu": "100m" } } }],
                "volumes": self.volumes,
            },
            "status": {
                "phase": "Running",
                "conditions": [{ "type": "Ready", "status": "True" }],
                "containerStatuses": [{ "name": "main", "ready": true, "restartCount": 0, "image": "registry.example/app:1", "imageID": "", "started": true }],
            },
        })
    }
}

/// The CPU-only pods of the fixtures, one per blocker kind, and one
/// DaemonSet pod.
pub fn cpu_pods() -> Vec<CpuPod<'static>> {
    let none = || json!({});
    let pod = |namespace, name, owner, labels, annotations, volumes| CpuPod {
        namespace,
        name,
        owner,
        labels,
        annotations,
        volumes,
    };
    vec![
        pod(
            "web",
            "frontend-5d8f7c9b4-x7k2p",
            Some(("ReplicaSet", "frontend-5d8f7c9b4")),
            json!({ "app": "frontend" }),
            none(),
            json!([]),
        ),
        pod("tools", "debug-shell", None, none(), none(), json!([])),
        pod(
            "cache",
            "redis-0",
            Some(("StatefulSet", "redis")),
            json!({ "app": "redis" }),
            none(),
            json!([{ "name": "data", "emptyDir": {} }]),
        ),
        pod(
            "batch",
            "etl-28750-q2vnd",
            Some(("Job", "etl-28750")),
            none(),
            json!({ "cluster-autoscaler.kubernetes.io/safe-to-evict": "false" }),
            json!([]),
        ),
        pod(
            "ml",
            "notebook-0",
            Some(("StatefulSet", "notebook")),
            none(),
            json!({ "karpenter.sh/do-not-disrupt": "true" }),
            json!([]),
        ),
        pod(
            "kube-system",
            "metrics-server-6b9d5c7f8-r4tnm",
            Some(("ReplicaSet", "metrics-server-6b9d5c7f8")),
            json!({ "k8s-app": "metrics-server" }),
            none(),
            json!([]),
        ),
        pod(
            "monitoring",
            "node-exporter-9fz2k",
            Some(("DaemonSet", "node-exporter")),
            json!({ "app": "node-exporter" }),
            none(),
            json!([{ "name": "root", "hostPath": { "path": "/" } }]),
        ),
    ]
}

/// A PodDisruptionBudget selecting `app`, with the status the disruption
/// controller would give it for `allowed` disruptions.
pub fn pdb(namespace: &str, name: &str, app: &str, spec: Value, allowed: i64) -> Value {
    let mut spec = spec;
    spec["selector"] = json!({ "matchLabels": { "app": app } });
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "namespace": namespace, "name": name, "generation": 1 },
        "spec": spec,
        "status": { "observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1 },
    })
}

/// The parked GPU workload: 0 replicas of a one-GPU Deployment.
pub fn parked_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "namespace": "ml", "name": "chat", "labels": { "app": "chat" } },
        "spec": { "replicas": 0, "selector": { "matchLabels": { "app": "chat" } },
            "template": { "metadata": { "labels": { "app": "chat" } },
                "spec": { "containers": [{ "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                    "resources": { "limits": { "nvidia.com/gpu": "1" } } }] } } },
        "status": { "replicas": 0, "readyReplicas": 0 },
    })
}

/// Puts all of it into the cluster of `node`.
pub fn apply(api: &KubeFake, node: &str) {
    label_node(api, node, NODE_LABELS, &[]);
    for p in cpu_pods() {
        api.put(&core("pods"), p.object(node));
    }
    api.put(
        &pdbs(),
        pdb(
            "web",
            "frontend",
            "frontend",
            json!({ "maxUnavailable": 0 }),
            0,
        ),
    );
    api.put(
        &pdbs(),
        pdb("cache", "redis", "redis", json!({ "minAvailable": 0 }), 1),
    );
    api.put(&deployments(), parked_deployment());
}
