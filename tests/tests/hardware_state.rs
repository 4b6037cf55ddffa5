//! Hardware state on a simulated node: the GPU state file across exporter
//! restarts (a lost GPU keeps its UUID, a node that comes up short is seen,
//! a corrupt or unwritable file never stops the exporter), and the state
//! families of links, ECC mode and the NVSwitch fabric, each from a scenario.

use std::path::{Path, PathBuf};

use gpuscale_e2e::exporter::{Exporter, Metrics};

const A: &str = "GPU-00000000-0000-4000-8000-00000000aaaa";
const B: &str = "GPU-00000000-0000-4000-8000-00000000bbbb";

/// A scenario of GPU A, and GPU B unless `b` is `None` (`Some(lost_at_s)`,
/// where a negative time means never lost).
fn two_gpus(b_lost_at: Option<f64>) -> String {
    let mut s = String::from(
        "node: test-node\ngpus:\n  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-00000000-0000-4000-8000-00000000aaaa\n    pci_bus_id: \"00000000:18:00.0\"\n    memory_mib: 81559\n",
    );
    if let Some(at) = b_lost_at {
        s.push_str("  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-00000000-0000-4000-8000-00000000bbbb\n    pci_bus_id: \"00000000:2A:00.0\"\n    memory_mib: 81559\n");
        if at >= 0.0 {
            s.push_str(&format!("    lost_at_s: {at}\n"));
        }
    }
    s
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write scenario");
    p
}

fn run(scenario: &Path, state: &Path) -> Exporter {
    let state = state.to_str().expect("utf-8 path");
    Exporter::simulate(scenario, &["--state-file", state])
}

fn state_of(m: &Metrics, uuid: &str, state: &str) -> Option<f64> {
    m.get(
        "gpuscale_exporter_gpu_state",
        &[("uuid", uuid), ("state", state)],
    )
}

#[test]
fn a_lost_gpu_keeps_its_uuid_across_an_exporter_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let healthy = write(dir.path(), "healthy.yaml", &two_gpus(Some(-1.0)));
    let first = run(&healthy, &state);
    first.scrape_until("the state file remembers both GPUs", |m| {
        m.get("gpuscale_exporter_gpus_expected", &[]) == Some(2.0)
    });
    drop(first); // killed, as a crashed or evicted pod

    // GPU B fell off the bus while the exporter was down: NVML cannot name it.
    let lost = write(dir.path(), "lost.yaml", &two_gpus(Some(0.0)));
    let second = run(&lost, &state);
    let m = second.scrape_until("GPU B lost, with its UUID", |m| {
        state_of(m, B, "lost") == Some(1.0)
    });
    assert_eq!(
        m.value(
            "gpuscale_exporter_gpu_state",
            &[("gpu", "1"), ("state", "lost")]
        ),
        1.0
    );
    assert!(
        m.find("gpuscale_exporter_gpu_state", &[("gpu", "1")])
            .iter()
            .all(|s| s.labels.get("uuid").map(String::as_str) == Some(B)),
        "every state series of GPU 1 names its UUID"
    );
    assert_eq!(m.value("gpuscale_exporter_gpus", &[]), 2.0);
    assert_eq!(m.value("gpuscale_exporter_gpus_expected", &[]), 2.0);
    assert_eq!(m.value("gpuscale_exporter_state_file_ok", &[]), 1.0);
    assert_eq!(state_of(&m, A, "ok"), Some(1.0));

    // Without the state file the UUID is gone, as before (the control).
    let bare = Exporter::simulate(&lost, &[]);
    let m = bare.scrape_until("GPU 1 lost", |m| {
        m.get(
            "gpuscale_exporter_gpu_state",
            &[("gpu", "1"), ("state", "lost")],
        ) == Some(1.0)
    });
    assert_eq!(state_of(&m, B, "lost"), None);
    assert!(!m.has("gpuscale_exporter_gpus_expected"));
}

#[test]
fn a_node_that_comes_up_short_shows_the_missing_gpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    let both = write(dir.path(), "both.yaml", &two_gpus(Some(-1.0)));
    let first = run(&both, &state);
    first.scrape_until("both GPUs remembered", |m| {
        m.get("gpuscale_exporter_gpus_expected", &[]) == Some(2.0)
    });
    drop(first);

    // After a reboot NVML reports one GPU.
    let short = write(dir.path(), "short.yaml", &two_gpus(None));
    let second = run(&short, &state);
    let m = second.scrape_until("GPU B missing", |m| state_of(m, B, "missing") == Some(1.0));
    assert_eq!(m.value("gpuscale_exporter_gpus", &[]), 1.0);
    assert_eq!(m.value("gpuscale_exporter_gpus_expected", &[]), 2.0);
    assert_eq!(
        m.find("gpuscale_exporter_gpu_state", &[("uuid", B)])[0]
            .labels
            .get("gpu")
            .map(String::as_str),
        Some("1"),
        "the missing GPU carries its last index"
    );
    assert_eq!(state_of(&m, A, "missing"), None);
}

