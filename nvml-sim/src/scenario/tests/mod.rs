#![allow(clippy::unwrap_used)]

use super::*;

fn err(text: &str) -> ScenarioError {
    match parse(text, "t.yaml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

const GPU: &str = "gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-00000000-0000-4000-8000-000000000001
    pci_bus_id: \"00000000:18:00.0\"
    memory_mib: 81559
";

#[test]
fn default_scenario_loads_and_validates() {
    let s = default_scenario();
    assert_eq!(s.gpus.len(), 8);
    assert_eq!(s.node, "sim-node-1");
    assert!(s.gpus[5].mig_enabled());
    assert_eq!(s.gpus[5].mig.len(), 3);
    assert!(
        s.gpus
            .iter()
            .all(|g| g.xids.is_empty() && g.lost_at_s.is_none())
    );
    assert!(s.gpus.iter().any(|g| !g.ecc_errors.is_empty()));
    let t = s.gpus[4].throttle_reasons(10.0);
    assert!(t.contains(&ThrottleReason::SwThermal) && t.contains(&ThrottleReason::HwThermal));
    // every pid held by a pod container is a process on some GPU
    for pod in &s.pods {
        for c in &pod.containers {
            for pid in &c.pids {
                assert!(
                    s.gpus
                        .iter()
                        .any(|g| g.processes.iter().any(|p| p.pid == *pid)),
                    "pid {pid}"
                );
            }
        }
    }
    // the GPU 6 replicas
    let chat: Vec<_> = s
        .pods
        .iter()
        .filter(|p| p.owner.as_ref().is_some_and(|o| o.name == "chat"))
        .collect();
    assert_eq!(chat.len(), 2);
    assert_eq!(
        chat[0].containers[0].devices[0].ids[0],
        format!("{}::0", s.gpus[6].uuid)
    );
    // DRA: GPU 7 and the free 1g.10gb instance of GPU 5 are held through claims.
    let claimed: Vec<&str> = s
        .claims()
        .flat_map(|c| c.devices.iter().map(String::as_str))
        .collect();
    assert_eq!(
        claimed,
        [s.gpus[7].uuid.as_str(), s.gpus[5].mig[2].uuid.as_str()]
    );
}

#[test]
fn minimal_gpu_gets_defaults() {
    let s = parse(GPU, "t.yaml").unwrap();
    let g = &s.gpus[0];
    assert_eq!(s.driver_version, "570.172.08");
    assert_eq!(g.architecture, Architecture::Hopper);
    assert_eq!(g.max_clocks_mhz.sm, 1980);
    assert_eq!(g.load.utilization.at(5.0), 0.0);
    assert!(g.serial.is_none());
}

#[test]
fn wrong_type_reports_file_line_column_and_path() {
    let text = format!("{GPU}    load:\n      power_watts: hot\n");
    let e = err(&text);
    assert_eq!(
        e.to_string(),
        "t.yaml:7:20: gpus[0].load.power_watts: invalid type: string \"hot\", expected a number or a curve"
    );
}

#[test]
fn unknown_key_is_an_error() {
    let text = format!("{GPU}    colour: green\n");
    let e = err(&text);
    let s = e.to_string();
    assert!(
        s.starts_with("t.yaml:6:5: gpus[0].colour: unknown field `colour`"),
        "{s}"
    );
    let e = err("nodes: x\n");
    assert!(
        e.to_string()
            .starts_with("t.yaml:1:1: nodes: unknown field `nodes`"),
        "{e}"
    );
}

#[test]
fn bad_curves() {
    let e = err(&format!(
        "{GPU}    load:\n      utilization: {{ cosine: {{ min: 1, max: 2, period_s: 3 }} }}\n"
    ));
    assert!(
        e.to_string()
            .starts_with("t.yaml:7:20: gpus[0].load.utilization: unknown variant `cosine`"),
        "{e}"
    );
    let e = err(&format!(
        "{GPU}    load:\n      utilization: {{ sine: {{ min: 1, max: 2 }} }}\n"
    ));
    assert!(
        e.to_string()
            .contains("gpus[0].load.utilization.sine: missing field `period_s`"),
        "{e}"
    );
    let e = err(&format!(
        "{GPU}    load:\n      utilization: {{ sine: {{ min: 10, max: 120, period_s: 3 }} }}\n"
    ));
    assert_eq!(e.path(), Some("gpus[0].load.utilization"));
    assert_eq!(e.position(), Some((7, 20)));
    assert!(e.message().contains("within 0..=100"), "{e}");
    let e = err(&format!(
        "{GPU}    load:\n      utilization: {{ steps: [] }}\n"
    ));
    assert!(e.message().contains("steps must not be empty"), "{e}");
    let e = err(&format!(
        "{GPU}    load:\n      utilization: {{ ramp: {{ from: 0, to: 1, over_s: 1 }}, sine: {{ min: 0, max: 1, period_s: 1 }} }}\n"
    ));
    assert!(e.message().contains("exactly one key"), "{e}");
}

#[test]
fn semantic_errors_are_located() {
    let two = format!("{GPU}{}", &GPU["gpus:\n".len()..]);
    let e = err(&two);
    assert_eq!(e.path(), Some("gpus[1].uuid"));
    assert_eq!(e.position(), Some((7, 11)));
    assert!(e.message().contains("duplicate UUID"));

    let e = err(&format!(
        "{GPU}    processes:\n      - {{ pid: 1, name: x, memory_mib: 1, mig: MIG-1 }}\n"
    ));
    assert_eq!(e.path(), Some("gpus[0].processes[0].mig"));
    assert_eq!(e.position().map(|p| p.0), Some(7));
    assert!(e.message().contains("no MIG instance"));

    let e = err(&format!("{GPU}    unsupported: [fans]\n"));
    assert!(
        e.to_string()
            .contains("gpus[0].unsupported[0]: unknown variant `fans`"),
        "{e}"
    );

    let pods = format!(
        "{GPU}pods:\n  - namespace: a\n    name: b\n    uid: c\n    containers:\n      - name: x\n        id: {}\n        devices: [ {{ resource: nvidia.com/gpu, ids: [GPU-99] }} ]\n",
        "a".repeat(64)
    );
    let e = err(&pods);
    assert_eq!(e.path(), Some("pods[0].containers[0].devices[0].ids[0]"));
    assert!(e.message().contains("unknown device"), "{e}");

    let claim = |claims: &str| {
        format!(
            "{GPU}pods:\n  - namespace: a\n    name: b\n    uid: c\n    containers:\n      - name: x\n        id: {}\n        claims: {claims}\n",
            "a".repeat(64)
        )
    };
    let e = err(&claim("[ { name: gpu, devices: [GPU-99] } ]"));
    assert_eq!(e.path(), Some("pods[0].containers[0].claims[0].devices[0]"));
    assert!(e.message().contains("unknown device"), "{e}");
    let e = err(&claim("[ { name: gpu, driver: fpga, devices: [f0] } ]"));
    assert_eq!(e.path(), Some("pods[0].containers[0].claims[0].driver"));
    let e = err(&claim("[ { name: gpu, devices: [] } ]"));
    assert_eq!(e.path(), Some("pods[0].containers[0].claims[0].devices"));
    // Another driver's devices are names, not UUIDs of this node.
    let ok = claim("[ { name: nic, driver: net.example.com, devices: [eth1] } ]");
    assert!(parse(&ok, "t.yaml").is_ok());
}

#[test]
fn syntax_error_has_position() {
    let e = err("gpus: [\n  - a\n");
    assert!(e.position().is_some());
    assert!(e.to_string().starts_with("t.yaml:"), "{e}");
}

#[test]
fn load_reports_missing_file() {
    let e = load(Path::new("/nonexistent/x.yaml")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/x.yaml: "), "{e}");
}

mod limits;
mod problems;
