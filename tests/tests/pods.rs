//! Pod identity, end to end: the real exporter binary on a simulated node,
//! its pod mapper talking to a kubelet pod-resources socket, a Kubernetes API
//! and a /proc tree that speak the real protocols.

use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_e2e::pods::{
    DRA_SCENARIO, STORY_SCENARIO, TestNode, many_pods_scenario, parse, write_scenario,
};
use gpuscale_nvml_sim::scenario::PodPhase;

const GPU0: &str = "GPU-00000000-0000-4000-8000-000000000000";
const GPU1: &str = "GPU-11111111-0000-4000-8000-000000000000";
const GPU3: &str = "GPU-33333333-0000-4000-8000-000000000000";
const GPU4: &str = "GPU-44444444-0000-4000-8000-000000000000";
const MIG1: &str = "MIG-22222222-0001-4000-8000-000000000000";
const MIG2: &str = "MIG-22222222-0002-4000-8000-000000000000";

/// The pod labels of the trainer's GPU, on both scenarios.
const TRAINER_0: [(&str, &str); 5] = [
    ("namespace", "ml-train"),
    ("pod", "trainer-0"),
    ("container", "main"),
    ("workload", "trainer"),
    ("workload_kind", "StatefulSet"),
];

const POD_FLAGS: [&str; 8] = [
    "--pod-label",
    "team",
    "--pod-label",
    "app.kubernetes.io/name",
    "--resource-name",
    "nvidia.com/gpu.shared",
    "--gpu-price",
    "NVIDIA H100 80GB HBM3=4.5",
];

fn label<'a>(m: &'a Metrics, name: &str, uuid: &str, key: &str) -> Option<&'a str> {
    let found = m.find(name, &[("uuid", uuid)]);
    assert_eq!(found.len(), 1, "one {name} for {uuid}: {found:?}");
    found[0].labels.get(key).map(String::as_str)
}

fn mapped(m: &Metrics) -> bool {
    m.get("gpuscale_exporter_pod_mapping_up", &[]) == Some(1.0)
        && m.get("gpuscale_exporter_pod_metadata_stale", &[]) == Some(0.0)
        && m.has("gpu_pod_sm_utilization_ratio")
}

/// A shared GPU: no pod on the device series, each pod its own SM share.
fn assert_shared(m: &Metrics, uuid: &str, shares: &[(&str, f64)]) {
    assert_eq!(label(m, "gpu_utilization_ratio", uuid, "pod"), None);
    for (pod, want) in shares {
        let got = m.value(
            "gpu_pod_sm_utilization_ratio",
            &[("uuid", uuid), ("pod", pod)],
        );
        assert!(
            (got - want).abs() < 1e-9,
            "{pod} on {uuid}: {got}, want {want}"
        );
    }
}

/// `--simulate` alone: the scenario's pods come through the simulated node's
/// kubelet socket, API server and /proc tree.
#[test]
fn simulated_node_labels_every_gpu_mig_and_process_with_its_pod() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "story.yaml", STORY_SCENARIO);
    let exporter = Exporter::simulate(&scenario, &POD_FLAGS);
    let m = exporter.scrape_until("pods mapped", mapped);
    exclusive_gpu_series_carry_the_pod(&m);
    time_sliced_gpu_shows_each_pods_usage(&m);
    mig_instances_carry_their_own_pods(&m);
    processes_carry_their_own_pod(&m);
    finished_and_unallocated_gpus_carry_no_pod(&m);
    one_pod_info_per_gpu_pod(&m);
    price_only_for_the_configured_model(&m);
}

/// Exclusive GPU: device series carry the pod, so `avg by (namespace)` works.
fn exclusive_gpu_series_carry_the_pod(m: &Metrics) {
    let util = m.find("gpu_utilization_ratio", &[("uuid", GPU0)]);
    assert_eq!(util.len(), 1);
    let l = &util[0].labels;
    let labels = [
        ("label_team", "research"),
        ("label_app_kubernetes_io_name", "trainer"),
    ];
    for (k, v) in TRAINER_0.into_iter().chain(labels) {
        assert_eq!(l.get(k).map(String::as_str), Some(v), "{k} on {l:?}");
    }
    assert!((util[0].value - 0.9).abs() < 1e-9);
}

