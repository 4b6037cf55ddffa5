//! Pod-identity helpers: scenario files and a test-controlled simulated node
//! (kubelet pod-resources socket, Kubernetes API, /proc tree) whose changes
//! the test drives while the real exporter binary reads it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gpuscale_exporter::simnode::SimNode;
use gpuscale_nvml_sim::scenario::{self, Scenario};

/// A small node with every allocation shape:
/// - GPU 0: exclusive, StatefulSet pod, plus a host process (no pod);
/// - GPU 1: time-sliced by two pods of one Deployment, 60 % and 10 % SM;
/// - GPU 2: MIG, instance 1 → Deployment pod, instance 2 → Job pod;
/// - GPU 3: held by a Succeeded pod (must show no pod labels);
/// - GPU 4: unallocated.
pub const STORY_SCENARIO: &str = r#"
node: story-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    load: { utilization: 90 }
    processes:
      - { pid: 1000, name: python3, memory_mib: 70000, sm_utilization: 88 }
      - { pid: 1999, name: nvidia-smi, memory_mib: 10 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-11111111-0000-4000-8000-000000000000
    pci_bus_id: "00000000:2a:00.0"
    memory_mib: 81559
    load: { utilization: 70 }
    processes:
      - { pid: 2001, name: server, memory_mib: 20000, sm_utilization: 60 }
      - { pid: 2002, name: server, memory_mib: 5000, sm_utilization: 10 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-22222222-0000-4000-8000-000000000000
    pci_bus_id: "00000000:3a:00.0"
    memory_mib: 81559
    mig:
      - { uuid: MIG-22222222-0001-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 1, memory_mib: 40192 }
      - { uuid: MIG-22222222-0002-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 2, memory_mib: 40192 }
    processes:
      - { pid: 3001, name: asr, memory_mib: 18000, sm_utilization: 40, mig: MIG-22222222-0001-4000-8000-000000000000 }
      - { pid: 3002, name: etl, memory_mib: 9000, sm_utilization: 20, mig: MIG-22222222-0002-4000-8000-000000000000 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-33333333-0000-4000-8000-000000000000
    pci_bus_id: "00000000:5d:00.0"
    memory_mib: 81559
  - model: NVIDIA L4
    uuid: GPU-44444444-0000-4000-8000-000000000000
    pci_bus_id: "00000000:9a:00.0"
    memory_mib: 22491
pods:
  - namespace: ml-train
    name: trainer-0
    uid: 10000000-0000-4000-8000-000000000001
    labels: { team: research, app.kubernetes.io/name: trainer }
    owner: { kind: StatefulSet, name: trainer }
    containers:
      - name: main
        id: 1000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/gpu, ids: [GPU-00000000-0000-4000-8000-000000000000] } ]
        pids: [1000]
  - namespace: web
    name: web-6d8f7c9b5-aaaaa
    uid: 20000000-0000-4000-8000-000000000001
    labels: { team: serving, app.kubernetes.io/name: web }
    owner: { kind: Deployment, name: web }
    containers:
      - name: server
        id: 2000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/gpu.shared, ids: ["GPU-11111111-0000-4000-8000-000000000000::0"] } ]
        pids: [2001]
  - namespace: web
    name: web-6d8f7c9b5-bbbbb
    uid: 20000000-0000-4000-8000-000000000002
    labels: { team: serving, app.kubernetes.io/name: web }
    owner: { kind: Deployment, name: web }
    containers:
      - name: server
        id: 2000000000000000000000000000000000000000000000000000000000000002
        devices: [ { resource: nvidia.com/gpu.shared, ids: ["GPU-11111111-0000-4000-8000-000000000000::1"] } ]
        pids: [2002]
  - namespace: speech
    name: asr-5b7c9d8f6-m3n4p
    uid: 30000000-0000-4000-8000-000000000001
    labels: { team: speech }
    owner: { kind: Deployment, name: asr }
    containers:
      - name: asr
        id: 3000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/mig-3g.40gb, ids: [MIG-22222222-0001-4000-8000-000000000000] } ]
        pids: [3001]
  - namespace: batch
    name: etl-x7k2p
    uid: 30000000-0000-4000-8000-000000000002
    labels: { team: data }
    owner: { kind: Job, name: etl }
    containers:
      - name: etl
        id: 3000000000000000000000000000000000000000000000000000000000000002
        devices: [ { resource: nvidia.com/mig-3g.40gb, ids: [MIG-22222222-0002-4000-8000-000000000000] } ]
        pids: [3002]
  - namespace: batch
    name: finished-q9w8e
    uid: 40000000-0000-4000-8000-000000000001
    phase: Succeeded
    owner: { kind: Job, name: finished }
    containers:
      - name: work
        id: 4000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/gpu, ids: [GPU-33333333-0000-4000-8000-000000000000] } ]
"#;

