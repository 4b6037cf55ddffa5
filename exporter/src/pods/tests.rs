//! The production mapper against the simulated node's servers (real gRPC
//! over a unix socket, real kube client over HTTP, real files), in-process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_nvml_sim::scenario::{self, PodPhase, Scenario};

use super::{PodArgs, PodMapper};
use crate::metrics::{Collected, DeviceRef, Family, MigRef, PodLookup, ProcRef, ProcessUsage};
use gpuscale_sim::node::SimNode;

const SCENARIO: &str = r#"
node: node-a
gpus:
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-aaaaaaaa-0000-4000-8000-000000000000, pci_bus_id: "00000000:18:00.0", memory_mib: 81559 }
  - { model: NVIDIA H100 80GB HBM3, uuid: GPU-bbbbbbbb-0000-4000-8000-000000000000, pci_bus_id: "00000000:19:00.0", memory_mib: 81559 }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-cccccccc-0000-4000-8000-000000000000
    pci_bus_id: "00000000:1a:00.0"
    memory_mib: 81559
    mig:
      - { uuid: MIG-11111111-0000-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 1, memory_mib: 40192 }
      - { uuid: MIG-22222222-0000-4000-8000-000000000000, profile: 3g.40gb, gpu_instance_id: 2, memory_mib: 40192 }
pods:
  - namespace: train
    name: trainer-0
    uid: 00000000-0000-4000-8000-000000000001
    labels: { team: research }
    owner: { kind: StatefulSet, name: trainer }
    containers:
      - name: main
        id: 0000000000000000000000000000000000000000000000000000000000000001
        devices: [ { resource: nvidia.com/gpu, ids: [GPU-aaaaaaaa-0000-4000-8000-000000000000] } ]
        pids: [100]
  - namespace: web
    name: web-6d8f7c9b5-aaaaa
    uid: 00000000-0000-4000-8000-000000000002
    labels: { team: serving, pod-template-hash: 6d8f7c9b5 }
    owner: { kind: Deployment, name: web }
    containers:
      - name: server
        id: 0000000000000000000000000000000000000000000000000000000000000002
        devices: [ { resource: nvidia.com/gpu.shared, ids: ["GPU-bbbbbbbb-0000-4000-8000-000000000000::0"] } ]
        pids: [200]
  - namespace: web
    name: web-6d8f7c9b5-bbbbb
    uid: 00000000-0000-4000-8000-000000000003
    labels: { team: serving, pod-template-hash: 6d8f7c9b5 }
    owner: { kind: Deployment, name: web }
    containers:
      - name: server
        id: 0000000000000000000000000000000000000000000000000000000000000003
        devices: [ { resource: nvidia.com/gpu.shared, ids: ["GPU-bbbbbbbb-0000-4000-8000-000000000000::1"] } ]
        pids: [300]
  - namespace: batch
    name: job-x
    uid: 00000000-0000-4000-8000-000000000004
    owner: { kind: Job, name: job }
    containers:
      - name: work
        id: 0000000000000000000000000000000000000000000000000000000000000004
        devices: [ { resource: nvidia.com/mig-3g.40gb, ids: [MIG-11111111-0000-4000-8000-000000000000] } ]
        pids: [400]
  - namespace: batch
    name: done
    uid: 00000000-0000-4000-8000-000000000005
    phase: Succeeded
    containers:
      - name: work
        id: 0000000000000000000000000000000000000000000000000000000000000005
        devices: [ { resource: nvidia.com/mig-3g.40gb, ids: [MIG-22222222-0000-4000-8000-000000000000] } ]
"#;

struct Fixture {
    _rt: tokio::runtime::Runtime,
    sim: SimNode,
    mapper: Arc<PodMapper>,
    collected: Collected,
}

