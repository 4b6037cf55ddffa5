//! Installing beside KEDA or prometheus-adapter: each metrics API
//! group/version has one server per cluster, so each coexistence mode of
//! docs/install.md leaves out the APIServices another server holds, in the
//! chart (`adapter.apiServices`) and in kustomize (`deploy/components`)
//! alike. What is not rendered, `helm install` cannot fail on and `kubectl
//! apply` cannot take over.

use std::process::Command;

use gpuscale_e2e::deploy::{
    assert_same_objects, chart_as_kustomize, helm_render, kustomize_as_chart, kustomize_with,
    objects, stdout_of, write,
};
use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake};
use gpuscale_e2e::python::validate_manifests;
use serde_json::{Value, json};

const EXTERNAL: &str = "v1beta1.external.metrics.k8s.io";
const CUSTOM_V1BETA2: &str = "v1beta2.custom.metrics.k8s.io";
const CUSTOM_V1BETA1: &str = "v1beta1.custom.metrics.k8s.io";

/// A coexistence mode: the chart's values, the kustomize components that
/// compose the same, and the APIServices gpuscale registers in it.
struct Mode {
    name: &'static str,
    values: Value,
    components: &'static [&'static str],
    registers: &'static [&'static str],
}

/// The chart's values that switch off these `adapter.apiServices`.
fn off_values(keys: &[&str]) -> Value {
    let switches: serde_json::Map<String, Value> = keys
        .iter()
        .map(|k| ((*k).to_string(), json!(false)))
        .collect();
    json!({"adapter": {"apiServices": switches}})
}

fn modes() -> Vec<Mode> {
    let off = off_values;
    vec![
        Mode {
            name: "alone",
            values: json!({}),
            components: &[],
            registers: &[EXTERNAL, CUSTOM_V1BETA2, CUSTOM_V1BETA1],
        },
        Mode {
            name: "beside KEDA",
            values: off(&["external"]),
            components: &["deploy/components/no-external-metrics-v1beta1"],
            registers: &[CUSTOM_V1BETA2, CUSTOM_V1BETA1],
        },
        Mode {
            name: "beside prometheus-adapter, external metrics moved",
            values: off(&["customV1beta2", "customV1beta1"]),
            components: &[
                "deploy/components/no-custom-metrics-v1beta2",
                "deploy/components/no-custom-metrics-v1beta1",
            ],
            registers: &[EXTERNAL],
        },
        Mode {
            name: "beside prometheus-adapter before a move, or beside both",
            values: off(&["external", "customV1beta2", "customV1beta1"]),
            components: &[
                "deploy/components/no-external-metrics-v1beta1",
                "deploy/components/no-custom-metrics-v1beta2",
                "deploy/components/no-custom-metrics-v1beta1",
            ],
            registers: &[],
        },
    ]
}

/// The APIService names among `objects`' keys (`APIService//name`).
fn apiservices(objects: &std::collections::BTreeMap<String, Value>) -> Vec<&str> {
    objects
        .keys()
        .filter_map(|k| k.strip_prefix("APIService//"))
        .collect()
}

#[test]
fn each_mode_registers_only_its_own_apiservices_in_chart_and_kustomize() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut distinct = std::collections::BTreeSet::new();
    for mode in &modes() {
        let rendered = helm_render(&mode.values, "gpuscale", "gpuscale")
            .unwrap_or_else(|e| panic!("{}: {e}", mode.name));
        let built = kustomize_with("deploy", mode.components);
        let helm = chart_as_kustomize(&rendered);
        let kust = kustomize_as_chart(&built);
        let mut want = mode.registers.to_vec();
        want.sort_unstable();
        assert_eq!(apiservices(&helm), want, "{}: the chart", mode.name);
        assert_eq!(apiservices(&kust), want, "{}: kustomize", mode.name);
        assert_same_objects(&helm, &kust, mode.name);
        // The chart's objects equal these, Helm's labels and hooks aside
        // (deploy.rs validates those with the default rendering):
        // validating each distinct object of the builds covers both.
        for o in objects(&built) {
            distinct.insert(o.to_string());
        }
    }
    let all: Vec<String> = distinct.into_iter().collect();
    let file = write(dir.path(), "modes.yaml", &all.join("\n---\n"));
    if let Err(e) = validate_manifests(&[file]) {
        panic!("{e}");
    }
}

/// A mode that registers nothing still serves KEDA (the external scaler)
/// and scale-to-zero: the adapter and its Service stay.
#[test]
fn without_apiservices_the_adapter_still_runs_for_keda() {
    let values = json!({
        "adapter": {
            "apiServices": {"external": false, "customV1beta2": false, "customV1beta1": false},
            "keda": {"enabled": true},
        }
    });
    let all = chart_as_kustomize(&helm_render(&values, "gpuscale", "gpuscale").expect("render"));
    assert!(apiservices(&all).is_empty(), "{:?}", apiservices(&all));
    let deploy = &all["Deployment/gpuscale/gpuscale-adapter"];
    let args = deploy["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--keda-listen=0.0.0.0:9443"), "{args}");
    assert!(all.contains_key("Service/gpuscale/gpuscale-adapter"));
}

#[test]
fn a_misspelt_apiservice_switch_is_rejected_at_install() {
    let values = json!({"adapter": {"apiServices": {"externl": false}}});
    let err = helm_render(&values, "gpuscale", "gpuscale").expect_err("rejected");
    assert!(
        err.contains("/adapter/apiServices") && err.contains("externl"),
        "{err}"
    );
}

