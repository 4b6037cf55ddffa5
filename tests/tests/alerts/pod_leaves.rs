//! A pod leaves its GPU right after a double-bit ECC error, the usual end of
//! one: the application is killed, its pod deleted or rescheduled. The
//! exporter's ECC series lose the pod's labels at that moment (a new series
//! to Prometheus), so a rule over the raw series would see the error on a
//! series that is gone. The hardware rules read the recorded
//! `(cluster, node, gpu, uuid)` series, so the alert fires anyway, is
//! notified once through a real Alertmanager, names the pod that was hurt,
//! does not resolve, and its XID 48 stays inhibited. Prometheus scrapes the
//! exporter under two jobs; the node is the test's own, which deletes the
//! pod from the kubelet and the API while the exporter runs.

use std::time::Duration;

use gpuscale_e2e::alerts::procs::eventually;
use gpuscale_e2e::alerts::stack::{self, Notified, Prometheus};
use gpuscale_e2e::exporter::{Exporter, Metrics};
use gpuscale_e2e::pods::{TestNode, parse, write_scenario};

use super::require;

const GPU: &str = "GPU-c0000000-0000-4000-8000-000000000000";

/// One busy GPU held by one pod; the double-bit error and its XID 48 come
/// 10 s after the exporter starts, once Prometheus has seen the allocation.
const SCENARIO: &str = r#"
node: dbe-node
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-c0000000-0000-4000-8000-000000000000
    pci_bus_id: "00000000:18:00.0"
    memory_mib: 81559
    load: { utilization: 60, memory_used_mib: 20000, power_watts: 400, temperature_celsius: 60 }
    ecc_errors:
      - { at_s: 10, type: uncorrected, count: 1 }
    xids:
      - { at_s: 10, xid: 48 }
pods:
  - namespace: ml-train
    name: trainer-0
    uid: 7b2d0e7f-0000-4000-8000-000000000001
    phase: Running
    owner: { kind: StatefulSet, name: trainer }
    containers:
      - name: trainer
        id: 1f3e0c1b2a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7
        devices:
          - { resource: nvidia.com/gpu, ids: [GPU-c0000000-0000-4000-8000-000000000000] }
"#;

const DBE: &str = "gpu_ecc_errors_total";
const UNCORRECTED: &[(&str, &str)] = &[("type", "uncorrected"), ("scope", "volatile")];

fn ecc_alerts(notified: &[Notified]) -> Vec<&Notified> {
    notified
        .iter()
        .filter(|a| a.label("alertname") == "GPUUncorrectableECCErrors")
        .collect()
}

/// activeAt of the firing ECC alert in Prometheus, if it fires.
fn ecc_active_at(prom: &Prometheus) -> Option<String> {
    let data = prom.api("/api/v1/alerts", &[]).ok()?;
    data["alerts"].as_array()?.iter().find_map(|a| {
        (a["labels"]["alertname"] == "GPUUncorrectableECCErrors" && a["state"] == "firing")
            .then(|| a["activeAt"].as_str().unwrap_or("").to_string())
    })
}

#[test]
fn a_pod_leaving_its_gpu_right_after_a_dbe_leaves_the_alert_firing() {
    require("prometheus");
    require("prometheus-alertmanager");
    gpuscale_e2e::bins::ensure_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let node = TestNode::start(&parse(SCENARIO));
    let scenario = write_scenario(dir.path(), "dbe.yaml", SCENARIO);
    let flags = node.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let exporter = Exporter::simulate(&scenario, &flags);
    let alerting = stack::Alerting::start(dir.path(), &format!("127.0.0.1:{}", exporter.port));
    let (prom, webhook) = (&alerting.prom, &alerting.webhook);
    let context = || {
        format!(
            "webhook: {:?}\n{}\nexporter log:\n{}",
            webhook.alerts(),
            prom.proc.log_tail(10),
            exporter.log()
        )
    };

    eventually(
        "Prometheus to record the pod's allocation",
        Duration::from_secs(20),
        || {
            let r = prom.query(r#"gpu_pod_allocation{pod="trainer-0"}"#).ok()?;
            (!r.is_empty()).then_some(())
        },
        context,
    );
    delete_the_pod_right_after_the_error(&node, &exporter);

    let notified = eventually(
        "GPUUncorrectableECCErrors at the webhook",
        Duration::from_secs(40),
        || {
            let got = webhook.alerts();
            (!ecc_alerts(&got).is_empty()).then_some(got)
        },
        context,
    );
    the_page_names_the_gpu_and_the_pod(ecc_alerts(&notified)[0]);

    // Several evaluations and group intervals later: still one page, still firing.
    let active_at = ecc_active_at(prom).unwrap_or_else(|| panic!("not firing: {}", context()));
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        ecc_active_at(prom),
        Some(active_at),
        "the ECC alert resolved or restarted"
    );
    let now = webhook.alerts();
    let ecc = ecc_alerts(&now);
    assert!(
        ecc.len() == 1 && ecc[0].status == "firing",
        "ECC notifications: {ecc:?}"
    );
    assert!(
        !now.iter().any(|a| a.label("alertname") == "GPUCriticalXid"),
        "XID 48 paged although GPUUncorrectableECCErrors inhibits it: {now:?}"
    );
}

/// Waits for the double-bit error on the pod's GPU series, then deletes the
/// pod from the kubelet and the API at once, as its controller would.
fn delete_the_pod_right_after_the_error(node: &TestNode, exporter: &Exporter) {
    let held = |m: &Metrics| m.find(DBE, UNCORRECTED).iter().any(|s| s.value >= 1.0);
    assert!(
        !held(&exporter.scrape()),
        "the error came before Prometheus saw the pod: start it later in SCENARIO"
    );
    let seen = exporter.scrape_until("the double-bit error on the GPU", held);
    assert!(
        seen.find(DBE, UNCORRECTED)
            .iter()
            .all(|s| s.labels.get("pod").map(String::as_str) == Some("trainer-0")),
        "the error is not first reported on the pod's GPU series: {:?}",
        seen.find(DBE, UNCORRECTED)
    );
    assert!(
        node.sim.delete_pod("ml-train", "trainer-0"),
        "delete the pod"
    );
    exporter.scrape_until("the GPU's series without the pod", |m| {
        held(m)
            && m.find(DBE, UNCORRECTED)
                .iter()
                .all(|s| !s.labels.contains_key("pod"))
    });
}

/// The page: the GPU's identity, no pod or scrape target labels, and the
/// pod that held the GPU in its `pods` annotation.
fn the_page_names_the_gpu_and_the_pod(page: &Notified) {
    assert_eq!(page.label("uuid"), GPU, "{page:?}");
    assert_eq!(page.label("node"), "dbe-node", "{page:?}");
    for label in ["namespace", "pod", "job", "instance"] {
        assert_eq!(
            page.label(label),
            "",
            "{label} on a hardware alert: {page:?}"
        );
    }
    let pods = page.annotations.get("pods").and_then(|v| v.as_str());
    assert_eq!(
        pods,
        Some("ml-train/trainer-0"),
        "the page names the pod that was hurt: {page:?}"
    );
}
