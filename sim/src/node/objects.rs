//! The Kubernetes objects of a simulated node: its Node and its pods as
//! the API serves them, and the stable names and UIDs they carry.
//!
//! A pod's address is a loopback address of its own (`127.h.n.x`, one
//! `/24` per node), which Linux routes without set-up: what listens there
//! (the fake vLLM the node runs for a vLLM container, or a server the user
//! starts on it) is reachable from the machine, as a pod IP is from inside
//! a cluster.

use gpuscale_nvml_sim::scenario::{Pod as SimPod, PodPhase, Scenario};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use super::procfs::Layout;

/// The Node object: its GPUs as capacity of the resources the device
/// plugin advertises, Ready.
pub fn node_object(scenario: &Scenario, resources: &[(String, usize)]) -> Value {
    let capacity: serde_json::Map<String, Value> = resources
        .iter()
        .map(|(r, n)| (r.clone(), json!(n.to_string())))
        .collect();
    let product = scenario.gpus.first().map(|g| g.model.replace(' ', "-"));
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": scenario.node,
            "uid": uid_of(&scenario.node),
            "labels": {
                "kubernetes.io/hostname": scenario.node,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": scenario.gpus.len().to_string(),
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady" }],
            "nodeInfo": { "kubeletVersion": "v1.33.0", "containerRuntimeVersion": "containerd://2.0.0" },
        },
    })
}

/// What the node knows of a pod beyond the scenario's fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Its address on the node's pod range, while it has one.
    pub ip: Option<String>,
    /// The containers of the template it was made from (image, command,
    /// args, env, ports), served as the pod's; empty for a scenario pod.
    pub containers: Vec<Value>,
    /// Readiness when it is not the phase's: a workload's pod is Running
    /// and not Ready while its model loads.
    pub ready: Option<bool>,
}

/// Ready (and ContainersReady) while Running, as a pod whose readiness
/// probe passes, unless `run` says otherwise.
fn conditions(ready: bool) -> Vec<PodCondition> {
    let ready = if ready { "True" } else { "False" };
    [("PodScheduled", "True"), ("Initialized", "True")]
        .into_iter()
        .chain([("ContainersReady", ready), ("Ready", ready)])
        .map(|(t, s)| PodCondition {
            type_: t.into(),
            status: s.into(),
            ..PodCondition::default()
        })
        .collect()
}

/// The API object of a scenario pod. A `Deployment` owner is served the way
/// the Deployment controller creates pods: owned by ReplicaSet
/// `<deployment>-<pod-template-hash>`, with the `pod-template-hash` label.
pub fn api_pod(pod: &SimPod, node: &str, index: usize, run: &Run) -> Pod {
    let layout = Layout::for_index(index);
    let ready = run.ready.unwrap_or(pod.phase == PodPhase::Running);
    let mut labels = pod.labels.clone();
    let owner = pod.owner.as_ref().map(|o| {
        let (kind, name, api_version) = if o.kind == "Deployment" {
            let hash = labels
                .get("pod-template-hash")
                .cloned()
                .unwrap_or_else(|| template_hash(&o.name));
            labels.insert("pod-template-hash".into(), hash.clone());
            (
                "ReplicaSet".to_owned(),
                format!("{}-{hash}", o.name),
                "apps/v1",
            )
        } else {
            let api = if o.kind == "Job" {
                "batch/v1"
            } else {
                "apps/v1"
            };
            (o.kind.clone(), o.name.clone(), api)
        };
        OwnerReference {
            api_version: api_version.into(),
            kind,
            uid: uid_of(&name),
            name,
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    });
    let phase = match pod.phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            containers: pod
                .containers
                .iter()
                .map(|c| container(&c.name, &run.containers))
                .collect(),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            // Its address once its containers started (not while Pending).
            pod_ip: run.ip.clone().filter(|_| pod.phase != PodPhase::Pending),
            conditions: Some(conditions(ready)),
            container_statuses: Some(
                pod.containers
                    .iter()
                    .map(|c| ContainerStatus {
                        name: c.name.clone(),
                        container_id: Some(format!("{}://{}", layout.scheme(), c.id)),
                        image: "registry.example/sim:latest".into(),
                        image_id: String::new(),
                        ready,
                        restart_count: 0,
                        ..ContainerStatus::default()
                    })
                    .collect(),
            ),
            ..PodStatus::default()
        }),
    }
}

