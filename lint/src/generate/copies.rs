//! The copies Helm and kustomize read: the chart's rule files, dashboards
//! and CRD, the dashboards as ConfigMaps for Grafana's sidecar, and the CRD
//! the adapter's Rust types generate.

use std::path::Path;

use super::rules::{indented, rule_files};
use super::{COMMAND, Error, Generated, list, read};

/// Folders that hold only generated files: a file with no source left in
/// them is removed.
pub(super) const GENERATED_ONLY: [&str; 2] = [
    "deploy/helm/gpuscale/files/alerts",
    "deploy/helm/gpuscale/files/dashboards",
];

/// The chart's CRD is a template, not in `crds/`: Helm never upgrades
/// `crds/`, and the template's `helm.sh/resource-policy: keep` leaves the
/// CRD (and every policy) in place on `helm uninstall`.
const CHART_CRD: &str = "deploy/helm/gpuscale/templates/scaletozeropolicy-crd.yaml";

/// The label kube-prometheus-stack's Grafana sidecar looks for.
const SIDECAR_LABEL: (&str, &str) = ("grafana_dashboard", "\"1\"");

pub(super) fn chart_and_kustomize(root: &Path) -> Result<Vec<Generated>, Error> {
    let mut out = Vec::new();
    for (path, text) in rule_files(root)? {
        let name = path.trim_start_matches("alerts/");
        out.push(Generated {
            path: format!("{}/{name}", GENERATED_ONLY[0]),
            text,
            from: "alerts/*.rules.yml",
        });
    }
    let mut dashboards = Vec::new();
    for name in list(root, "dashboards", ".json")? {
        let text = read(root, &format!("dashboards/{name}"))?;
        out.push(Generated {
            path: format!("{}/{name}", GENERATED_ONLY[1]),
            text: text.clone(),
            from: "dashboards/*.json",
        });
        dashboards.push((name, text));
    }
    out.push(Generated {
        path: "deploy/dashboards/dashboards.yaml".to_string(),
        text: dashboard_configmaps(&dashboards),
        from: "dashboards/*.json",
    });
    let crd = gpuscale_scale_to_zero::crd::crd_yaml().map_err(|e| Error::Crd(e.to_string()))?;
    out.push(Generated {
        path: CHART_CRD.to_string(),
        text: chart_crd_template(&crd)?,
        from: "adapter/scale-to-zero/src/crd.rs",
    });
    out.push(Generated {
        path: "deploy/adapter/scaletozeropolicy-crd.yaml".to_string(),
        text: crd,
        from: "adapter/scale-to-zero/src/crd.rs",
    });
    Ok(out)
}

/// The CRD as a chart template: behind `crds.install`, annotated so that
/// `helm uninstall` keeps it. The header is a template comment, so a
/// switched-off CRD renders to nothing.
fn chart_crd_template(crd: &str) -> Result<String, Error> {
    let body: String = crd
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    if body.contains("{{") {
        return Err(Error::Crd(
            "holds `{{`, which Helm would read as a template".into(),
        ));
    }
    let body = body
        .split_once("\nmetadata:\n")
        .filter(|(_, rest)| !rest.contains("\n  annotations:\n"))
        .map(|(head, rest)| {
            format!("{head}\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n{rest}")
        })
        .ok_or_else(|| Error::Crd("no metadata without annotations to annotate".into()))?;
    Ok(format!(
        "{{{{- /* Generated from adapter/scale-to-zero/src/crd.rs by {COMMAND}; do not edit. */}}}}\n\
         {{{{- if .Values.crds.install }}}}\n\
         # helm upgrade updates this CRD; helm uninstall keeps it and every policy.\n\
         {body}{{{{- end }}}}\n"
    ))
}

/// One ConfigMap per dashboard (a ConfigMap holds at most 1 MiB).
fn dashboard_configmaps(dashboards: &[(String, String)]) -> String {
    let docs: Vec<String> = dashboards
        .iter()
        .map(|(name, text)| {
            let stem = name.trim_end_matches(".json");
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpuscale-dashboard-{stem}\n  namespace: gpuscale\n  labels:\n    app.kubernetes.io/name: gpuscale-dashboards\n    app.kubernetes.io/part-of: gpuscale\n    {}: {}\ndata:\n  {name}: |\n{}",
                SIDECAR_LABEL.0,
                SIDECAR_LABEL.1,
                indented(text, "    ")
            )
        })
        .collect();
    format!(
        "# Generated from dashboards/*.json by {COMMAND}; do not edit.\n{}",
        docs.join("---\n")
    )
}
