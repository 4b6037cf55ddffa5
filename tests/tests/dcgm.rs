//! `--compat dcgm`, as a team leaving dcgm-exporter meets it: start the
//! exporter on a simulated node, scrape dcgm-exporter's names beside the
//! native ones, and ask a real Prometheus the queries their dashboards, alerts
//! and KEDA triggers already run.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::stack::Prometheus;
use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_e2e::{bins, free_port, python};

const MIB: f64 = 1024.0 * 1024.0;
const GPU0: &str = "GPU-d0000000-0000-4000-8000-000000000000";
const GPU2: &str = "GPU-d2000000-0000-4000-8000-000000000000";

fn start(extra: &[&str]) -> Exporter {
    let scenario = bins::repo_root().join("tests/scenarios/dcgm-compat.yaml");
    Exporter::simulate(&scenario, extra)
}

/// dcgm-exporter's default counters file (plus SM_ACTIVE and SM_OCCUPANCY)
/// as far as NVML serves it: name and Prometheus type.
const FAMILIES: &[(&str, &str)] = &[
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge"),
];

/// The whole-GPU series of `name` on the GPU with dcgm-exporter index `gpu`.
fn dcgm(m: &Metrics, name: &str, gpu: &str) -> f64 {
    let found: Vec<_> = m
        .find(name, &[("gpu", gpu)])
        .into_iter()
        .filter(|s| !s.labels.contains_key("GPU_I_ID"))
        .collect();
    assert_eq!(found.len(), 1, "one {name}{{gpu={gpu}}}: {found:?}");
    found[0].value
}

#[track_caller]
fn assert_near(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-6 * expected.abs().max(1.0),
        "{what} = {actual}, expected {expected}"
    );
}

/// The native family `name` of GPU 0.
fn native(m: &Metrics, name: &str) -> f64 {
    m.value(name, &[("uuid", GPU0)])
}

#[test]
fn dcgm_names_types_units_and_labels_beside_the_native_families() {
    let exporter = start(&["--compat", "dcgm"]);
    let m = exporter.scrape_until("GPM values", |m| m.has("DCGM_FI_PROF_SM_ACTIVE"));
    let text = exporter.scrape_text();
    every_family_has_the_dcgm_type(&m);
    units_convert_from_the_native_values(&m);
    gauges_read_the_scenario_in_dcgm_units(&m);
    labels_are_dcgm_exporters_pods_included(&m);
    mig_instances_have_their_own_series(&m);
    what_the_v100_lacks_is_left_out(&m);
    // The native families are still there.
    assert_eq!(native(&m, "gpu_utilization_ratio"), 0.80);
    promtool_finds_only_dcgm_naming(&text);
    openmetrics_parses_strictly(&exporter);
}

/// Every family of dcgm-exporter's default counters file, with its type.
fn every_family_has_the_dcgm_type(m: &Metrics) {
    for (name, kind) in FAMILIES {
        assert_eq!(
            m.families.get(*name).map(|f| f.0.as_str()),
            Some(*kind),
            "{name} served as a {kind}"
        );
    }
}

/// Unit conversions against the native values of the same snapshot.
fn units_convert_from_the_native_values(m: &Metrics) {
    assert_eq!(dcgm(m, "DCGM_FI_DEV_GPU_UTIL", "0"), 80.0);
    assert_near(
        dcgm(m, "DCGM_FI_DEV_GPU_UTIL", "0"),
        native(m, "gpu_utilization_ratio") * 100.0,
        "util % = ratio × 100",
    );
    assert_eq!(dcgm(m, "DCGM_FI_DEV_FB_USED", "0"), 10000.0);
    assert_near(
        dcgm(m, "DCGM_FI_DEV_FB_USED", "0"),
        native(m, "gpu_memory_used_bytes") / MIB,
        "FB used MiB = bytes / 2^20",
    );
    assert_eq!(
        dcgm(m, "DCGM_FI_DEV_FB_FREE", "0"),
        81559.0 - 10000.0 - 512.0
    );
    assert_eq!(dcgm(m, "DCGM_FI_DEV_FB_RESERVED", "0"), 512.0);
    let mj = dcgm(m, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0");
    let joules = native(m, "gpu_energy_consumed_joules_total");
    assert!(
        (mj - joules * 1000.0).abs() <= 0.5 && mj >= 1_000_000.0,
        "energy mJ {mj} = J {joules} × 1000"
    );
    let nvlink_bytes =
        native(m, "gpu_nvlink_transmit_bytes_total") + native(m, "gpu_nvlink_receive_bytes_total");
    assert!(
        (dcgm(m, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "0") - nvlink_bytes / 1024.0).abs() <= 0.5,
        "NVLink KiB = (tx + rx bytes) / 1024"
    );
}

/// The scenario's GPU 0 values, in dcgm-exporter's units.
fn gauges_read_the_scenario_in_dcgm_units(m: &Metrics) {
    for (name, expected) in [
        ("DCGM_FI_DEV_SM_CLOCK", 1755.0),
        ("DCGM_FI_DEV_MEM_CLOCK", 2619.0),
        ("DCGM_FI_DEV_MEMORY_TEMP", 70.0),
        ("DCGM_FI_DEV_GPU_TEMP", 65.0),
        ("DCGM_FI_DEV_POWER_USAGE", 350.0),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", 40.0),
        ("DCGM_FI_DEV_ENC_UTIL", 5.0),
        ("DCGM_FI_DEV_DEC_UTIL", 10.0),
        ("DCGM_FI_DEV_XID_ERRORS", 0.0),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0.0),
        ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 2.0),
        ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1.0),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0.0),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.80),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.50),
        ("DCGM_FI_PROF_DRAM_ACTIVE", 0.30),
        ("DCGM_FI_PROF_SM_ACTIVE", 0.70),
        ("DCGM_FI_PROF_SM_OCCUPANCY", 0.40),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", 1048576000.0),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", 2097152000.0),
    ] {
        assert_near(dcgm(m, name, "0"), expected, name);
    }
}