/// Time-sliced GPU: no pod on the device series; each pod its own usage.
fn time_sliced_gpu_shows_each_pods_usage(m: &Metrics) {
    assert_shared(
        m,
        GPU1,
        &[("web-6d8f7c9b5-aaaaa", 0.60), ("web-6d8f7c9b5-bbbbb", 0.10)],
    );
    let mem = m.value(
        "gpu_pod_memory_used_bytes",
        &[
            ("uuid", GPU1),
            ("pod", "web-6d8f7c9b5-bbbbb"),
            ("workload", "web"),
            ("workload_kind", "Deployment"),
        ],
    );
    assert_eq!(mem, 5000.0 * 1024.0 * 1024.0);
    assert_eq!(
        m.find(
            "gpu_pod_allocation",
            &[("uuid", GPU1), ("resource", "nvidia.com/gpu.shared")]
        )
        .len(),
        2
    );
}

/// MIG instances held by different pods.
fn mig_instances_carry_their_own_pods(m: &Metrics) {
    let mig = |uuid: &str| {
        m.find("gpu_mig_memory_used_bytes", &[("mig_uuid", uuid)])[0]
            .labels
            .clone()
    };
    assert_eq!(
        mig(MIG1).get("pod").map(String::as_str),
        Some("asr-5b7c9d8f6-m3n4p")
    );
    assert_eq!(mig(MIG1).get("workload").map(String::as_str), Some("asr"));
    assert_eq!(
        mig(MIG2).get("workload_kind").map(String::as_str),
        Some("Job")
    );
}

/// Processes carry their own pod; the host process none, and it is counted.
fn processes_carry_their_own_pod(m: &Metrics) {
    assert_eq!(
        m.find(
            "gpu_process_memory_used_bytes",
            &[("pid", "2002"), ("pod", "web-6d8f7c9b5-bbbbb")]
        )
        .len(),
        1
    );
    let host = m.find("gpu_process_memory_used_bytes", &[("pid", "1999")]);
    assert_eq!(host.len(), 1);
    assert_eq!(host[0].labels.get("pod"), None);
    assert_eq!(
        m.value(
            "gpuscale_exporter_unattributed_processes",
            &[("reason", "not_a_pod")]
        ),
        1.0
    );
}

/// The Succeeded pod is gone; unallocated GPUs carry no pod labels.
fn finished_and_unallocated_gpus_carry_no_pod(m: &Metrics) {
    assert_eq!(label(m, "gpu_utilization_ratio", GPU3, "pod"), None);
    assert_eq!(label(m, "gpu_utilization_ratio", GPU4, "pod"), None);
    assert!(
        m.find("gpu_pod_allocation", &[("pod", "finished-q9w8e")])
            .is_empty()
    );
    assert_eq!(m.value("gpuscale_exporter_pods", &[]), 5.0);
    assert_eq!(m.find("gpu_pod_allocation", &[]).len(), 5);
}

/// One gpu_pod_info per GPU pod (exclusive, time-sliced, MIG), the join
/// target for inference servers' own series: no container, no GPU labels.
fn one_pod_info_per_gpu_pod(m: &Metrics) {
    let info = m.find("gpu_pod_info", &[]);
    assert_eq!(info.len(), 5, "{info:?}");
    let web_b = m.find("gpu_pod_info", &[("pod", "web-6d8f7c9b5-bbbbb")]);
    assert_eq!(web_b.len(), 1);
    let keys: Vec<&str> = web_b[0].labels.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "label_app_kubernetes_io_name",
            "label_team",
            "namespace",
            "node",
            "pod",
            "workload",
            "workload_kind"
        ]
    );
    assert_eq!(web_b[0].labels["workload"], "web");
    assert_eq!(web_b[0].value, 1.0);
    assert_eq!(
        m.value(
            "gpu_pod_info",
            &[("pod", "asr-5b7c9d8f6-m3n4p"), ("label_team", "speech")]
        ),
        1.0
    );
}

/// Cost: a price per GPU of the configured model only.
fn price_only_for_the_configured_model(m: &Metrics) {
    assert_eq!(
        m.value(
            "gpu_price_usd_per_hour",
            &[("uuid", GPU0), ("pod", "trainer-0")]
        ),
        4.5
    );
    assert!(
        m.find("gpu_price_usd_per_hour", &[("uuid", GPU4)])
            .is_empty()
    );
}

