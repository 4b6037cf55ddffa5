//! Pod-identity helpers: scenario files and a test-controlled simulated node
//! (kubelet pod-resources socket, Kubernetes API, /proc tree) whose changes
//! the test drives while the real exporter binary reads it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gpuscale_nvml_sim::scenario::{self, Scenario};
use gpuscale_sim::node::SimNode;

/// A small node with every allocation shape:
/// - GPU 0: exclusive, StatefulSet pod, plus a host process (no pod);
/// - GPU 1: time-sliced by two pods of one Deployment, 60 % and 10 % SM;
/// - GPU 2: MIG, instance 1 → Deployment pod, instance 2 → Job pod;
/// - GPU 3: held by a Succeeded pod (must show no pod labels);
/// - GPU 4: unallocated.
pub const STORY_SCENARIO: &str = include_str!("../../scenarios/pods-story.yaml");

/// A mixed node: device-plugin and DRA allocations side by side.
/// - GPU 0: device plugin, Deployment pod `web-…`;
/// - GPU 1: DRA claim `train-gpu` of StatefulSet pod `trainer-0`;
/// - GPU 2: MIG, instance 1 → DRA claim `asr-mig` (Deployment pod),
///   instance 2 → device plugin (Job pod);
/// - GPU 3: one claim `shared-gpu` shared by two pods (no single owner);
/// - pod `net-…` also holds a NIC of another DRA driver.
pub const DRA_SCENARIO: &str = include_str!("../../scenarios/pods-dra.yaml");

/// `pods` pods time-slicing `gpus` GPUs (`<uuid>::<n>` replicas), one process
/// each with its own SM utilization (1 % + pod index mod 50). With
/// `on_claims`, the pods of odd-numbered GPUs hold them through DRA claims
/// instead (one claim per pod, shared by `share_id`): half the pods.
pub fn many_pods_scenario(gpus: usize, pods: usize, on_claims: bool) -> String {
    let mut y = String::from("node: busy-node\ngpus:\n");
    for g in 0..gpus {
        let _ = write!(
            y,
            "  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-{g:08x}-0000-4000-8000-00000000abcd\n    pci_bus_id: \"00000000:{:02x}:00.0\"\n    memory_mib: 81559\n    load: {{ utilization: 80 }}\n",
            0x10 + g
        );
        y.push_str("    processes:\n");
        for p in (0..pods).filter(|p| p % gpus == g) {
            let _ = writeln!(
                y,
                "      - {{ pid: {}, name: worker, memory_mib: {}, sm_utilization: {} }}",
                10_000 + p,
                100 + p,
                1 + p % 50
            );
        }
    }
    y.push_str("pods:\n");
    for p in 0..pods {
        let g = p % gpus;
        let holds = if on_claims && g % 2 == 1 {
            format!(
                "claims: [ {{ name: worker-{p}-gpu, share_id: share-{p}, devices: [GPU-{g:08x}-0000-4000-8000-00000000abcd] }} ]"
            )
        } else {
            format!(
                "devices: [ {{ resource: nvidia.com/gpu, ids: [\"GPU-{g:08x}-0000-4000-8000-00000000abcd::{r}\"] }} ]",
                r = p / gpus
            )
        };
        let _ = write!(
            y,
            "  - namespace: ns-{ns}\n    name: worker-{p}\n    uid: {p:08x}-0000-4000-8000-00000000beef\n    owner: {{ kind: Deployment, name: worker-{ns} }}\n    labels: {{ team: team-{ns} }}\n    containers:\n      - name: main\n        id: {p:064x}\n        {holds}\n        pids: [{pid}]\n",
            ns = p % 10,
            pid = 10_000 + p
        );
    }
    y
}

pub fn parse(yaml: &str) -> Scenario {
    scenario::parse(yaml, "test scenario").unwrap_or_else(|e| panic!("{e}"))
}

pub fn write_scenario(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, yaml).expect("write scenario");
    path
}

/// A simulated node run by the test (its own async runtime), for stories
/// that change the node while the exporter runs.
pub struct TestNode {
    pub sim: SimNode,
    _rt: tokio::runtime::Runtime,
}

impl TestNode {
    pub fn start(scenario: &Scenario) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let sim = SimNode::start(scenario, rt.handle()).expect("simulated node");
        Self { sim, _rt: rt }
    }

    /// Exporter flags pointing the pod mapper at this node.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--pod-resources-socket".into(),
            self.sim.socket().to_string_lossy().into_owned(),
            "--proc-root".into(),
            self.sim.proc_root().to_string_lossy().into_owned(),
            "--kube-api-url".into(),
            self.sim.api_url(),
        ]
    }
}