/// Where KEDA runs: `kubectl apply` of the beside-KEDA rendering's
/// APIServices on the simulated cluster leaves KEDA's untouched, while the
/// default rendering would take it over (the defect this mode avoids).
#[test]
fn applying_the_beside_keda_rendering_leaves_kedas_apiservice_unchanged() {
    let kube = KubeFake::start(Cluster::default());
    let apiservices = keda_cluster(&kube);
    let dir = tempfile::tempdir().expect("tempdir");
    let keda = |kube: &KubeFake| kube.get(&apiservices, "", EXTERNAL).expect("KEDA's");
    let before = keda(&kube);

    apply_apiservices(&kube, dir.path(), &off_values(&["external"]));
    let after = keda(&kube);
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "{after}"
    );
    assert_eq!(after["spec"], before["spec"]);
    for name in [CUSTOM_V1BETA2, CUSTOM_V1BETA1] {
        let ours = kube.get(&apiservices, "", name).expect("gpuscale's");
        assert_eq!(ours["spec"]["service"]["name"], "gpuscale-adapter");
    }

    apply_apiservices(&kube, dir.path(), &json!({}));
    assert_eq!(
        keda(&kube)["spec"]["service"]["name"],
        "gpuscale-adapter",
        "the default rendering takes KEDA's APIService over"
    );
}

/// KEDA's external metrics APIService, registered; returns the APIService
/// collection. The simulated API has no aggregation layer built in: a CRD
/// announces `apiregistration.k8s.io/v1` `apiservices` to kubectl.
fn keda_cluster(kube: &KubeFake) -> Gvr {
    let apiservices: Gvr = (
        "apiregistration.k8s.io".into(),
        "v1".into(),
        "apiservices".into(),
    );
    kube.put(
        &(
            "apiextensions.k8s.io".into(),
            "v1".into(),
            "customresourcedefinitions".into(),
        ),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "apiservices.apiregistration.k8s.io"},
            "spec": {"group": "apiregistration.k8s.io", "scope": "Cluster",
                "names": {"plural": "apiservices", "singular": "apiservice",
                    "kind": "APIService", "listKind": "APIServiceList"},
                "versions": [{"name": "v1", "served": true, "storage": true}]}}),
    );
    kube.put(
        &apiservices,
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": EXTERNAL, "labels": {"app.kubernetes.io/part-of": "keda-operator"}},
            "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "service": {"namespace": "keda", "name": "keda-operator-metrics-apiserver", "port": 443}}}),
    );
    apiservices
}

/// `kubectl apply` of the APIServices the chart renders with `values`.
fn apply_apiservices(kube: &KubeFake, dir: &std::path::Path, values: &Value) {
    let rendered = helm_render(values, "gpuscale", "gpuscale").expect("render");
    let items: Vec<Value> = objects(&rendered)
        .into_iter()
        .filter(|o| o["kind"] == "APIService")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let file = write(dir, "apiservices.json", &list.to_string());
    let kubeconfig = write(dir, "kubeconfig", &kube.kubeconfig());
    stdout_of(
        Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            // The schemas are checked by kubernetes-validate above; the
            // simulated API publishes none for this group.
            .args(["apply", "--validate=false", "-f"])
            .arg(&file),
        "kubectl",
    );
}

/// The decision table of docs/install.md: each row with cert-manager gives
/// Helm values and kustomize components that register the same
/// APIServices, and none that the row's KEDA or prometheus-adapter holds.
#[test]
fn the_install_guides_decision_table_leaves_out_what_others_hold() {
    let doc = std::fs::read_to_string(gpuscale_e2e::bins::repo_root().join("docs/install.md"))
        .expect("docs/install.md");
    let section = doc
        .split("## Beside KEDA or prometheus-adapter\n")
        .nth(1)
        .expect("the coexistence section of docs/install.md");
    let rows: Vec<Vec<&str>> = section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| KEDA?"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .filter(|cells: &Vec<&str>| cells.len() == 5 && cells[2] == "yes")
        .collect();
    assert!(rows.len() >= 5, "{} rows", rows.len());
    for row in rows {
        let components: Vec<String> = ticked(row[4])
            .filter(|t| t.starts_with("no-"))
            .map(|t| format!("deploy/components/{t}"))
            .collect();
        let components: Vec<&str> = components.iter().map(String::as_str).collect();
        let rendered = helm_render(&table_values(row[3]), "gpuscale", "gpuscale")
            .unwrap_or_else(|e| panic!("{row:?}: {e}"));
        let helm = chart_as_kustomize(&rendered);
        let kust = kustomize_as_chart(&kustomize_with("deploy", &components));
        assert_eq!(apiservices(&helm), apiservices(&kust), "{row:?}");
        let mut held = Vec::new();
        if row[0] == "yes" {
            held.push(EXTERNAL);
        }
        if row[1].starts_with("yes") {
            held.extend([CUSTOM_V1BETA2, CUSTOM_V1BETA1]);
            if row[1].contains("external") {
                held.push(EXTERNAL);
            }
        }
        for name in held {
            assert!(
                !helm.contains_key(&format!("APIService//{name}")),
                "{row:?}"
            );
        }
    }
}

/// The `code` spans of a table cell.
fn ticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

/// The chart values of a cell's `a.b.c=value` spans.
fn table_values(cell: &str) -> Value {
    let mut values = json!({});
    for (path, value) in ticked(cell).filter_map(|t| t.split_once('=')) {
        let value = match value {
            "true" => json!(true),
            "false" => json!(false),
            other => json!(other),
        };
        let mut node = &mut values;
        for key in path.split('.') {
            node = node
                .as_object_mut()
                .expect("an object")
                .entry(key)
                .or_insert_with(|| json!({}));
        }
        *node = value;
    }
    values
}