/// The node changes under a running exporter: a pod deleted, a pod
/// terminating, the kubelet restarting, the API server going down; and a
/// garbled cgroup file from the start.
#[test]
fn node_changes_while_the_exporter_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "story.yaml", STORY_SCENARIO);
    let node = TestNode::start(&parse(STORY_SCENARIO));
    // A garbled cgroup file (the host process's): unattributed and counted, no crash.
    std::fs::write(node.sim.proc_root().join("1999/cgroup"), "garbage\n").expect("write cgroup");
    let mut args: Vec<String> = POD_FLAGS.iter().map(|s| s.to_string()).collect();
    args.extend(node.flags());
    args.extend(["--pod-refresh-interval".into(), "200ms".into()]);
    // The API lists counted below are the pod watch's: the node facts'
    // own timed lists (docs/node-economics.md) are off here.
    args.push("--no-node-facts".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&scenario, &args);
    let m = exporter.scrape_until("pods mapped", mapped);
    assert_eq!(
        m.value(
            "gpuscale_exporter_unattributed_processes",
            &[("reason", "cgroup_malformed")]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "gpuscale_exporter_unattributed_pids_total",
            &[("reason", "cgroup_malformed")]
        ),
        1.0
    );
    let (lists_before, _) = node.sim.api().list_watch_counts();

    // Pod deleted mid-run: its series go.
    assert!(node.sim.delete_pod("ml-train", "trainer-0"));
    let m = exporter.scrape_until("trainer-0 gone", |m| {
        m.find("gpu_pod_allocation", &[("pod", "trainer-0")])
            .is_empty()
    });
    assert_eq!(label(&m, "gpu_utilization_ratio", GPU0, "pod"), None);

    // A pod turning terminal: dropped though the kubelet still lists it.
    assert!(node.sim.set_phase("batch", "etl-x7k2p", PodPhase::Failed));
    let m = exporter.scrape_until("etl gone", |m| {
        m.find("gpu_pod_allocation", &[("pod", "etl-x7k2p")])
            .is_empty()
    });
    assert_eq!(m.value("gpuscale_exporter_pods", &[]), 3.0);

    // Kubelet down (socket removed): metrics flow without pod labels.
    node.sim.stop_kubelet();
    let m = exporter.scrape_until("mapping down", |m| {
        m.get("gpuscale_exporter_pod_mapping_up", &[]) == Some(0.0)
    });
    assert!(m.find("gpu_pod_allocation", &[]).is_empty());
    assert!(
        !m.find("gpu_utilization_ratio", &[]).is_empty(),
        "GPU metrics keep flowing"
    );
    // …and back within one refresh once the socket is recreated.
    node.sim.start_kubelet().expect("kubelet restart");
    exporter.scrape_until("labels back", |m| {
        m.find("gpu_pod_allocation", &[("pod", "asr-5b7c9d8f6-m3n4p")])
            .len()
            == 1
    });

    // API server down: last known metadata kept, marked stale.
    node.sim.set_api_down(true);
    let m = exporter.scrape_until("stale", |m| {
        m.get("gpuscale_exporter_pod_metadata_stale", &[]) == Some(1.0)
    });
    assert_eq!(
        m.find(
            "gpu_process_memory_used_bytes",
            &[("pid", "2001"), ("workload", "web")]
        )
        .len(),
        1
    );
    node.sim.set_api_down(false);
    exporter.scrape_until("fresh", |m| {
        m.get("gpuscale_exporter_pod_metadata_stale", &[]) == Some(0.0)
    });

    // Scrapes never reach the API server: one list at start plus relists
    // after the outage, however many scrapes happened.
    for _ in 0..20 {
        exporter.scrape();
    }
    let (lists_after, _) = node.sim.api().list_watch_counts();
    assert!(
        lists_after - lists_before <= 3,
        "API lists: {lists_before} → {lists_after}"
    );
}

/// 110 pods (the kubelet's default maximum) time-slicing 8 GPUs, half of
/// them through DRA claims.
#[test]
fn kubelet_maximum_of_110_pods_on_8_gpus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "busy.yaml", &many_pods_scenario(8, 110, true));
    let exporter = Exporter::simulate(&scenario, &["--pod-label", "team"]);
    let m = exporter.scrape_until("110 pods mapped", |m| {
        m.get("gpuscale_exporter_pods", &[]) == Some(110.0)
            && m.get("gpuscale_exporter_dra_mapping_up", &[]) == Some(1.0)
            && m.get("gpuscale_exporter_pod_mapping_up", &[]) == Some(1.0)
            && m.find("gpu_pod_sm_utilization_ratio", &[]).len() == 110
    });
    assert_eq!(m.find("gpu_pod_allocation", &[]).len(), 110);
    assert_eq!(
        m.find("gpu_pod_allocation", &[("allocation", "dra")]).len(),
        55
    );
    for (path, gpus) in [("device_plugin", 4.0), ("dra", 4.0)] {
        assert_eq!(
            m.value(
                "gpuscale_exporter_pod_attributed_devices",
                &[("allocation", path)]
            ),
            gpus
        );
    }
    assert_eq!(
        m.find("gpu_process_memory_used_bytes", &[("label_team", "team-3")])
            .len(),
        11
    );
    // Shared GPUs: no pod labels on device series; every pod its own value.
    assert!(
        m.find("gpu_utilization_ratio", &[])
            .iter()
            .all(|s| !s.labels.contains_key("pod"))
    );
    for p in [0usize, 57, 109] {
        let v = m.value(
            "gpu_pod_sm_utilization_ratio",
            &[("pod", &format!("worker-{p}"))],
        );
        assert!(
            (v - (1 + p % 50) as f64 / 100.0).abs() < 1e-9,
            "worker-{p}: {v}"
        );
    }
    assert_eq!(
        m.value(
            "gpuscale_exporter_unattributed_processes",
            &[("reason", "pod_unknown")]
        ),
        0.0
    );
    exporter.assert_strict_expositions();
}

