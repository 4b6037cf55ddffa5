//! A simulated GPU node: the scenario's pods served through the protocols
//! the exporter's pod mapper reads — a kubelet pod-resources gRPC server on
//! a temporary unix socket (device-plugin `devices` and DRA
//! `dynamic_resources`), a Kubernetes API for the pod and ResourceSlice
//! watches on 127.0.0.1, and a generated `/proc` tree. The exporter's
//! `--simulate` and the tests run it; tests drive its changes (pods deleted,
//! claims released, slices withdrawn, kubelet restarted, API server down).

pub mod dra;
pub mod kubeapi;
pub mod kubelet;
pub mod procfs;

/// The kubelet pod-resources v1 API (`k8s.io/kubelet/pkg/apis/podresources/v1`):
/// the server this node runs, and a client for tests.
#[allow(clippy::all, clippy::pedantic, missing_docs)] // generated
pub mod proto {
    tonic::include_proto!("v1");
}

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use gpuscale_nvml_sim::scenario::{Pod as SimPod, PodPhase, Scenario};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use self::kubeapi::FakeKubeApi;
use self::kubelet::{FakeKubelet, KubeletData};
use self::procfs::Layout;

#[derive(Debug, thiserror::Error)]
pub enum SimNodeError {
    #[error("simulated node: {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SimNodeError {
    let what = what.into();
    move |source| SimNodeError::Io { what, source }
}

/// A running simulated node. Its temporary directory (socket, /proc) lives as
/// long as the value.
pub struct SimNode {
    dir: TempDir,
    node: String,
    allocatable: proto::AllocatableResourcesResponse,
    /// GPU or MIG UUID → DRA device name.
    dra_names: HashMap<String, String>,
    slices: Vec<serde_json::Value>,
    /// Scenario pods currently on the node, with their layout index.
    pods: Mutex<Vec<(usize, SimPod)>>,
    next_index: AtomicU64,
    kubelet: Mutex<FakeKubelet>,
    api: FakeKubeApi,
}

