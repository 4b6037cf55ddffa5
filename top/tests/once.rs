//! An engineer points `gpuscale-top --once` at the simulated node's
//! exporter: every GPU, MIG instance and holder of the built-in scenario is
//! there, with the numbers `/metrics` gives.

use std::process::{Command, Output};

use gpuscale_e2e::exporter::{Exporter, Metrics};
use serde_json::Value;

/// The built-in node, once every holder (DRA ones come with the first
/// ResourceSlice list) and the GPM families (two samples) are served.
pub(crate) fn node() -> Exporter {
    let e = Exporter::spawn(&["--simulate", "--collect-interval", "1s"]);
    e.wait_ready();
    e.scrape_until("every holder and GPM activity", |m| {
        m.find("gpu_pod_allocation", &[]).len() == 11
            && !m.find("gpu_sm_active_ratio", &[]).is_empty()
    });
    e
}

/// The GPU series of a scrape, in order (the exporter's own change per scrape).
fn gpu_lines(text: &str) -> Vec<&str> {
    let mut l: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu_")).collect();
    l.sort_unstable();
    l
}

/// `/metrics` and what `read` made of it, from one collection: a scrape
/// before and one after agree (the simulated numbers move every second).
fn same_collection<T>(e: &Exporter, read: impl Fn() -> T) -> (Metrics, T) {
    for _ in 0..20 {
        let before = e.scrape_text();
        let got = read();
        let after = e.scrape_text();
        if gpu_lines(&before) == gpu_lines(&after) {
            return (Metrics::parse(&before), got);
        }
    }
    panic!("no two scrapes of the same collection");
}

fn top(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscale-top"))
        .args(args)
        .output()
        .expect("run gpuscale-top")
}

fn json(e: &Exporter) -> Value {
    let out = top(&["--once", "-o", "json", "--exporter", &e.url("")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn gpu<'a>(snap: &'a Value, uuid: &str) -> &'a Value {
    snap["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .find(|g| g["uuid"] == uuid)
        .unwrap_or_else(|| panic!("GPU {uuid} missing"))
}

/// `/metrics`' value of `name` for the device, or JSON null when it has none.
fn expected(m: &Metrics, name: &str, uuid: &str) -> Value {
    let found: Vec<_> = m
        .find(name, &[("uuid", uuid)])
        .into_iter()
        .filter(|s| !s.labels.contains_key("mig_uuid"))
        .collect();
    found.first().map_or(Value::Null, |s| s.value.into())
}

/// Equal numbers (to JSON's last digit of precision), or both null.
fn same(got: &Value, want: &Value, what: &str) {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => assert!((a - b).abs() <= b.abs() * 1e-12, "{what}: {a} ≠ {b}"),
        _ => assert_eq!(got, want, "{what}"),
    }
}

#[test]
fn every_gpu_of_the_simulated_node_is_shown_with_its_numbers() {
    let e = node();
    let (m, snap) = same_collection(&e, || json(&e));
    let infos = m.find("gpu_info", &[]);
    assert_eq!(infos.len(), 8);
    assert_eq!(snap["gpus"].as_array().map(Vec::len), Some(8));
    for info in infos {
        let uuid = &info.labels["uuid"];
        let g = gpu(&snap, uuid);
        assert_eq!(g["model"], info.labels["model"].as_str());
        let src = m.find("gpu_activity_source_info", &[("uuid", uuid)]);
        assert_eq!(g["activity_source"], src[0].labels["source"].as_str());
        for (field, family) in [
            ("utilization", "gpu_utilization_ratio"),
            ("sm_active", "gpu_sm_active_ratio"),
            ("tensor_active", "gpu_tensor_active_ratio"),
            ("dram_active", "gpu_dram_active_ratio"),
            ("memory_used_bytes", "gpu_memory_used_bytes"),
            ("memory_total_bytes", "gpu_memory_total_bytes"),
            ("power_watts", "gpu_power_usage_watts"),
            ("power_limit_watts", "gpu_power_limit_watts"),
            ("temperature_celsius", "gpu_temperature_celsius"),
        ] {
            same(
                &g[field],
                &expected(&m, family, uuid),
                &format!("GPU {uuid} {field}"),
            );
        }
    }
    // The MIG-mode GPU has no whole-GPU utilization: unknown, not 0.
    let mig_gpu = gpu(&snap, "GPU-1a7f5e39-8c2d-4b04-9e3a-6d5c8b7a0f06");
    assert_eq!(mig_gpu["utilization"], Value::Null);
    // The hot GPU's thermal throttling is shown.
    let hot = gpu(&snap, "GPU-e63b4c18-2d5f-4a97-8b61-7a3d9c0e2f05");
    assert_eq!(
        hot["throttle"],
        serde_json::json!(["sw_thermal", "hw_thermal"])
    );
}

#[test]
fn every_mig_instance_and_holder_is_shown() {
    let e = node();
    let (m, snap) = same_collection(&e, || json(&e));
    for s in m.find("gpu_mig_info", &[]) {
        let mig = &s.labels["mig_uuid"];
        let g = gpu(&snap, &s.labels["uuid"]);
        let inst = g["mig"]
            .as_array()
            .and_then(|l| l.iter().find(|i| i["mig_uuid"] == mig.as_str()))
            .unwrap_or_else(|| panic!("MIG {mig} missing"));
        assert_eq!(inst["profile"], s.labels["profile"].as_str());
        let used = m.value("gpu_mig_memory_used_bytes", &[("mig_uuid", mig)]);
        same(&inst["memory_used_bytes"], &used.into(), mig);
    }
    let allocations = m.find("gpu_pod_allocation", &[]);
    assert_eq!(allocations.len(), 11);
    for a in allocations {
        let g = gpu(&snap, &a.labels["uuid"]);
        let holders = match a.labels.get("mig_uuid") {
            Some(mig) => g["mig"]
                .as_array()
                .and_then(|l| l.iter().find(|i| i["mig_uuid"] == mig.as_str()))
                .map(|i| &i["holders"]),
            None => Some(&g["holders"]),
        };
        let pod = &a.labels["pod"];
        let h = holders
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|h| h["pod"] == pod.as_str()))
            .unwrap_or_else(|| panic!("holder {pod} missing"));
        assert_eq!(h["namespace"], a.labels["namespace"].as_str());
        assert_eq!(h["container"], a.labels["container"].as_str());
        let mut want = vec![("pod", pod.as_str()), ("uuid", a.labels["uuid"].as_str())];
        if let Some(mig) = a.labels.get("mig_uuid") {
            want.push(("mig_uuid", mig));
        }
        let vram = m.find("gpu_pod_memory_used_bytes", &want);
        let vram = vram.first().map_or(Value::Null, |s| s.value.into());
        same(&h["memory_used_bytes"], &vram, pod);
    }
}

