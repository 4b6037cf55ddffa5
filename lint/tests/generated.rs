//! Every generated file is what its sources give (`cargo run -p
//! gpuscale-lint` writes them; this only checks): the source generators'
//! own `--check` (XID rules from `alerts/xid/xids.csv`, the dashboards'
//! JSON), `deploy/prometheus/`, the chart's rule files, dashboards and CRD,
//! the dashboards' ConfigMaps and the CRD the adapter's Rust types give.

use std::collections::BTreeSet;

use gpuscale_lint::generate::{self, COMMAND, Generated, Stale};
use gpuscale_lint::repo_root;
use yaml_serde::Value;

#[test]
fn every_generated_file_is_current() {
    let problems = generate::check(&repo_root()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        problems.is_empty(),
        "generated files out of date with their sources:\n{}\nrun: {COMMAND}",
        problems.join("\n")
    );
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    yaml_serde::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rule_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo_root().join("alerts"))
        .expect("alerts/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rules.yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no rule files in alerts/");
    files
}

/// Both manifests of `deploy/prometheus/` parse; the ConfigMap carries the
/// rule files verbatim, the `PrometheusRule` every rule.
#[test]
fn deploy_prometheus_carries_every_rule_file() {
    let configmap = yaml("deploy/prometheus/configmap.yaml");
    let mut rules = 0;
    for name in rule_files() {
        let text = read(&format!("alerts/{name}"));
        assert_eq!(
            configmap["data"][name.as_str()].as_str(),
            Some(text.as_str()),
            "{name}"
        );
        let doc: Value = yaml_serde::from_str(&text).expect("rules YAML");
        rules += doc["groups"]
            .as_sequence()
            .expect("groups")
            .iter()
            .map(|g| g["rules"].as_sequence().map_or(0, Vec::len))
            .sum::<usize>();
    }
    let rule = yaml("deploy/prometheus/prometheusrule.yaml");
    let n: usize = rule["spec"]["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .map(|g| g["rules"].as_sequence().map_or(0, Vec::len))
        .sum();
    assert_eq!(n, rules);
}

/// Every generated file says how it is regenerated, and no two outputs
/// share a path.
#[test]
fn generated_files_name_the_command_and_are_distinct() {
    let copies = generate::copies(&repo_root()).unwrap_or_else(|e| panic!("{e}"));
    let paths: BTreeSet<&str> = copies.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(paths.len(), copies.len(), "two copies share a path");
    for g in copies.iter().filter(|g| g.path.ends_with(".yaml")) {
        assert!(
            g.text.lines().take(2).any(|l| l.contains(COMMAND)),
            "{} (from {}) does not name `{COMMAND}` in its header",
            g.path,
            g.from
        );
    }
}

#[test]
fn a_changed_copy_and_an_orphan_are_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let generated_only = dir.path().join("deploy/helm/gpuscale/files/alerts");
    std::fs::create_dir_all(&generated_only).expect("mkdir");
    std::fs::write(generated_only.join("kept.yaml"), "old\n").expect("write");
    std::fs::write(generated_only.join("gone.yaml"), "x\n").expect("write");
    let wanted = [
        Generated {
            path: "deploy/helm/gpuscale/files/alerts/kept.yaml".to_string(),
            text: "new\n".to_string(),
            from: "test",
        },
        Generated {
            path: "deploy/new.yaml".to_string(),
            text: "new\n".to_string(),
            from: "test",
        },
    ];
    let stale = generate::stale(dir.path(), &wanted).expect("stale");
    assert_eq!(
        stale,
        [
            Stale::Differs("deploy/helm/gpuscale/files/alerts/kept.yaml".to_string()),
            Stale::Differs("deploy/new.yaml".to_string()),
            Stale::Orphan("deploy/helm/gpuscale/files/alerts/gone.yaml".to_string()),
        ]
    );
}