/// Labels exactly as dcgm-exporter writes them, pods included.
fn labels_are_dcgm_exporters_pods_included(m: &Metrics) {
    let util = &m.find("DCGM_FI_DEV_GPU_UTIL", &[("gpu", "0")])[0].labels;
    let names: BTreeSet<&str> = util.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
        "container",
        "namespace",
        "pod",
    ]
    .into();
    assert_eq!(names, expected);
    for (k, v) in [
        ("UUID", GPU0),
        ("pci_bus_id", "00000000:18:00.0"),
        ("device", "nvidia0"),
        ("modelName", "NVIDIA H100 80GB HBM3"),
        ("Hostname", "gpu-node-7"),
        ("DCGM_FI_DRIVER_VERSION", "570.172.08"),
        ("namespace", "ml-serve"),
        ("pod", "vllm-0"),
        ("container", "server"),
    ] {
        assert_eq!(util[k], v, "label {k}");
    }
}

/// MIG instances: their own series, with the parent's gpu and UUID.
fn mig_instances_have_their_own_series(m: &Metrics) {
    let mig = [("GPU_I_PROFILE", "3g.40gb"), ("GPU_I_ID", "1")];
    let used = m.find("DCGM_FI_DEV_FB_USED", &mig);
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0].value, 20000.0);
    assert_eq!(used[0].labels["gpu"], "2");
    assert_eq!(used[0].labels["UUID"], GPU2);
    assert_eq!(used[0].labels["pod"], "vllm-1");
    assert_eq!(
        m.find("DCGM_FI_DEV_FB_FREE", &mig)[0].value,
        40192.0 - 20000.0
    );
    assert_near(
        m.find("DCGM_FI_PROF_SM_ACTIVE", &mig)[0].value,
        0.60,
        "MIG SM active",
    );
}

/// What the V100 lacks (GPM, memory temperature) is left out, never 0.
fn what_the_v100_lacks_is_left_out(m: &Metrics) {
    for name in [
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
    ] {
        assert!(
            m.find(name, &[("gpu", "1")]).is_empty(),
            "{name} on the V100"
        );
    }
    assert_eq!(dcgm(m, "DCGM_FI_DEV_GPU_UTIL", "1"), 20.0);
    assert_eq!(
        m.find("DCGM_FI_DEV_GPU_UTIL", &[("gpu", "1")])[0].labels["namespace"],
        "ml-train"
    );
}

