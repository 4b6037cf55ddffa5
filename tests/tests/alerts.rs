//! Alerts, recording rules and Grafana dashboards (issue 5), proven against
//! the real exporter output, a real Prometheus and a real Alertmanager.
//!
//! Static checks: promtool check/test, alert metadata and runbooks, the
//! test-only rule copy, dashboard conventions, the scenario, and every
//! metric name the rules and dashboards use against the exporter's family
//! descriptors (exporter names) or an explicit list (others).
//! End to end (`alerts/end_to_end.rs`): the exporter on a scenario,
//! Prometheus with the rules, Alertmanager, the adapter, the dashboards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use gpuscale_e2e::alerts::dashboards::{self, parse_label_values, substitute};
use gpuscale_e2e::alerts::procs::{eventually, on_path};
use gpuscale_e2e::alerts::promql::metric_names;
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules::{self, Rule};
use gpuscale_e2e::alerts::stack::{self, Alertmanager, Webhook};

const RUNBOOK_BASE: &str = "https://github.com/gpuscale/gpuscale/blob/main/docs/runbooks/";
const SEVERITIES: &[&str] = &["critical", "warning", "info"];

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

fn alerts() -> Vec<Rule> {
    rules::all_rules()
        .into_iter()
        .filter(|r| r.is_alert)
        .collect()
}

fn unit_test_files() -> Vec<PathBuf> {
    let dir = repo_root().join("alerts/tests");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("alerts/tests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.yml"))
        .collect();
    v.sort();
    v
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
fn every_alert_has_severity_annotations_and_a_runbook() {
    let alerts_md =
        std::fs::read_to_string(repo_root().join("docs/alerts.md")).expect("docs/alerts.md");
    let mut names = BTreeSet::new();
    for a in alerts() {
        assert!(
            names.insert(a.name.clone()),
            "alert {} defined twice",
            a.name
        );
        let sev = a.labels.get("severity").map(String::as_str).unwrap_or("");
        assert!(
            SEVERITIES.contains(&sev),
            "{}: severity {sev:?} not in {SEVERITIES:?}",
            a.name
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                a.annotations.get(key).is_some_and(|v| !v.trim().is_empty()),
                "{}: no {key} annotation",
                a.name
            );
        }
        let url = &a.annotations["runbook_url"];
        assert_eq!(
            url,
            &format!("{RUNBOOK_BASE}{}.md", a.name),
            "{}: runbook_url",
            a.name
        );
        let runbook = repo_root().join(format!("docs/runbooks/{}.md", a.name));
        let text = std::fs::read_to_string(&runbook)
            .unwrap_or_else(|_| panic!("{} has no runbook {}", a.name, runbook.display()));
        assert!(
            text.starts_with(&format!("# {}\n", a.name)),
            "{}: runbook title",
            a.name
        );
        for section in ["## Meaning", "## Impact", "## Diagnosis", "## Mitigation"] {
            assert!(
                text.contains(section),
                "{}: runbook lacks {section}",
                a.name
            );
        }
        assert!(
            alerts_md.contains(&format!("[{}]", a.name)),
            "docs/alerts.md does not list {}",
            a.name
        );
    }
    // No orphaned runbooks.
    for e in std::fs::read_dir(repo_root().join("docs/runbooks")).expect("docs/runbooks") {
        let p = e.expect("entry").path();
        let stem = p.file_stem().expect("stem").to_string_lossy().to_string();
        assert!(
            names.contains(&stem),
            "runbook {} has no alert",
            p.display()
        );
    }
}