#[test]
fn a_corrupt_state_file_is_rebuilt_and_an_unwritable_one_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = write(dir.path(), "s.yaml", &two_gpus(Some(-1.0)));
    for corrupt in [
        "{\"version\": 1, \"gpus\": [",
        "\u{0}\u{1}binary",
        "{\"version\": 99, \"gpus\": []}",
    ] {
        let state = write(dir.path(), "state.json", corrupt);
        let e = run(&scenario, &state);
        let m = e.scrape_until("the file rebuilt", |m| {
            m.get("gpuscale_exporter_gpus_expected", &[]) == Some(2.0)
        });
        assert_eq!(m.value("gpuscale_exporter_state_file_ok", &[]), 1.0);
        assert_eq!(state_of(&m, A, "ok"), Some(1.0));
        let text = std::fs::read_to_string(&state).expect("state file");
        assert!(
            text.contains(A) && text.contains(B),
            "{corrupt:?} not rebuilt: {text}"
        );
        assert!(e.log().contains("GPU state file unusable"), "{}", e.log());
    }

    // A directory where the file should be: never writable.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir(&blocked).expect("mkdir");
    let e = run(&scenario, &blocked);
    let m = e.scrape_until("the write failure shown", |m| {
        m.get("gpuscale_exporter_state_file_ok", &[]) == Some(0.0)
    });
    assert_eq!(state_of(&m, A, "ok"), Some(1.0), "GPUs still served");
    assert!(e.log().contains("cannot write the GPU state file"));
}

const HARDWARE: &str = r#"
node: test-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-00000000aaaa
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    pcie: { generation: 4, width: 8, max_generation: 5, max_width: 16 }
    nvlinks: 4
    nvlink_down:
      - { link: 2, from_s: 0 }
      - { link: 3, from_s: 0, to_s: 0.5 }
    ecc: true
    ecc_pending: false
    fabric:
      - { at_s: 0, state: in_progress }
      - { at_s: 1, state: completed }
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-00000000bbbb
    pci_bus_id: "00000000:2A:00.0"
    memory_mib: 81559
    nvlinks: 4
    ecc: false
    fabric: [{ at_s: 0, state: failed }]
  - model: NVIDIA L4
    uuid: GPU-00000000-0000-4000-8000-00000000cccc
    pci_bus_id: "00000000:3A:00.0"
    memory_mib: 23034
    unsupported: [pcie, ecc]
"#;

#[test]
fn links_ecc_mode_and_fabric_state_come_from_the_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = write(dir.path(), "hw.yaml", HARDWARE);
    let e = Exporter::simulate(&scenario, &[]);
    let m = e.scrape_until("link 3 back and the fabric registered", |m| {
        m.get("gpu_nvlink_links", &[("uuid", A), ("state", "active")]) == Some(3.0)
            && m.has("gpu_fabric_state")
            && m.get("gpu_fabric_state", &[("uuid", A), ("state", "completed")]) == Some(1.0)
    });
    let v = |name: &str, uuid: &str, extra: &[(&str, &str)]| {
        let mut l = vec![("uuid", uuid)];
        l.extend_from_slice(extra);
        m.get(name, &l)
    };
    // A downgraded PCIe link: Gen4 x8 in a Gen5 x16 slot.
    assert_eq!(v("gpu_pcie_link_generation", A, &[]), Some(4.0));
    assert_eq!(v("gpu_pcie_link_max_generation", A, &[]), Some(5.0));
    assert_eq!(v("gpu_pcie_link_width", A, &[]), Some(8.0));
    assert_eq!(v("gpu_pcie_link_max_width", A, &[]), Some(16.0));
    assert_eq!(v("gpu_pcie_link_width", B, &[]), Some(16.0));
    assert_eq!(v("gpu_pcie_link_max_width", B, &[]), Some(16.0));
    // NVLink: link 2 down for good, link 3 back after 0.5 s.
    assert_eq!(
        v("gpu_nvlink_links", A, &[("state", "inactive")]),
        Some(1.0)
    );
    assert_eq!(
        v("gpu_nvlink_links", B, &[("state", "inactive")]),
        Some(0.0)
    );
    assert_eq!(v("gpu_nvlink_links", B, &[("state", "active")]), Some(4.0));
    // ECC: on now and off after the next reset; off on B (no pending series).
    assert_eq!(v("gpu_ecc_enabled", A, &[("mode", "current")]), Some(1.0));
    assert_eq!(v("gpu_ecc_enabled", A, &[("mode", "pending")]), Some(0.0));
    assert_eq!(v("gpu_ecc_enabled", B, &[("mode", "current")]), Some(0.0));
    assert_eq!(v("gpu_ecc_enabled", B, &[("mode", "pending")]), None);
    // Fabric: one series, the current state; failed = completed with an error.
    assert_eq!(m.find("gpu_fabric_state", &[("uuid", A)]).len(), 1);
    assert_eq!(v("gpu_fabric_state", B, &[("state", "failed")]), Some(1.0));
    // What a GPU does not support is left out, never 0.
    let c = "GPU-00000000-0000-4000-8000-00000000cccc";
    for name in [
        "gpu_pcie_link_width",
        "gpu_ecc_enabled",
        "gpu_nvlink_links",
        "gpu_fabric_state",
    ] {
        assert!(m.find(name, &[("uuid", c)]).is_empty(), "{name} on the L4");
    }
    assert_eq!(
        m.value(
            "gpuscale_exporter_collector_success",
            &[("collector", "nvlink")]
        ),
        1.0
    );
    e.assert_strict_expositions();
}