#[test]
fn the_text_snapshot_names_every_gpu_instance_and_pod_without_escape_codes() {
    let e = node();
    let (m, out) = same_collection(&e, || top(&["--once", "--exporter", &e.url("/metrics")]));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(!text.contains('\x1b'), "escape codes in:\n{text}");
    assert!(text.contains("8 GPUs  11 holders"), "{text}");
    for s in m.find("gpu_mig_info", &[]) {
        assert!(text.contains(&s.labels["mig_uuid"]), "{text}");
    }
    for s in m.find("gpu_pod_allocation", &[]) {
        let holder = format!(
            "{}/{} ({})",
            s.labels["namespace"], s.labels["pod"], s.labels["container"]
        );
        assert!(text.contains(&holder), "{holder} missing:\n{text}");
    }
    // Shared GPU 6: each of the two chat pods' share of the VRAM in use.
    assert!(
        text.contains("share 66%") && text.contains("share 34%"),
        "{text}"
    );
    assert!(
        text.contains("missing: gpu_xid_errors_total, gpu_price_usd_per_hour"),
        "{text}"
    );
}

#[test]
fn a_namespace_filter_keeps_its_gpus_and_workloads() {
    let e = node();
    let out = top(&[
        "--once",
        "-o",
        "json",
        "--namespace",
        "ml-train",
        "--exporter",
        &e.url(""),
    ]);
    let snap: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let gpus: Vec<&str> = snap["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .filter_map(|g| g["gpu"].as_str())
        .collect();
    assert_eq!(gpus, ["0", "1", "7"]);
    let workloads: Vec<&str> = snap["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .filter_map(|w| w["workload"].as_str())
        .collect();
    assert_eq!(workloads, ["eval", "llama-train"]);
}

#[test]
fn a_stopped_exporter_fails_once_naming_the_source() {
    let e = node();
    let url = e.url("/metrics");
    drop(e);
    let out = top(&["--once", "--exporter", &url, "--timeout", "2s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("exporter {url}")), "{err}");
}

#[test]
fn bad_flags_are_refused_with_the_reason() {
    let out = top(&[
        "--once",
        "--exporter",
        "http://127.0.0.1:1",
        "--interval",
        "2",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval"));
    let out = top(&["--once", "--exporter", "ftp://node:9400"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http:// or https://"));
    let out = top(&[
        "--once",
        "--exporter",
        "https://node:9400",
        "--ca-file",
        "no-such.pem",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ca-file no-such.pem"));
}
