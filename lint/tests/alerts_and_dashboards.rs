//! The conventions of the alerts, runbooks and dashboards, read from the
//! files (no Prometheus): every alert's severity, annotations, runbook and
//! row in docs/alerts.md, a firing and a silent promtool case per alert,
//! dashboard variables, panels and queries, the scrape examples'
//! relabelings, and every metric name the rules and dashboards use against
//! the exporter's family descriptors (exporter names) or an explicit list
//! (others). The rules' own promtool runs and the end-to-end stories are in
//! `tests/tests/alerts.rs`.

use std::collections::{BTreeMap, BTreeSet};

use gpuscale_e2e::alerts::dashboards::{self, charted_names, parse_label_values, substitute};
use gpuscale_e2e::alerts::promql::metric_names;
use gpuscale_e2e::alerts::repo_root;
use gpuscale_e2e::alerts::rules::{self, RUNBOOK_BASE, Rule, SEVERITIES, unit_test_files};
use gpuscale_e2e::alerts::stack;

fn alerts() -> Vec<Rule> {
    rules::all_rules()
        .into_iter()
        .filter(|r| r.is_alert)
        .collect()
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