#[test]
fn the_fleet_profile_keeps_only_the_faults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = write(dir.path(), "hw.yaml", HARDWARE);
    let e = Exporter::simulate(&scenario, &["--profile", "fleet"]);
    let m = e.scrape_until("the fabric registered and link 3 back", |m| {
        m.get("gpu_fabric_state", &[("uuid", A), ("state", "completed")]) == Some(1.0)
            && m.get("gpu_nvlink_links", &[("uuid", A), ("state", "active")]) == Some(3.0)
    });
    assert_eq!(
        m.get("gpu_nvlink_links", &[("uuid", A), ("state", "inactive")]),
        Some(1.0)
    );
    // A has a link down: both its counts are served (GPUNVLinkDown reads
    // the active ones); B's links are all up and cost nothing.
    assert!(m.find("gpu_nvlink_links", &[("uuid", B)]).is_empty());
    assert_eq!(
        m.get("gpu_ecc_enabled", &[("uuid", A), ("mode", "pending")]),
        Some(0.0)
    );
    assert_eq!(
        m.get("gpu_ecc_enabled", &[("uuid", B), ("mode", "current")]),
        Some(0.0)
    );
    assert!(
        m.find("gpu_ecc_enabled", &[("uuid", A), ("mode", "current")])
            .is_empty()
    );
    // A's link trained at gen 4 x8 of gen 5 x16: its shape is served; B's
    // link runs at its maximum and costs nothing.
    assert_eq!(m.get("gpu_pcie_link_width", &[("uuid", A)]), Some(8.0));
    assert_eq!(m.get("gpu_pcie_link_max_width", &[("uuid", A)]), Some(16.0));
    assert!(m.find("gpu_pcie_link_width", &[("uuid", B)]).is_empty());
    assert!(
        m.find("gpu_pcie_link_max_generation", &[("uuid", B)])
            .is_empty()
    );
}

/// A MIG instance held by a live pod, with a second process on it that
/// belongs to no pod (a process left behind by a deleted pod, or a host
/// process).
const ORPHAN: &str = r#"
node: test-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-00000000aaaa
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    mig:
      - uuid: MIG-00000000-0001-4000-8000-000000000000
        profile: 3g.40gb
        gpu_instance_id: 1
        memory_mib: 40192
    processes:
      - { pid: 4100, name: python3, memory_mib: 10000, mig: MIG-00000000-0001-4000-8000-000000000000 }
      - { pid: 4200, name: python3, memory_mib: 7000, mig: MIG-00000000-0001-4000-8000-000000000000 }
pods:
  - namespace: ml
    name: live
    uid: 6a1c0d6e-0000-4000-8000-000000000101
    containers:
      - name: main
        id: 1f3e0c1b2a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7
        devices:
          - { resource: nvidia.com/mig-3g.40gb, ids: [MIG-00000000-0001-4000-8000-000000000000] }
        pids: [4100]
"#;

#[test]
fn a_process_without_a_pod_is_named_per_gpu_and_pid_and_not_charged_to_the_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = write(dir.path(), "orphan.yaml", ORPHAN);
    let e = Exporter::simulate(&scenario, &[]);
    let mig = "MIG-00000000-0001-4000-8000-000000000000";
    let m = e.scrape_until("the pod join", |m| {
        m.get("gpu_pod_memory_used_bytes", &[("pod", "live")])
            .is_some()
            && m.has("gpu_process_unattributed")
    });
    let orphans = m.find("gpu_process_unattributed", &[]);
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    let o = &orphans[0].labels;
    for (k, v) in [
        ("pid", "4200"),
        ("uuid", A),
        ("mig_uuid", mig),
        ("gpu", "0"),
        ("node", "test-node"),
    ] {
        assert_eq!(o.get(k).map(String::as_str), Some(v), "{k}: {o:?}");
    }
    assert!(!o.contains_key("pod") && o.contains_key("reason"), "{o:?}");
    // Its memory is its own series, without pod labels; the pod is charged
    // for its own process only.
    let mem = m.find("gpu_process_memory_used_bytes", &[("pid", "4200")]);
    assert_eq!(mem.len(), 1);
    assert!(!mem[0].labels.contains_key("pod"));
    assert_eq!(
        m.value(
            "gpu_pod_memory_used_bytes",
            &[("pod", "live"), ("mig_uuid", mig)]
        ),
        10000.0 * 1024.0 * 1024.0
    );
}