fn fixture() -> Fixture {
    let scenario: Scenario = match scenario::parse(SCENARIO, "test") {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let rt = rt.unwrap_or_else(|e| panic!("runtime: {e}"));
    let sim = SimNode::start(&scenario, rt.handle()).unwrap_or_else(|e| panic!("{e}"));
    let args = PodArgs {
        pod_refresh_interval: Duration::from_millis(100),
        pod_labels: vec!["team".into()],
        resource_names: vec!["nvidia.com/gpu.shared".into()],
        gpu_prices: vec![("NVIDIA H100 80GB HBM3".into(), 4.5)],
        ..PodArgs::default()
    }
    .or_defaults(&PodArgs {
        pod_resources_socket: Some(sim.socket()),
        proc_root: Some(sim.proc_root()),
        kube_api_url: Some(sim.api_url()),
        ..PodArgs::default()
    });
    let mapper =
        PodMapper::start(&args, sim.node_name(), rt.handle()).unwrap_or_else(|e| panic!("{e}"));
    Fixture {
        _rt: rt,
        sim,
        mapper,
        collected: collected(&scenario),
    }
}

/// One collection on the scenario's GPUs (the first of the priced model):
/// their processes (one with no `/proc` entry).
fn collected(scenario: &Scenario) -> Collected {
    let devices: Vec<Arc<DeviceRef>> = scenario
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut d = DeviceRef::new(i as u32, g.uuid.as_str().into());
            d.facts.model = (i == 0).then(|| "NVIDIA H100 80GB HBM3".into());
            Arc::new(d)
        })
        .collect();
    let migs = scenario.gpus[2]
        .mig
        .iter()
        .map(|m| {
            Arc::new(MigRef {
                gpu: devices[2].clone(),
                mig_uuid: m.uuid.as_str().into(),
                gpu_instance_id: m.gpu_instance_id,
                profile: None,
            })
        })
        .collect();
    let proc_ = |gpu: usize, mig: Option<&str>, pid, mem: f64, sm: f64| ProcessUsage {
        proc_ref: Arc::new(ProcRef {
            gpu: devices[gpu].clone(),
            mig_uuid: mig.map(Into::into),
            pid,
        }),
        memory_used_bytes: Some(mem),
        sm_utilization_ratio: Some(sm),
    };
    let processes = vec![
        proc_(0, None, 100, 1000.0, 0.9),
        proc_(1, None, 200, 2000.0, 0.6),
        proc_(1, None, 300, 3000.0, 0.1),
        proc_(
            2,
            Some("MIG-11111111-0000-4000-8000-000000000000"),
            400,
            4000.0,
            0.5,
        ),
        proc_(0, None, 999, 5.0, 0.0), // no /proc entry
    ];
    Collected {
        devices,
        migs,
        processes,
        ..Collected::default()
    }
}

type Joined = (Arc<dyn PodLookup>, Vec<Family>);

impl Fixture {
    fn join(&self) -> Joined {
        self.mapper.join(&self.collected)
    }