impl SimNode {
    /// Starts the servers on `rt` and writes the /proc tree.
    pub fn start(scenario: &Scenario, rt: &tokio::runtime::Handle) -> Result<Self, SimNodeError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        remove_stale(&std::env::temp_dir());
        let dir = TempDir(std::env::temp_dir().join(format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )));
        std::fs::create_dir_all(dir.0.join("proc")).map_err(io(dir.0.display().to_string()))?;
        let pods: Vec<(usize, SimPod)> = scenario.pods.iter().cloned().enumerate().collect();
        let allocatable = allocatable(scenario);
        let dra_names = dra::device_names(scenario);
        let data = KubeletData {
            list: list(pods.iter().map(|(_, p)| p), &scenario.node, &dra_names),
            allocatable: allocatable.clone(),
        };
        let kubelet = FakeKubelet::start(&dir.0.join("kubelet.sock"), data, rt)
            .map_err(io("kubelet socket"))?;
        let api = FakeKubeApi::start(rt).map_err(io("API server"))?;
        let sim = Self {
            dir,
            node: scenario.node.clone(),
            allocatable,
            dra_names,
            slices: dra::resource_slices(scenario),
            next_index: AtomicU64::new(pods.len() as u64),
            pods: Mutex::new(Vec::new()),
            kubelet: Mutex::new(kubelet),
            api,
        };
        let in_pods: HashSet<u32> = pods
            .iter()
            .flat_map(|(_, p)| p.containers.iter().flat_map(|c| c.pids.clone()))
            .collect();
        for gpu in &scenario.gpus {
            for p in gpu.processes.iter().filter(|p| !in_pods.contains(&p.pid)) {
                procfs::write(&sim.proc_root(), p.pid, procfs::HOST_CGROUP)
                    .map_err(io("/proc tree"))?;
            }
        }
        for (i, pod) in pods {
            sim.publish_pod(i, &pod)?;
            sim.lock_pods().push((i, pod));
        }
        sim.publish_slices();
        Ok(sim)
    }

    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The kubelet's pod-resources socket (`--pod-resources-socket`).
    pub fn socket(&self) -> PathBuf {
        self.dir.0.join("kubelet.sock")
    }

    /// The generated `/proc` tree (`--proc-root`).
    pub fn proc_root(&self) -> PathBuf {
        self.dir.0.join("proc")
    }

    /// The Kubernetes API's plain-HTTP URL (`--kube-api-url`).
    pub fn api_url(&self) -> String {
        self.api.url()
    }

    pub fn api(&self) -> &FakeKubeApi {
        &self.api
    }

    /// Adds a pod (or replaces one with the same namespace/name).
    pub fn add_pod(&self, pod: &SimPod) -> Result<(), SimNodeError> {
        let i = self.next_index.fetch_add(1, Ordering::Relaxed) as usize;
        self.publish_pod(i, pod)?;
        let mut pods = self.lock_pods();
        pods.retain(|(_, p)| !(p.namespace == pod.namespace && p.name == pod.name));
        pods.push((i, pod.clone()));
        self.sync_kubelet(&pods);
        Ok(())
    }

    /// Deletes a pod from the API and the kubelet and removes its processes.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        let mut pods = self.lock_pods();
        let Some(at) = pods
            .iter()
            .position(|(_, p)| p.namespace == namespace && p.name == name)
        else {
            return false;
        };
        let (_, pod) = pods.remove(at);
        self.sync_kubelet(&pods);
        drop(pods);
        self.api.delete(namespace, name);
        for pid in pod.containers.iter().flat_map(|c| &c.pids) {
            let _ = procfs::remove(&self.proc_root(), *pid);
        }
        true
    }

    /// Changes a pod's phase in the API (the kubelet keeps listing it, as a
    /// real kubelet does for a while after a pod terminates).
    pub fn set_phase(&self, namespace: &str, name: &str, phase: PodPhase) -> bool {
        let pods = self.lock_pods();
        let Some((i, pod)) = pods
            .iter()
            .find(|(_, p)| p.namespace == namespace && p.name == name)
        else {
            return false;
        };
        let pod = SimPod {
            phase,
            ..pod.clone()
        };
        self.api.apply(api_pod(&pod, &self.node, *i));
        true
    }

    /// The kubelet stops: socket removed, connections closed.
    pub fn stop_kubelet(&self) {
        self.lock_kubelet().stop();
    }

    /// The kubelet starts again with a new socket.
    pub fn start_kubelet(&self) -> Result<(), SimNodeError> {
        self.lock_kubelet().resume().map_err(io("kubelet socket"))
    }

    /// Publishes the node's ResourceSlices (as the DRA driver does at start).
    pub fn publish_slices(&self) {
        for s in &self.slices {
            self.api.apply_slice(s.clone());
        }
    }

    /// Withdraws the node's ResourceSlices (driver not running yet, or gone).
    pub fn delete_slices(&self) {
        self.api.delete_slices();
    }

    /// A claim released: the kubelet no longer lists it for the pod.
    pub fn remove_claim(&self, namespace: &str, pod: &str, claim: &str) -> bool {
        let mut pods = self.lock_pods();
        let mut found = false;
        for (_, p) in pods
            .iter_mut()
            .filter(|(_, p)| p.namespace == namespace && p.name == pod)
        {
            for c in &mut p.containers {
                let before = c.claims.len();
                c.claims.retain(|cl| cl.name != claim);
                found |= c.claims.len() != before;
            }
        }
        self.sync_kubelet(&pods);
        found
    }

    pub fn set_api_down(&self, down: bool) {
        self.api.set_down(down);
    }

    fn publish_pod(&self, i: usize, pod: &SimPod) -> Result<(), SimNodeError> {
        let layout = Layout::for_index(i);
        let qos = procfs::qos_for_index(i);
        for c in &pod.containers {
            let text = procfs::cgroup_text(layout, qos, &pod.uid, &c.id);
            for pid in &c.pids {
                procfs::write(&self.proc_root(), *pid, &text).map_err(io("/proc tree"))?;
            }
        }
        self.api.apply(api_pod(pod, &self.node, i));
        Ok(())
    }

    fn sync_kubelet(&self, pods: &[(usize, SimPod)]) {
        let data = KubeletData {
            list: list(pods.iter().map(|(_, p)| p), &self.node, &self.dra_names),
            allocatable: self.allocatable.clone(),
        };
        self.lock_kubelet().set(data);
    }

    fn lock_pods(&self) -> MutexGuard<'_, Vec<(usize, SimPod)>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_kubelet(&self) -> MutexGuard<'_, FakeKubelet> {
        self.kubelet.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        // The directory goes after this, when the field drops.
        self.lock_kubelet().stop();
    }
}

const PREFIX: &str = "gpuscale-simnode-";

