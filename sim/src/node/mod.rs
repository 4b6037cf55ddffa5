//! A simulated GPU node: the scenario's pods served through the protocols
//! the exporter's pod mapper reads — a kubelet pod-resources gRPC server on
//! a unix socket (device-plugin `devices` and DRA `dynamic_resources`), its
//! Node, pods and ResourceSlices in the simulated cluster's Kubernetes API
//! ([`KubeFake`]), and a generated `/proc` tree. The exporter's
//! `--simulate` and the tests run it; tests drive its changes (pods deleted,
//! claims released, slices withdrawn, kubelet restarted, API server down).

pub mod devices;
pub mod dra;
pub mod economics;
pub mod kubelet;
pub mod objects;
pub mod procfs;
pub mod replicasets;
pub mod serving;
pub mod vllm;
pub mod workloads;

/// The kubelet pod-resources v1 API (`k8s.io/kubelet/pkg/apis/podresources/v1`):
/// the server this node runs, and a client for tests.
#[allow(clippy::all, clippy::pedantic, missing_docs)] // generated
pub mod proto {
    tonic::include_proto!("v1");
}

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuscale_nvml_sim::scenario::{Pod as SimPod, PodPhase, Scenario};

use self::devices::{allocatable, list};
use self::kubelet::{FakeKubelet, KubeletData};
use self::objects::{Run, api_pod, pod_address};
use self::procfs::Layout;
use crate::kubeapi::{Cluster, KubeFake, StartError, core};

