//! Alerts, recording rules and Grafana dashboards (issue 5), proven against
//! the real exporter output, a real Prometheus and a real Alertmanager.
//!
//! Here: promtool check and test of the rule files and of the test-only
//! rule copy, the scenario, Alertmanager's inhibitions. End to end
//! (`alerts/end_to_end.rs`): the exporter on a scenario, Prometheus with the
//! rules, Alertmanager, the adapter, the dashboards. The conventions of
//! alerts, runbooks and dashboards and the metric names they use are static
//! checks of gpuscale-lint (`lint/tests/alerts_and_dashboards.rs`).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use gpuscale_e2e::alerts::dashboards::charted_names;
use gpuscale_e2e::alerts::procs::{eventually, on_path};
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules::{self, RUNBOOK_BASE, SEVERITIES, unit_test_files};
use gpuscale_e2e::alerts::stack::{Alertmanager, Webhook};

// GPUs of tests/scenarios/alerts.yaml
const BUSY_TRAINING: &str = "GPU-a0000000-0000-4000-8000-000000000000";
const THROTTLED: &str = "GPU-a1000000-0000-4000-8000-000000000000";
const XID: &str = "GPU-a2000000-0000-4000-8000-000000000000";
const IDLE_ALLOCATED: &str = "GPU-a3000000-0000-4000-8000-000000000000";
const MIG: &str = "GPU-a4000000-0000-4000-8000-000000000000";
const UNALLOCATED: &str = "GPU-a5000000-0000-4000-8000-000000000000";
const SHARED: &str = "GPU-a6000000-0000-4000-8000-000000000000";
const LOST: &str = "GPU-a7000000-0000-4000-8000-000000000000";
const HEALTHY: &[&str] = &[BUSY_TRAINING, MIG, UNALLOCATED, SHARED];

fn require(bin: &str) {
    assert!(
        on_path(bin),
        "`{bin}` is not on PATH: install the Debian packages prometheus, prometheus-alertmanager, curl and python3"
    );
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

// ------------------------------------------------------------------ static

#[test]
fn rule_files_pass_promtool_check() {
    require("promtool");
    let out = run(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .args(rules::rule_files()));
    assert!(!out.contains("FAILED"), "{out}");
}

#[test]
fn rule_unit_tests_pass() {
    require("promtool");
    let files = unit_test_files();
    assert!(!files.is_empty());
    run(Command::new("promtool")
        .args(["test", "rules"])
        .args(&files)
        .current_dir(repo_root()));
}

#[test]
fn test_copy_of_the_rules_changes_only_durations() {
    require("promtool");
    let dir = tempfile::tempdir().expect("tempdir");
    let copies = rules::write_time_scaled(dir.path());
    run(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .args(&copies));
    for (orig, copy) in rules::rule_files().iter().zip(&copies) {
        let text = std::fs::read_to_string(copy).expect("copy");
        let a: yaml_serde::Value =
            yaml_serde::from_str(&std::fs::read_to_string(orig).expect("orig")).expect("yaml");
        let b: yaml_serde::Value = yaml_serde::from_str(&text).expect("yaml");
        let (ga, gb) = (
            a["groups"].as_sequence().expect("groups"),
            b["groups"].as_sequence().expect("groups"),
        );
        assert_eq!(ga.len(), gb.len());
        for (x, y) in ga.iter().zip(gb) {
            let (ra, rb) = (
                x["rules"].as_sequence().expect("rules"),
                y["rules"].as_sequence().expect("rules"),
            );
            assert_eq!(ra.len(), rb.len());
            for (r1, r2) in ra.iter().zip(rb) {
                for key in ["alert", "record", "labels", "annotations"] {
                    assert_eq!(r1.get(key), r2.get(key), "{key} changed in the test copy");
                }
                // Expressions are equal once bracketed durations are blanked.
                let blank =
                    |e: &str| gpuscale_e2e::alerts::promql::rewrite_ranges(e, |_, _| "D".into());
                let (e1, e2) = (
                    r1["expr"].as_str().expect("expr"),
                    r2["expr"].as_str().expect("expr"),
                );
                assert_eq!(blank(e1), blank(e2), "expression changed beyond durations");
            }
        }
    }
}

#[test]
fn the_e2e_scenario_is_valid() {
    let path = repo_root().join("tests/scenarios/alerts.yaml");
    let s = gpuscale_nvml_sim::scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.gpus.len(), 8);
}

#[path = "alerts/end_to_end.rs"]
mod end_to_end;
#[path = "alerts/node_pool.rs"]
mod node_pool;
#[path = "alerts/pod_leaves.rs"]
mod pod_leaves;
#[path = "alerts/restart.rs"]
mod restart;
#[path = "alerts/two_jobs.rs"]
mod two_jobs;

#[test]
fn alertmanager_inhibits_ecc_xids_and_a_lost_gpus_symptoms() {
    require("prometheus-alertmanager");
    let dir = tempfile::tempdir().expect("tempdir");
    let webhook = Webhook::start();
    let am = Alertmanager::start(dir.path(), &webhook.url());
    let alert = |name: &str, uuid: &str, extra: &[(&str, &str)]| {
        let mut labels = serde_json::json!({
            "alertname": name, "node": "n1", "uuid": uuid, "gpu": "0", "severity": "critical"
        });
        for (k, v) in extra {
            labels[*k] = serde_json::json!(v);
        }
        serde_json::json!({ "labels": labels })
    };
    // Sources first, as Prometheus sends them in rule order.
    am.post_alerts(&serde_json::json!([
        alert("GPUFallenOffBus", "GPU-lost", &[("state", "lost")]),
        alert("GPUUncorrectableECCErrors", "GPU-ecc", &[]),
    ]));
    am.post_alerts(&serde_json::json!([
        alert("GPUCriticalXid", "GPU-lost", &[("xid", "79")]),
        alert("GPUUncorrectableECCErrors", "GPU-lost", &[]),
        alert(
            "GPUThermalThrottling",
            "GPU-lost",
            &[("reason", "hw_thermal")]
        ),
        alert("GPUCriticalXid", "GPU-ecc", &[("xid", "95")]),
        alert("GPUXidWarning", "GPU-ecc", &[("xid", "94")]),
        // Not the same event: must be notified.
        alert("GPUCriticalXid", "GPU-ecc", &[("xid", "119")]),
    ]));
    eventually(
        "the three uninhibited alerts at the webhook",
        Duration::from_secs(30),
        || (webhook.alerts().len() >= 3).then_some(()),
        || am.proc.log_tail(20),
    );
    // Give an inhibited alert time to (wrongly) arrive.
    std::thread::sleep(Duration::from_secs(4));
    let got: BTreeSet<(String, String, String)> = webhook
        .alerts()
        .iter()
        .map(|a| {
            (
                a.label("alertname").to_string(),
                a.label("uuid").to_string(),
                a.label("xid").to_string(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String, String)> = [
        ("GPUFallenOffBus", "GPU-lost", ""),
        ("GPUUncorrectableECCErrors", "GPU-ecc", ""),
        ("GPUCriticalXid", "GPU-ecc", "119"),
    ]
    .iter()
    .map(|(a, u, x)| (a.to_string(), u.to_string(), x.to_string()))
    .collect();
    assert_eq!(got, want, "notified alerts");
}