/// A directory removed when dropped: on shutdown, and on every early
/// return of [`SimNode::start`].
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the directories of simulated nodes whose process is gone (killed
/// before it could clean up: SIGKILL, out of memory).
fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// What `List` answers: every pod with devices or claims, terminal ones included.
fn list<'a>(
    pods: impl Iterator<Item = &'a SimPod>,
    node: &str,
    dra_names: &HashMap<String, String>,
) -> proto::ListPodResourcesResponse {
    proto::ListPodResourcesResponse {
        pod_resources: pods
            .map(|p| proto::PodResources {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                containers: p
                    .containers
                    .iter()
                    .map(|c| proto::ContainerResources {
                        name: c.name.clone(),
                        devices: c
                            .devices
                            .iter()
                            .map(|d| proto::ContainerDevices {
                                resource_name: d.resource.clone(),
                                device_ids: d.ids.clone(),
                                topology: None,
                            })
                            .collect(),
                        dynamic_resources: dra::dynamic_resources(c, &p.namespace, node, dra_names),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Every GPU (or MIG instance) of the scenario the device plugin manages
/// (all but those claimed through DRA); time-sliced GPUs as as many
/// replicas as the pods use (at least the highest replica index + 1).
fn allocatable(scenario: &Scenario) -> proto::AllocatableResourcesResponse {
    let claimed: HashSet<&str> = scenario
        .claims()
        .flat_map(|c| c.devices.iter().map(String::as_str))
        .collect();
    // device uuid → (resource, replicas)
    let mut used: BTreeMap<String, (String, Option<u32>)> = BTreeMap::new();
    for d in scenario
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .flat_map(|c| &c.devices)
    {
        for id in &d.ids {
            let (uuid, replica) = match id.split_once("::") {
                Some((u, n)) => (u, n.parse::<u32>().ok()),
                None => (id.as_str(), None),
            };
            let entry = used
                .entry(uuid.to_owned())
                .or_insert((d.resource.clone(), None));
            if let Some(n) = replica {
                entry.1 = Some(entry.1.unwrap_or(0).max(n + 1));
            }
        }
    }
    let mut by_resource: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |uuid: &str, default_resource: String| {
        let (resource, replicas) = used.get(uuid).cloned().unwrap_or((default_resource, None));
        let ids = by_resource.entry(resource).or_default();
        match replicas {
            Some(n) => ids.extend((0..n).map(|r| format!("{uuid}::{r}"))),
            None => ids.push(uuid.to_owned()),
        }
    };
    for gpu in &scenario.gpus {
        if gpu.mig.is_empty() && !claimed.contains(gpu.uuid.as_str()) {
            add(&gpu.uuid, "nvidia.com/gpu".to_owned());
        }
        for mig in gpu
            .mig
            .iter()
            .filter(|m| !claimed.contains(m.uuid.as_str()))
        {
            add(&mig.uuid, format!("nvidia.com/mig-{}", mig.profile));
        }
    }
    proto::AllocatableResourcesResponse {
        devices: by_resource
            .into_iter()
            .map(|(resource_name, device_ids)| proto::ContainerDevices {
                resource_name,
                device_ids,
                topology: None,
            })
            .collect(),
        ..Default::default()
    }
}

/// The API object of a scenario pod. A `Deployment` owner is served the way
/// the Deployment controller creates pods: owned by ReplicaSet
/// `<deployment>-<pod-template-hash>`, with the `pod-template-hash` label.
pub fn api_pod(pod: &SimPod, node: &str, index: usize) -> Pod {
    let layout = Layout::for_index(index);
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
                .map(|c| Container {
                    name: c.name.clone(),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(
                pod.containers
                    .iter()
                    .map(|c| ContainerStatus {
                        name: c.name.clone(),
                        container_id: Some(format!("{}://{}", layout.scheme(), c.id)),
                        image: "registry.example/sim:latest".into(),
                        image_id: String::new(),
                        ready: pod.phase == PodPhase::Running,
                        restart_count: 0,
                        ..ContainerStatus::default()
                    })
                    .collect(),
            ),
            ..PodStatus::default()
        }),
    }
}

/// A stable UID for a name.
fn uid_of(name: &str) -> String {
    format!(
        "00000000-0000-4000-8000-{:012x}",
        fnv(name) & 0xffff_ffff_ffff
    )
}

/// A stable 10-character hash in the Deployment controller's alphabet.
fn template_hash(name: &str) -> String {
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
        );
        let owner = p.metadata.owner_references.as_ref().and_then(|o| o.first());
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), o.name.as_str())),
            Some(("ReplicaSet", "web-5f6d"))
        );
        // Without a hash label one is made up, and the label added to match.
        let p = api_pod(&pod("Deployment", &[]), "n1", 0);
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
        let p = api_pod(&pod("StatefulSet", &[]), "n1", 2);
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
