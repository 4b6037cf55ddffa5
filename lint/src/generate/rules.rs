//! `deploy/prometheus/`: the rule files of `alerts/` for a Prometheus
//! Operator (`PrometheusRule`) and for a Prometheus that reads rule files
//! from a mounted ConfigMap.

use std::path::Path;

use yaml_serde::Value;

use super::{COMMAND, Error, Generated, list, read};

/// Header of the generated manifests in `deploy/prometheus/`.
fn header() -> String {
    format!("# Generated from alerts/*.rules.yml; do not edit. Regenerate with\n# {COMMAND}\n")
}

/// `alerts/*.rules.yml`, sorted, as (path below the root, text).
pub(super) fn rule_files(root: &Path) -> Result<Vec<(String, String)>, Error> {
    let names = list(root, "alerts", ".rules.yml")?;
    if names.is_empty() {
        return Err(Error::Io {
            path: "alerts".to_string(),
            message: "no *.rules.yml files".to_string(),
        });
    }
    names
        .into_iter()
        .map(|n| {
            let path = format!("alerts/{n}");
            let text = read(root, &path)?;
            Ok((path, text))
        })
        .collect()
}

pub(super) fn manifests(root: &Path) -> Result<Vec<Generated>, Error> {
    let files = rule_files(root)?;
    Ok(vec![
        Generated {
            path: "deploy/prometheus/prometheusrule.yaml".to_string(),
            text: prometheus_rule(&files)?,
            from: "alerts/*.rules.yml",
        },
        Generated {
            path: "deploy/prometheus/configmap.yaml".to_string(),
            text: configmap(&files),
            from: "alerts/*.rules.yml",
        },
    ])
}

/// Every group of every rule file in one `PrometheusRule`.
fn prometheus_rule(files: &[(String, String)]) -> Result<String, Error> {
    let yaml = |path: &str, e: yaml_serde::Error| Error::Yaml {
        path: path.to_string(),
        message: e.to_string(),
    };
    let mut groups = Vec::new();
    for (path, text) in files {
        let doc: Value = yaml_serde::from_str(text).map_err(|e| yaml(path, e))?;
        let Some(Value::Sequence(g)) = doc.get("groups") else {
            return Err(Error::Yaml {
                path: path.clone(),
                message: "no `groups` list".to_string(),
            });
        };
        groups.extend(g.iter().cloned());
    }
    let mut manifest = yaml_serde::to_value(serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "gpuscale",
            "namespace": "gpuscale",
            // `release`: the label kube-prometheus-stack selects rules by.
            "labels": {
                "app.kubernetes.io/name": "gpuscale",
                "app.kubernetes.io/component": "rules",
                "app.kubernetes.io/part-of": "gpuscale",
                "release": "kube-prometheus-stack",
            },
        },
        "spec": {"groups": []},
    }))
    .map_err(|e| yaml("deploy/prometheus/prometheusrule.yaml", e))?;
    manifest["spec"]["groups"] = Value::Sequence(groups);
    let body = yaml_serde::to_string(&manifest)
        .map_err(|e| yaml("deploy/prometheus/prometheusrule.yaml", e))?;
    Ok(format!("{}{body}", header()))
}

/// The rule files verbatim in a ConfigMap.
fn configmap(files: &[(String, String)]) -> String {
    let mut s = format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpuscale-rules\n  namespace: gpuscale\n  labels:\n    app.kubernetes.io/name: gpuscale\n    app.kubernetes.io/component: rules\ndata:\n",
        header()
    );
    for (path, text) in files {
        let name = path.trim_start_matches("alerts/");
        s.push_str(&format!("  {name}: |\n"));
        s.push_str(&indented(text, "    "));
    }
    s
}

/// `text` with every non-empty line indented, for a YAML block scalar.
pub(super) fn indented(text: &str, indent: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("{indent}{l}\n")
            }
        })
        .collect()
}