#[test]
fn every_alert_has_a_firing_and_a_silent_unit_test() {
    let mut fires: BTreeMap<String, usize> = BTreeMap::new();
    let mut silent: BTreeMap<String, usize> = BTreeMap::new();
    for f in unit_test_files() {
        let doc: yaml_serde::Value =
            yaml_serde::from_str(&std::fs::read_to_string(&f).expect("read")).expect("yaml");
        for t in doc["tests"].as_sequence().expect("tests") {
            for a in t
                .get("alert_rule_test")
                .and_then(|v| v.as_sequence())
                .into_iter()
                .flatten()
            {
                let name = a["alertname"].as_str().expect("alertname").to_string();
                let exp = a
                    .get("exp_alerts")
                    .and_then(|v| v.as_sequence())
                    .cloned()
                    .unwrap_or_default();
                if exp.is_empty() {
                    *silent.entry(name).or_default() += 1;
                } else {
                    for e in &exp {
                        let ann = e.get("exp_annotations").and_then(|v| v.as_mapping());
                        assert!(
                            ann.is_some_and(|m| m.len() >= 3),
                            "{}: {name} fires without its annotations checked",
                            f.display()
                        );
                    }
                    *fires.entry(name).or_default() += 1;
                }
            }
        }
    }
    for a in alerts() {
        assert!(
            fires.contains_key(&a.name),
            "no promtool case where {} fires",
            a.name
        );
        assert!(
            silent.contains_key(&a.name),
            "no promtool case where {} must not fire",
            a.name
        );
    }
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

/// The recording rules' names (`level:metric:operation`).
fn recorded_names() -> BTreeSet<String> {
    rules::all_rules()
        .into_iter()
        .filter(|r| !r.is_alert)
        .map(|r| r.name)
        .collect()
}

/// Every dashboard: schema 39 or later, its own uid, described in
/// docs/dashboards.md.
#[test]
fn dashboards_are_current_unique_and_documented() {
    let docs = std::fs::read_to_string(repo_root().join("docs/dashboards.md"))
        .expect("docs/dashboards.md");
    let mut uids = BTreeSet::new();
    for d in dashboards::load_all() {
        let j = &d.json;
        let title = d.title();
        assert!(
            j["schemaVersion"].as_u64().unwrap_or(0) >= 39,
            "{title}: schemaVersion < 39"
        );
        assert!(
            uids.insert(j["uid"].as_str().expect("uid").to_string()),
            "{title}: duplicate uid"
        );
        assert!(
            docs.contains(&d.file),
            "docs/dashboards.md does not describe {}",
            d.file
        );
    }
}

/// Every dashboard filters by datasource, cluster, node, namespace and
/// workload, with `label_values` query variables whose All value is `.*`.
#[test]
fn dashboard_variables_follow_the_conventions() {
    for d in dashboards::load_all() {
        let title = d.title();
        let vars = d.variables();
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        for required in ["datasource", "cluster", "node", "namespace", "workload"] {
            assert!(
                names.contains(&required),
                "{title}: no ${required} variable"
            );
        }
        for v in vars.iter().filter(|v| v.kind != "datasource") {
            assert_eq!(
                v.kind, "query",
                "{title}: ${} is not a query variable",
                v.name
            );
            assert_eq!(
                v.all_value.as_deref(),
                Some(".*"),
                "{title}: ${} needs allValue .*",
                v.name
            );
            let q = v.query.as_deref().unwrap_or("");
            assert!(
                parse_label_values(q).is_some(),
                "{title}: ${} query is not label_values(…): {q}",
                v.name
            );
        }
    }
}

/// Panels: unique ids, known types, on the grid; each (but rows) described,
/// with queries on the `$datasource`.
#[test]
fn dashboard_panels_follow_the_conventions() {
    for d in dashboards::load_all() {
        let title = d.title();
        let mut ids = BTreeSet::new();
        for p in d.panels() {
            let ptitle = p["title"].as_str().unwrap_or("?");
            assert!(
                ids.insert(p["id"].as_u64().expect("panel id")),
                "{title}: duplicate panel id"
            );
            let kind = p["type"].as_str().unwrap_or("");
            assert!(
                ["timeseries", "stat", "table", "row"].contains(&kind),
                "{title} / {ptitle}: panel type {kind}"
            );
            let g = &p["gridPos"];
            assert!(
                g["x"].as_u64().unwrap_or(99) + g["w"].as_u64().unwrap_or(99) <= 24,
                "{title} / {ptitle}: off the grid"
            );
            if kind != "row" {
                panel_queries_the_datasource(p, &format!("{title} / {ptitle}"));
            }
        }
    }
}

fn panel_queries_the_datasource(p: &serde_json::Value, what: &str) {
    assert_eq!(
        p["datasource"]["uid"], "${datasource}",
        "{what}: datasource"
    );
    assert!(
        p["description"].as_str().is_some_and(|s| !s.is_empty()),
        "{what}: no description"
    );
    let targets = p["targets"].as_array().expect("targets");
    assert!(!targets.is_empty(), "{what}: no query");
    for t in targets {
        assert_eq!(
            t["datasource"]["uid"], "${datasource}",
            "{what}: target datasource"
        );
    }
}

/// Queries: every variable is defined, selectors use `=~` for variables,
/// and every recorded name is a recording rule.
#[test]
fn dashboard_queries_follow_the_conventions() {
    let recorded = recorded_names();
    for d in dashboards::load_all() {
        let vars = d.variables();
        for q in d.queries() {
            let _ = substitute(&q.expr, &vars);
            for var in [
                "$cluster",
                "$node",
                "$namespace",
                "$workload",
                "$gpu",
                "$pod",
                "$metric",
            ] {
                assert!(
                    !q.expr.contains(&format!("=\"{var}\"")),
                    "{}: use =~ for {var}",
                    q.key()
                );
            }
            for name in metric_names(&q.expr) {
                if name.contains(':') {
                    assert!(
                        recorded.contains(&name),
                        "{}: {name} is not a recording rule",
                        q.key()
                    );
                }
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

#[test]
fn adapter_metric_names_match_the_adapter_docs() {
    let path = repo_root().join("docs/adapter.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for name in &stack::adapter_metrics() {
        assert!(
            text.contains(name),
            "docs/adapter.md does not document {name}, used by alerts/dashboards"
        );
    }
}

#[test]
fn scale_to_zero_names_match_the_guide() {
    let text = std::fs::read_to_string(repo_root().join("docs/scale-to-zero.md"))
        .expect("docs/scale-to-zero.md");
    for name in stack::scale_to_zero_metrics() {
        assert!(
            text.contains(&format!("| `{name}` |")),
            "docs/scale-to-zero.md does not document {name}, used by alerts/dashboards"
        );
    }
}

#[path = "alerts/end_to_end.rs"]
mod end_to_end;
#[path = "alerts/node_pool.rs"]
mod node_pool;
#[path = "alerts/restart.rs"]
mod restart;
#[path = "alerts/two_jobs.rs"]
mod two_jobs;

/// The metric names of every dashboard query.
fn charted_names() -> BTreeSet<String> {
    dashboards::load_all()
        .iter()
        .flat_map(|d| d.queries())
        .flat_map(|q| metric_names(&q.expr))
        .collect()
}

/// Where each metric name the rules and dashboards use is used first.
fn used_metric_names() -> BTreeMap<String, String> {
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    for r in rules::all_rules() {
        for n in metric_names(&r.expr) {
            used.entry(n).or_insert_with(|| format!("rule {}", r.name));
        }
    }
    for d in dashboards::load_all() {
        for q in d.queries() {
            for n in metric_names(&q.expr) {
                used.entry(n).or_insert_with(|| q.key());
            }
        }
    }
    used
}

/// Metric names: exporter names are families it describes, recorded names
/// are recording rules, others are on an explicit list.
#[test]
fn every_metric_name_used_is_known() {
    let described = exporter_families();
    let recorded = recorded_names();
    let adapter = [stack::adapter_metrics(), stack::scale_to_zero_metrics()].concat();
    let others: BTreeSet<&str> = stack::KUBE_STATE_METRICS
        .iter()
        .chain(stack::PROMETHEUS_BUILTINS)
        .chain(stack::SERVING_METRICS)
        .copied()
        .chain(adapter.iter().map(String::as_str))
        .collect();
    let mut unknown = Vec::new();
    for (name, by) in &used_metric_names() {
        let ok = if name.contains(':') {
            recorded.contains(name) || stack::SERVING_METRICS.contains(&name.as_str())
        } else if name.starts_with("gpu_")
            || name.starts_with("gpuscale_exporter_")
            || name.starts_with("process_")
        {
            described.contains(name.as_str())
        } else {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            others.contains(base) || others.contains(name.as_str())
        };
        if !ok {
            unknown.push(format!("{name} (used by {by})"));
        }
    }
    assert!(
        unknown.is_empty(),
        "metric names not among the exporter's families or the explicit lists:\n{}",
        unknown.join("\n")
    );
}

/// The exporter's native families, from the descriptors its code builds
/// them with, and its self-metrics registry's (`process_*` included):
/// docs/metrics.md is checked against the same lists.
fn exporter_families() -> BTreeSet<String> {
    let native = gpuscale_exporter::catalog::native()
        .into_iter()
        .map(|d| d.name.to_string());
    let own = gpuscale_exporter::selfmetrics::describe()
        .into_iter()
        .map(|f| f.name);
    native.chain(own).collect()
}

#[test]
fn every_exporter_family_is_charted() {
    // The e2e test checks the families the scenario produces; this one also
    // covers those it cannot.
    let charted = charted_names();
    let missing: Vec<_> = exporter_families()
        .into_iter()
        .filter(|name| !charted.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "exporter families on no dashboard: {missing:?}"
    );
}

#[test]
fn scrape_examples_relabel_like_the_servicemonitor() {
    // The PodMonitor carries the ServiceMonitor's relabelings verbatim; the
    // plain scrape config renames the same discovery labels.
    let sm = stack::servicemonitor_relabelings();
    let read = |p: &str| -> yaml_serde::Value {
        yaml_serde::from_str(&std::fs::read_to_string(repo_root().join(p)).expect(p)).expect(p)
    };
    let pm = read("deploy/examples/podmonitor.yaml");
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["relabelings"], sm);
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["honorLabels"], true);
    let plain = read("deploy/examples/prometheus-scrape-config.yaml");
    let job = &plain["scrape_configs"][0];
    assert_eq!(job["honor_labels"], true);
    let targets: Vec<(String, String)> = job["relabel_configs"]
        .as_sequence()
        .expect("relabel_configs")
        .iter()
        .filter_map(|r| {
            Some((
                r["source_labels"][0].as_str()?.to_string(),
                r["target_label"].as_str()?.to_string(),
            ))
        })
        .collect();
    for want in [
        ("__meta_kubernetes_namespace", "exporter_namespace"),
        ("__meta_kubernetes_pod_name", "exporter_pod"),
        ("__meta_kubernetes_pod_node_name", "node"),
    ] {
        assert!(
            targets.contains(&(want.0.to_string(), want.1.to_string())),
            "plain scrape config lacks {want:?}"
        );
    }
    for t in &targets {
        assert!(
            !["namespace", "pod", "container"].contains(&t.1.as_str()),
            "plain scrape config sets {t:?}"
        );
    }
    // The relabelings the e2e scrape uses come from the ServiceMonitor.
    assert_eq!(stack::relabel_configs(&sm).len(), 4);
}

#[test]
fn runbooks_reset_a_gpu_by_uuid_after_stopping_nvml_users() {
    let guide = std::fs::read_to_string(repo_root().join("docs/gpu-reset.md")).expect("guide");
    for want in [
        "nvidia-smi --gpu-reset -i <uuid>",
        "gpu_pod_allocation{uuid=\"<uuid>\"}",
        "gpuscale-exporter",
        "DCGM",
    ] {
        assert!(guide.contains(want), "docs/gpu-reset.md lacks {want}");
    }
    for e in std::fs::read_dir(repo_root().join("docs/runbooks")).expect("runbooks") {
        let p = e.expect("entry").path();
        let text = std::fs::read_to_string(&p).expect("runbook");
        assert!(
            !text.contains("-i <index>"),
            "{}: reset by index",
            p.display()
        );
        if text.contains("--gpu-reset") {
            assert!(
                text.contains("../gpu-reset.md") && text.contains("-i <uuid>"),
                "{}: reset without the drain steps or by index",
                p.display()
            );
        }
    }
}

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