#[derive(Debug, thiserror::Error)]
pub enum SimNodeError {
    #[error("simulated node: {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("simulated node: the Kubernetes API: {0}")]
    Api(#[from] StartError),
    #[error("simulated node: pod {0}: {1}")]
    Pod(String, serde_json::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SimNodeError {
    let what = what.into();
    move |source| SimNodeError::Io { what, source }
}

/// A running simulated node. Its directory (socket, /proc) lives as long as
/// the value.
pub struct SimNode {
    dir: TempDir,
    node: String,
    allocatable: proto::AllocatableResourcesResponse,
    /// GPU or MIG UUID → DRA device name.
    dra_names: HashMap<String, String>,
    slices: Vec<serde_json::Value>,
    /// Pods currently on the node.
    pods: Mutex<Vec<Slot>>,
    /// The node's pod range, `127.<net>.0/24`.
    net: [u8; 2],
    next_index: AtomicU64,
    kubelet: Mutex<FakeKubelet>,
    api: Arc<KubeFake>,
}

impl SimNode {
    /// Starts a node with a Kubernetes API of its own, in a temporary
    /// directory: the kubelet's socket on `rt`, and the /proc tree.
    pub fn start(scenario: &Scenario, rt: &tokio::runtime::Handle) -> Result<Self, SimNodeError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        remove_stale(&std::env::temp_dir());
        let dir = std::env::temp_dir().join(format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let api = Arc::new(KubeFake::start_bare(Cluster::default())?);
        Self::start_in(scenario, rt, api, dir)
    }

    /// Starts a node of the cluster behind `api` in `dir` (created, and
    /// removed when the node goes).
    pub fn start_in(
        scenario: &Scenario,
        rt: &tokio::runtime::Handle,
        api: Arc<KubeFake>,
        dir: PathBuf,
    ) -> Result<Self, SimNodeError> {
        let dir = TempDir(dir);
        std::fs::create_dir_all(dir.0.join("proc")).map_err(io(dir.0.display().to_string()))?;
        let pods: Vec<(usize, SimPod)> = scenario.pods.iter().cloned().enumerate().collect();
        static NODES: AtomicU64 = AtomicU64::new(0);
        // One /24 per node of this process; the second octet from the
        // process, so that two simulated clusters on a machine differ.
        let net = [
            (2 + std::process::id() % 250) as u8,
            (NODES.fetch_add(1, Ordering::Relaxed) % 256) as u8,
        ];
        let allocatable = allocatable(scenario);
        let dra_names = dra::device_names(scenario);
        let data = KubeletData {
            list: list(pods.iter().map(|(_, p)| p), &scenario.node, &dra_names),
            allocatable: allocatable.clone(),
        };
        let kubelet = FakeKubelet::start(&dir.0.join("kubelet.sock"), data, rt)
            .map_err(io("kubelet socket"))?;
        let sim = Self {
            dir,
            node: scenario.node.clone(),
            allocatable,
            dra_names,
            slices: dra::resource_slices(scenario),
            next_index: AtomicU64::new(pods.len() as u64),
            pods: Mutex::new(Vec::new()),
            net,
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
        for (index, pod) in pods {
            let mut slots = sim.lock_pods();
            let ip = free_address(&slots, net);
            let slot = Slot::new(
                index,
                pod,
                Run {
                    ip,
                    ..Run::default()
                },
            );
            sim.publish_pod(&slot)?;
            slots.push(slot);
        }
        sim.publish_slices();
        sim.api.put(
            &core("nodes"),
            objects::node_object(scenario, &sim.capacity()),
        );
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

    /// The cluster's Kubernetes API.
    pub fn api(&self) -> &KubeFake {
        &self.api
    }

    /// Each device-plugin resource and how many devices it has.
    pub fn capacity(&self) -> Vec<(String, usize)> {
        self.allocatable
            .devices
            .iter()
            .map(|d| (d.resource_name.clone(), d.device_ids.len()))
            .collect()
    }

    /// The ids of `resource` no pod on the node holds.
    pub fn free_devices(&self, resource: &str) -> Vec<String> {
        devices::free(
            &self.allocatable,
            self.lock_pods().iter().map(|s| &s.pod),
            resource,
        )
    }

    /// Adds a pod (or replaces one with the same namespace/name).
    pub fn add_pod(&self, pod: &SimPod) -> Result<(), SimNodeError> {
        self.place(pod, Run::default()).map(|_| ())
    }

    /// Runs a workload's pod: the containers of its template (image,
    /// args, ports) served as the pod's, Running and Ready as `ready` says.
    /// Its address, when the node's range has one free.
    pub fn run_pod(
        &self,
        pod: &SimPod,
        containers: Vec<serde_json::Value>,
        ready: bool,
    ) -> Result<Option<String>, SimNodeError> {
        let run = Run {
            containers,
            ready: Some(ready),
            ip: None,
        };
        self.place(pod, run)
    }

    fn place(&self, pod: &SimPod, mut run: Run) -> Result<Option<String>, SimNodeError> {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed) as usize;
        let mut pods = self.lock_pods();
        pods.retain(|s| !(s.pod.namespace == pod.namespace && s.pod.name == pod.name));
        run.ip = free_address(&pods, self.net);
        if run.ip.is_none() {
            tracing::warn!(pod = %pod.name, node = %self.node, "no free pod address: served without one");
        }
        let slot = Slot::new(index, pod.clone(), run);
        self.publish_pod(&slot)?;
        let ip = slot.run.ip.clone();
        pods.push(slot);
        self.sync_kubelet(&pods);
        Ok(ip)
    }

    /// Deletes a pod from the API and the kubelet and removes its processes.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        let mut pods = self.lock_pods();
        let Some(at) = pods
            .iter()
            .position(|s| s.pod.namespace == namespace && s.pod.name == name)
        else {
            return false;
        };
        let pod = pods.remove(at).pod;
        self.sync_kubelet(&pods);
        drop(pods);
        self.api.delete_pod(namespace, name);
        for pid in pod.containers.iter().flat_map(|c| &c.pids) {
            let _ = procfs::remove(&self.proc_root(), *pid);
        }
        true
    }

    /// Changes a pod's phase in the API (the kubelet keeps listing it, as a
    /// real kubelet does for a while after a pod terminates).
    pub fn set_phase(&self, namespace: &str, name: &str, phase: PodPhase) -> bool {
        self.change(namespace, name, |s| s.pod.phase = phase)
    }

    /// A workload pod's readiness probe passes (or fails again).
    pub fn set_ready(&self, namespace: &str, name: &str, ready: bool) -> bool {
        self.change(namespace, name, |s| s.run.ready = Some(ready))
    }

    fn change(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Slot)) -> bool {
        let mut pods = self.lock_pods();
        let Some(slot) = pods
            .iter_mut()
            .find(|s| s.pod.namespace == namespace && s.pod.name == name)
        else {
            return false;
        };
        f(slot);
        match self
            .api
            .apply_pod(&api_pod(&slot.pod, &self.node, slot.index, &slot.run))
        {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(pod = %name, error = %e, "simulated node: pod not published");
                false
            }
        }
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
        for p in pods
            .iter_mut()
            .map(|s| &mut s.pod)
            .filter(|p| p.namespace == namespace && p.name == pod)
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

    fn publish_pod(&self, slot: &Slot) -> Result<(), SimNodeError> {
        let (i, pod) = (slot.index, &slot.pod);
        let layout = Layout::for_index(i);
        let qos = procfs::qos_for_index(i);
        for c in &pod.containers {
            let text = procfs::cgroup_text(layout, qos, &pod.uid, &c.id);
            for pid in &c.pids {
                procfs::write(&self.proc_root(), *pid, &text).map_err(io("/proc tree"))?;
            }
        }
        self.api
            .apply_pod(&api_pod(pod, &self.node, i, &slot.run))
            .map_err(|e| SimNodeError::Pod(format!("{}/{}", pod.namespace, pod.name), e))
    }

    fn sync_kubelet(&self, pods: &[Slot]) {
        let data = KubeletData {
            list: list(pods.iter().map(|s| &s.pod), &self.node, &self.dra_names),
            allocatable: self.allocatable.clone(),
        };
        self.lock_kubelet().set(data);
    }

    fn lock_pods(&self) -> MutexGuard<'_, Vec<Slot>> {
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

/// A pod on the node: its layout index (cgroup layout, QoS), the
/// scenario's pod and what the node adds.
struct Slot {
    index: usize,
    pod: SimPod,
    run: Run,
}

impl Slot {
    fn new(index: usize, pod: SimPod, run: Run) -> Self {
        Self { index, pod, run }
    }
}

/// The lowest address of the node's range no pod holds (as host-local
/// IPAM hands out a freed one again); none when all 253 are taken.
fn free_address(pods: &[Slot], net: [u8; 2]) -> Option<String> {
    (2..=254)
        .map(|host| pod_address(net, host))
        .find(|a| pods.iter().all(|s| s.run.ip.as_ref() != Some(a)))
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