/// The container `name` as its template describes it (the name alone for
/// a scenario pod, or a template the API types cannot read).
fn container(name: &str, template: &[Value]) -> Container {
    let described = template
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| serde_json::from_value::<Container>(c.clone()).ok());
    Container {
        name: name.to_owned(),
        ..described.unwrap_or_default()
    }
}

/// The address of slot `host` (2–254) on the node range `net`.
pub fn pod_address(net: [u8; 2], host: u8) -> String {
    format!("127.{}.{}.{host}", net[0], net[1])
}

/// A stable UID for a name.
pub fn uid_of(name: &str) -> String {
    format!(
        "00000000-0000-4000-8000-{:012x}",
        fnv(name) & 0xffff_ffff_ffff
    )
}

/// A stable 10-character hash in the Deployment controller's alphabet.
pub fn template_hash(name: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = fnv(name);
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuscale_nvml_sim::scenario::{Container as SimContainer, DeviceAlloc, Owner};

    fn pod(owner: &str, labels: &[(&str, &str)]) -> SimPod {
        SimPod {
            namespace: "ns".into(),
            name: "web-abc".into(),
            uid: "u".into(),
            phase: PodPhase::Running,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            owner: Some(Owner {
                kind: owner.into(),
                name: "web".into(),
            }),
            containers: vec![SimContainer {
                name: "c".into(),
                id: "a".repeat(64),
                devices: vec![DeviceAlloc {
                    resource: "nvidia.com/gpu".into(),
                    ids: vec!["GPU-x::2".into()],
                }],
                claims: vec![],
                pids: vec![7],
            }],
        }
    }

    #[test]
    fn deployment_owner_is_served_as_its_replicaset() {
        let p = api_pod(
            &pod("Deployment", &[("pod-template-hash", "5f6d")]),
            "n1",
            0,
            &Run::default(),
        );
        let owner = p.metadata.owner_references.as_ref().and_then(|o| o.first());
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), o.name.as_str())),
            Some(("ReplicaSet", "web-5f6d"))
        );
        // Without a hash label one is made up, and the label added to match.
        let p = api_pod(&pod("Deployment", &[]), "n1", 0, &Run::default());
        let hash = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
            .cloned()
            .unwrap_or_default();
        let owner = p
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .map(|o| o.name.clone());
        assert_eq!(owner, Some(format!("web-{hash}")));
        let run = Run {
            ip: Some(pod_address([40, 0], 2)),
            containers: vec![json!({"name": "c", "image": "vllm/vllm-openai:v0.11.0",
                "ports": [{"name": "http", "containerPort": 8000}]})],
            ready: Some(false),
        };
        let p = api_pod(&pod("StatefulSet", &[]), "n1", 2, &run);
        let c = &p
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default()[0];
        assert_eq!(c.image.as_deref(), Some("vllm/vllm-openai:v0.11.0"));
        assert_eq!(c.ports.as_ref().map(|p| p[0].container_port), Some(8000));
        let st = p.status.clone().unwrap_or_default();
        assert_eq!(st.pod_ip.as_deref(), Some("127.40.0.2"));
        let ready = st
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        assert_eq!(
            ready.map(|c| c.status),
            Some("False".to_owned()),
            "Running, not Ready"
        );
        let status = p
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        assert_eq!(
            status[0].container_id.as_deref(),
            Some(format!("cri-o://{}", "a".repeat(64)).as_str())
        );
        assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
    }
}