const DRA_GPU0: &str = "GPU-d0000000-0000-4000-8000-000000000000";
const DRA_GPU1: &str = "GPU-d1111111-0000-4000-8000-000000000000";
const DRA_GPU3: &str = "GPU-d3333333-0000-4000-8000-000000000000";
const DRA_MIG1: &str = "MIG-d2222222-0001-4000-8000-000000000000";
const DRA_MIG2: &str = "MIG-d2222222-0002-4000-8000-000000000000";

fn dra_mapped(m: &Metrics) -> bool {
    mapped(m) && m.get("gpuscale_exporter_dra_mapping_up", &[]) == Some(1.0)
}

fn unattributed(m: &Metrics, reason: &str) -> f64 {
    m.value(
        "gpuscale_exporter_dra_devices_unattributed",
        &[("reason", reason)],
    )
}

fn mig_pod(m: &Metrics, mig: &str) -> Option<String> {
    let found = m.find("gpu_mig_memory_used_bytes", &[("mig_uuid", mig)]);
    assert_eq!(found.len(), 1, "{mig}: {found:?}");
    found[0].labels.get("pod").cloned()
}

/// A mixed node: device-plugin GPUs and GPUs/MIG instances held through DRA
/// claims, served by the simulated kubelet (`dynamic_resources`) and API
/// server (ResourceSlices).
#[test]
fn dra_claims_label_gpus_and_mig_instances_next_to_device_plugin_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "dra.yaml", DRA_SCENARIO);
    let exporter = Exporter::simulate(&scenario, &[]);
    let m = exporter.scrape_until("claims mapped", |m| {
        dra_mapped(m) && label(m, "gpu_utilization_ratio", DRA_GPU1, "pod").is_some()
    });

    // A full GPU by claim: the same labels a device-plugin GPU gets.
    let util = &m.find("gpu_utilization_ratio", &[("uuid", DRA_GPU1)])[0];
    for (k, v) in TRAINER_0 {
        assert_eq!(util.labels.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!((util.value - 0.9).abs() < 1e-9);
    assert_eq!(
        label(&m, "gpu_utilization_ratio", DRA_GPU0, "pod"),
        Some("web-6d8f7c9b5-aaaaa")
    );
    // MIG instances: one by claim, one by the device plugin.
    assert_eq!(
        mig_pod(&m, DRA_MIG1).as_deref(),
        Some("asr-5b7c9d8f6-m3n4p")
    );
    assert_eq!(mig_pod(&m, DRA_MIG2).as_deref(), Some("etl-x7k2p"));
    // Allocations say which path and which claim.
    let alloc = m.find(
        "gpu_pod_allocation",
        &[("mig_uuid", DRA_MIG1), ("allocation", "dra")],
    );
    assert_eq!(alloc.len(), 1);
    assert_eq!(
        alloc[0].labels.get("claim").map(String::as_str),
        Some("asr-mig")
    );
    assert_eq!(
        alloc[0].labels.get("resource").map(String::as_str),
        Some("gpu.nvidia.com")
    );
    assert_eq!(
        m.find(
            "gpu_pod_allocation",
            &[("uuid", DRA_GPU0), ("allocation", "device_plugin")]
        )
        .len(),
        1
    );

    // One claim shared by two pods: no owner on the device, each pod its own usage.
    assert_shared(
        &m,
        DRA_GPU3,
        &[
            ("chat-5d8f7b9c4-abcde", 0.45),
            ("chat-5d8f7b9c4-fghij", 0.15),
        ],
    );
    assert_eq!(
        m.find("gpu_pod_allocation", &[("claim", "shared-gpu")])
            .len(),
        2
    );

    // The NIC of another driver: not attributed, counted.
    assert_eq!(unattributed(&m, "other_driver"), 1.0);
    assert_eq!(unattributed(&m, "not_in_slices"), 0.0);
    assert!(
        m.find("gpu_pod_allocation", &[("pod", "router-0")])
            .is_empty()
    );
    for (path, devices) in [("device_plugin", 2.0), ("dra", 3.0)] {
        assert_eq!(
            m.value(
                "gpuscale_exporter_pod_attributed_devices",
                &[("allocation", path)]
            ),
            devices,
            "{path}"
        );
    }
}

/// Slices arriving after the pods, a claim released, the API server down.
#[test]
fn dra_node_changes_while_the_exporter_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "dra.yaml", DRA_SCENARIO);
    let node = TestNode::start(&parse(DRA_SCENARIO));
    // The DRA driver has not published its slices yet.
    node.sim.delete_slices();
    let mut args = node.flags();
    args.extend(["--pod-refresh-interval".into(), "200ms".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&scenario, &args);
    let m = exporter.scrape_until("pods mapped, no slices", |m| {
        dra_mapped(m) && unattributed(m, "not_in_slices") == 4.0
    });
    assert_eq!(label(&m, "gpu_utilization_ratio", DRA_GPU1, "pod"), None);
    assert_eq!(
        label(&m, "gpu_utilization_ratio", DRA_GPU0, "pod"),
        Some("web-6d8f7c9b5-aaaaa")
    );

    // The slices arrive: labels appear.
    node.sim.publish_slices();
    exporter.scrape_until("claims mapped", |m| {
        label(m, "gpu_utilization_ratio", DRA_GPU1, "pod") == Some("trainer-0")
            && unattributed(m, "not_in_slices") == 0.0
    });

    // The claim is released: its labels go within one refresh.
    assert!(
        node.sim
            .remove_claim("speech", "asr-5b7c9d8f6-m3n4p", "asr-mig")
    );
    let m = exporter.scrape_until("claim released", |m| mig_pod(m, DRA_MIG1).is_none());
    assert!(
        m.find("gpu_pod_allocation", &[("claim", "asr-mig")])
            .is_empty()
    );

    // API server down: the last known slices are kept (labels stay), and the
    // self-metric says the mapping is not live.
    node.sim.set_api_down(true);
    let m = exporter.scrape_until("DRA mapping down", |m| {
        m.get("gpuscale_exporter_dra_mapping_up", &[]) == Some(0.0)
    });
    assert_eq!(
        label(&m, "gpu_utilization_ratio", DRA_GPU1, "pod"),
        Some("trainer-0")
    );
    node.sim.set_api_down(false);
    exporter.scrape_until("DRA mapping back", dra_mapped);
}