/// What `cmd` writes and how it exits, given `input` on its stdin; `needs`
/// names what must be installed.
fn fed(mut cmd: Command, input: &str, needs: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not run {cmd:?} (needs {needs}): {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write to stdin");
    drop(stdin);
    child.wait_with_output().expect("output")
}

/// promtool's linter objects to dcgm-exporter's own names (counters without
/// `_total`, `modelName`); anything else, or a parse error, fails.
fn promtool_finds_only_dcgm_naming(text: &str) {
    let mut promtool = Command::new("promtool");
    promtool.args(["check", "metrics"]);
    let out = fed(
        promtool,
        text,
        "promtool (Debian package prometheus, .ci/run installs it)",
    );
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Exit 3 = lint findings only; 1 would be a parse error.
    assert_eq!(out.status.code(), Some(3), "promtool:\n{report}");
    let known = [
        "counter metrics should have \"_total\" suffix",
        "label names should be written in 'snake_case' not 'camelCase'",
        "metric name should not include type 'counter'",
    ];
    for line in report.lines().filter(|l| !l.trim().is_empty()) {
        let (family, finding) = line.split_once(' ').unwrap_or((line, ""));
        assert!(
            family.starts_with("DCGM_FI_") && known.contains(&finding),
            "promtool finding beyond dcgm-exporter's naming: {line}"
        );
    }
}

/// The OpenMetrics exposition's compat families under prometheus_client's
/// strict parser: dcgm-exporter's counters are typed `unknown` there, so
/// their series keep their names (OpenMetrics counters need `_total`).
fn openmetrics_parses_strictly(exporter: &Exporter) {
    let mut resp = ureq::get(&exporter.url("/metrics"))
        .header("Accept", "application/openmetrics-text; version=1.0.0")
        .call()
        .expect("scrape");
    let body = resp.body_mut().read_to_string().expect("body");
    let mut compat: String = body
        .lines()
        .filter(|l| {
            l.starts_with("DCGM_FI_")
                || l.starts_with("# HELP DCGM_FI_")
                || l.starts_with("# TYPE DCGM_FI_")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    compat.push_str("# EOF\n");
    let code = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\n\
        fams = list(parse(sys.stdin.read()))\n\
        print(len(fams), sum(len(f.samples) for f in fams))\n\
        print(' '.join(f.name + ':' + f.type for f in fams))\n";
    let mut parser = python::command();
    parser.args(["-c", code]);
    let out = fed(parser, &compat, "the test venv's python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "strict OpenMetrics parser:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("{} ", FAMILIES.len())),
        "{stdout}"
    );
    assert!(stdout.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION:unknown"));
}

#[test]
fn dcgm_only_with_the_next_release_hostname_and_old_pod_label_names() {
    let exporter = start(&[
        "--compat",
        "dcgm-only",
        "--compat-hostname-label",
        "hostname",
        "--compat-old-pod-labels",
    ]);
    let m = exporter.scrape_until("pod labels", |m| {
        m.find("DCGM_FI_DEV_FB_USED", &[("pod_name", "vllm-0")])
            .len()
            == 1
    });
    let s = &m.find("DCGM_FI_DEV_FB_USED", &[("pod_name", "vllm-0")])[0];
    assert_eq!(s.labels["pod_namespace"], "ml-serve");
    assert_eq!(s.labels["container_name"], "server");
    assert_eq!(s.labels["hostname"], "gpu-node-7");
    assert!(!s.labels.contains_key("Hostname") && !s.labels.contains_key("pod"));
    let native: Vec<_> = m
        .samples
        .iter()
        .filter(|s| s.name.starts_with("gpu_"))
        .collect();
    assert!(
        native.is_empty(),
        "dcgm-only serves no native family: {native:?}"
    );
    assert_eq!(
        m.value("gpuscale_exporter_nvml_up", &[]),
        1.0,
        "self-metrics stay"
    );
}

#[test]
fn queries_written_for_dcgm_exporter_answer_through_prometheus() {
    let exporter = start(&["--compat", "dcgm"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let target = exporter.url("").trim_start_matches("http://").to_string();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n  - job_name: gpu-metrics\n    static_configs:\n      - targets: ['{target}']\n"
    );
    let prom = Prometheus::start(dir.path(), &config, free_port());
    let one = |q: &str| -> Option<(serde_json::Value, f64)> {
        let r = prom.query(q).ok()?;
        let v = r.first()?;
        let value = v["value"][1].as_str()?.parse().ok()?;
        Some((v["metric"].clone(), value))
    };
    let wait = |q: &str| {
        eventually(
            q,
            Duration::from_secs(60),
            || one(q),
            || prom.proc.log_tail(20),
        )
    };
    // NVIDIA's dashboard: average utilization per host.
    let (labels, util) = wait("avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)");
    assert_eq!(labels["Hostname"], "gpu-node-7");
    assert_eq!(util, (80.0 + 20.0 + 50.0) / 3.0);
    // KEDA triggers: engine activity of a namespace, memory use of a pod.
    let (_, busy) = wait("sum(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace=\"ml-serve\"})");
    assert_near(
        busy,
        0.80,
        "GR engine of ml-serve (the MIG instance has none)",
    );
    let (_, sm) = wait("sum(DCGM_FI_PROF_SM_ACTIVE{namespace=\"ml-serve\"})");
    assert_near(
        sm,
        0.70 + 0.60,
        "SM activity of ml-serve, GPU and MIG instance",
    );
    let (_, fb) = wait(
        "sum(DCGM_FI_DEV_FB_USED{pod=\"vllm-1\"}) / \
         (sum(DCGM_FI_DEV_FB_USED{pod=\"vllm-1\"}) + sum(DCGM_FI_DEV_FB_FREE{pod=\"vllm-1\"}))",
    );
    assert_near(fb, 20000.0 / 40192.0, "FB use of the MIG pod");
}