/// A mixed node: device-plugin and DRA allocations side by side.
/// - GPU 0: device plugin, Deployment pod `web-…`;
/// - GPU 1: DRA claim `train-gpu` of StatefulSet pod `trainer-0`;
/// - GPU 2: MIG, instance 1 → DRA claim `asr-mig` (Deployment pod),
///   instance 2 → device plugin (Job pod);
/// - GPU 3: one claim `shared-gpu` shared by two pods (no single owner);
/// - pod `net-…` also holds a NIC of another DRA driver.
pub const DRA_SCENARIO: &str = r#"
node: dra-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d0000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    load: { utilization: 40 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d1111111-0000-4000-8000-000000000000
    pci_bus_id: "00000000:2a:00.0"
    memory_mib: 81559
    load: { utilization: 90 }
    processes:
      - { pid: 1101, name: python3, memory_mib: 60000, sm_utilization: 85 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d2222222-0000-4000-8000-000000000000
    pci_bus_id: "00000000:3a:00.0"
    memory_mib: 81559
    mig:
      - { uuid: MIG-d2222222-0001-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 1, memory_mib: 40192 }
      - { uuid: MIG-d2222222-0002-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 2, memory_mib: 40192 }
    processes:
      - { pid: 2101, name: asr, memory_mib: 18000, sm_utilization: 40, mig: MIG-d2222222-0001-4000-8000-000000000000 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-d3333333-0000-4000-8000-000000000000
    pci_bus_id: "00000000:5d:00.0"
    memory_mib: 81559
    load: { utilization: 70 }
    processes:
      - { pid: 3101, name: server, memory_mib: 20000, sm_utilization: 45 }
      - { pid: 3102, name: server, memory_mib: 8000, sm_utilization: 15 }
pods:
  - namespace: web
    name: web-6d8f7c9b5-aaaaa
    uid: d0000000-0000-4000-8000-000000000001
    owner: { kind: Deployment, name: web }
    containers:
      - name: server
        id: d000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/gpu, ids: [GPU-d0000000-0000-4000-8000-000000000000] } ]
  - namespace: ml-train
    name: trainer-0
    uid: d1000000-0000-4000-8000-000000000001
    owner: { kind: StatefulSet, name: trainer }
    containers:
      - name: main
        id: d100000000000000000000000000000000000000000000000000000000000001
        claims: [ { name: train-gpu, devices: [GPU-d1111111-0000-4000-8000-000000000000] } ]
        pids: [1101]
  - namespace: speech
    name: asr-5b7c9d8f6-m3n4p
    uid: d2000000-0000-4000-8000-000000000001
    owner: { kind: Deployment, name: asr }
    containers:
      - name: asr
        id: d200000000000000000000000000000000000000000000000000000000000001
        claims: [ { name: asr-mig, devices: [MIG-d2222222-0001-4000-8000-000000000000] } ]
        pids: [2101]
  - namespace: batch
    name: etl-x7k2p
    uid: d2000000-0000-4000-8000-000000000002
    owner: { kind: Job, name: etl }
    containers:
      - name: etl
        id: d200000000000000000000000000000000000000000000000000000000000002
        devices: [ { resource: nvidia.com/mig-3g.40gb, ids: [MIG-d2222222-0002-4000-8000-000000000000] } ]
  - namespace: chat
    name: chat-5d8f7b9c4-abcde
    uid: d3000000-0000-4000-8000-000000000001
    owner: { kind: Deployment, name: chat }
    containers:
      - name: server
        id: d300000000000000000000000000000000000000000000000000000000000001
        claims: [ { name: shared-gpu, devices: [GPU-d3333333-0000-4000-8000-000000000000] } ]
        pids: [3101]
  - namespace: chat
    name: chat-5d8f7b9c4-fghij
    uid: d3000000-0000-4000-8000-000000000002
    owner: { kind: Deployment, name: chat }
    containers:
      - name: server
        id: d300000000000000000000000000000000000000000000000000000000000002
        claims: [ { name: shared-gpu, devices: [GPU-d3333333-0000-4000-8000-000000000000] } ]
        pids: [3102]
  - namespace: net
    name: router-0
    uid: d4000000-0000-4000-8000-000000000001
    owner: { kind: StatefulSet, name: router }
    containers:
      - name: router
        id: d400000000000000000000000000000000000000000000000000000000000001
        claims: [ { name: nic, driver: net.example.com, devices: [eth1] } ]
"#;

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
        let args = self.sim.pod_args();
        vec![
            "--pod-resources-socket".into(),
            path(args.pod_resources_socket.as_deref()),
            "--proc-root".into(),
            path(args.proc_root.as_deref()),
            "--kube-api-url".into(),
            args.kube_api_url.unwrap_or_default(),
        ]
    }
}

fn path(p: Option<&Path>) -> String {
    p.map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}