    /// Joins until `ok` holds (the mapper's sources are asynchronous).
    fn join_until(&self, what: &str, ok: impl Fn(&Joined) -> bool) -> Joined {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let j = self.join();
            if ok(&j) {
                return j;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn value(j: &Joined, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let f = j.1.iter().find(|f| f.name == name)?;
    f.samples
        .iter()
        .find(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|s| s.value)
}

fn label<'a>(set: Option<&'a crate::metrics::PodLabelSet>, key: &str) -> Option<&'a str> {
    set?.0
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn ready(j: &Joined) -> bool {
    value(j, "gpuscale_exporter_pod_mapping_up", &[]) == Some(1.0)
        && value(j, "gpuscale_exporter_pod_metadata_stale", &[]) == Some(0.0)
}

#[test]
fn mapper_against_simulated_node() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kube_runtime=debug,kube_client=debug,gpuscale_exporter=debug")
        .with_test_writer()
        .try_init();
    let fx = fixture();
    let j = fx.join_until("mapping up and metadata synced", ready);
    every_kind_of_holding_is_attributed(&j);
    node_changes_reach_the_next_join(&fx);
}

fn every_kind_of_holding_is_attributed(j: &Joined) {
    // Exclusive GPU: one owner, workload from the StatefulSet, allowlisted label.
    let owner = j.0.device_owner("GPU-aaaaaaaa-0000-4000-8000-000000000000");
    assert_eq!(label(owner, "pod"), Some("trainer-0"));
    assert_eq!(label(owner, "container"), Some("main"));
    assert_eq!(label(owner, "workload_kind"), Some("StatefulSet"));
    assert_eq!(label(owner, "label_team"), Some("research"));
    // Time-sliced GPU: no single owner; each pod its own usage.
    assert!(
        j.0.device_owner("GPU-bbbbbbbb-0000-4000-8000-000000000000")
            .is_none()
    );
    let web_a = [
        ("pod", "web-6d8f7c9b5-aaaaa"),
        ("uuid", "GPU-bbbbbbbb-0000-4000-8000-000000000000"),
    ];
    let web_b = [
        ("pod", "web-6d8f7c9b5-bbbbb"),
        ("uuid", "GPU-bbbbbbbb-0000-4000-8000-000000000000"),
    ];
    assert_eq!(value(j, "gpu_pod_sm_utilization_ratio", &web_a), Some(0.6));
    assert_eq!(value(j, "gpu_pod_sm_utilization_ratio", &web_b), Some(0.1));
    assert_eq!(value(j, "gpu_pod_memory_used_bytes", &web_b), Some(3000.0));
    // Deployment resolved from the ReplicaSet by its pod-template-hash.
    assert_eq!(label(j.0.process_owner(200), "workload"), Some("web"));
    assert_eq!(
        label(j.0.process_owner(200), "workload_kind"),
        Some("Deployment")
    );
    assert_eq!(label(j.0.process_owner(300), "container"), Some("server"));
    // MIG: the Job's instance is owned; the Succeeded pod's is not.
    let mig = j.0.device_owner("MIG-11111111-0000-4000-8000-000000000000");
    assert_eq!(label(mig, "workload_kind"), Some("Job"));
    assert!(
        j.0.device_owner("MIG-22222222-0000-4000-8000-000000000000")
            .is_none()
    );
    assert_eq!(
        value(
            j,
            "gpu_pod_allocation",
            &[
                ("pod", "job-x"),
                ("mig_uuid", "MIG-11111111-0000-4000-8000-000000000000")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(value(j, "gpu_pod_allocation", &[("pod", "done")]), None);
    assert_eq!(value(j, "gpuscale_exporter_pods", &[]), Some(4.0));
    assert_eq!(
        value(
            j,
            "gpuscale_exporter_unattributed_processes",
            &[("reason", "cgroup_unreadable")]
        ),
        Some(1.0)
    );
    assert_eq!(value(j, "gpu_price_usd_per_hour", &[]), Some(4.5));
}

fn node_changes_reach_the_next_join(fx: &Fixture) {
    // A pod deleted mid-run: gone at the next join after the watch event.
    assert!(fx.sim.delete_pod("train", "trainer-0"));
    let j = fx.join_until("trainer-0 gone", |j| {
        j.0.device_owner("GPU-aaaaaaaa-0000-4000-8000-000000000000")
            .is_none()
    });
    assert_eq!(
        value(&j, "gpu_pod_allocation", &[("pod", "trainer-0")]),
        None
    );

    // A pod turning terminal: dropped although the kubelet still lists it.
    assert!(fx.sim.set_phase("batch", "job-x", PodPhase::Failed));
    fx.join_until("job-x dropped", |j| {
        j.0.device_owner("MIG-11111111-0000-4000-8000-000000000000")
            .is_none()
    });

    // Kubelet down: no pod labels, mapping down; back after it restarts.
    fx.sim.stop_kubelet();
    let j = fx.join_until("mapping down", |j| {
        value(j, "gpuscale_exporter_pod_mapping_up", &[]) == Some(0.0)
    });
    assert_eq!(value(&j, "gpu_pod_allocation", &[]), None);
    fx.sim.start_kubelet().unwrap_or_else(|e| panic!("{e}"));
    let j = fx.join_until("mapping back", |j| {
        value(j, "gpuscale_exporter_pod_mapping_up", &[]) == Some(1.0)
    });
    assert_eq!(
        value(&j, "gpu_pod_allocation", &[("pod", "web-6d8f7c9b5-aaaaa")]),
        Some(1.0)
    );

    // API server down: last known metadata kept, marked stale; fresh again after.
    fx.sim.set_api_down(true);
    let j = fx.join_until("metadata stale", |j| {
        value(j, "gpuscale_exporter_pod_metadata_stale", &[]) == Some(1.0)
    });
    assert_eq!(label(j.0.process_owner(200), "workload"), Some("web"));
    fx.sim.set_api_down(false);
    fx.join_until("metadata fresh", ready);
}

/// Every cgroup layout the simulated node writes parses back to its pod and
/// container.
#[test]
fn every_simulated_cgroup_layout_parses_back() {
    use gpuscale_sim::node::procfs::{Layout, cgroup_text, qos_for_index};
    let uid = "6a1c0d6e-3f2b-4e8a-9c71-0d5e2b8f4a01";
    let cid = "017b735449d2ec092d7be53a261ecef0e33b14c4865cd89c243c82cd47e133fa";
    for i in 0..12 {
        let text = cgroup_text(Layout::for_index(i), qos_for_index(i), uid, cid);
        let parsed = super::cgroup::parse_cgroup(&text).map_err(|e| e.to_string());
        assert_eq!(
            parsed.as_ref().map(|p| p.pod_uid.as_str()),
            Ok(uid),
            "{text}"
        );
        assert_eq!(
            parsed.as_ref().ok().and_then(|p| p.container_id.as_deref()),
            Some(cid),
            "{text}"
        );
    }
}