/// Clusters serving ResourceSlices only on an older version, or not at all.
#[test]
fn dra_on_older_clusters() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = write_scenario(dir.path(), "dra.yaml", DRA_SCENARIO);
    // Kubernetes 1.32–1.33: only resource.k8s.io/v1beta1 (attributes under `basic`).
    let node = TestNode::start(&parse(DRA_SCENARIO));
    node.sim.api().set_resource_versions(&["v1beta1"]);
    let args = node.flags();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&scenario, &args);
    exporter.scrape_until("claims mapped through v1beta1", |m| {
        dra_mapped(m) && label(m, "gpu_utilization_ratio", DRA_GPU1, "pod") == Some("trainer-0")
    });
    drop(exporter);

    // No resource.k8s.io at all: device-plugin attribution keeps working and
    // the self-metric says DRA mapping is unavailable.
    let node = TestNode::start(&parse(DRA_SCENARIO));
    node.sim.api().set_resource_versions(&[]);
    let args = node.flags();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&scenario, &args);
    let m = exporter.scrape_until("device plugin mapped", |m| {
        mapped(m) && label(m, "gpu_utilization_ratio", DRA_GPU0, "pod").is_some()
    });
    assert_eq!(m.value("gpuscale_exporter_dra_mapping_up", &[]), 0.0);
    assert_eq!(mig_pod(&m, DRA_MIG2).as_deref(), Some("etl-x7k2p"));
    assert_eq!(label(&m, "gpu_utilization_ratio", DRA_GPU1, "pod"), None);
    assert_eq!(unattributed(&m, "not_in_slices"), 4.0);
}
