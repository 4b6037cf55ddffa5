//! Scale-to-zero parks and wakes any kind with a `/scale` subresource: a
//! custom `Model` (a CRD whose scale gives `status.selector`) is parked,
//! woken, `Waking` until a pod its selector matches is Ready, then
//! `Active`; a kind whose scale gives no selector and which reports no
//! `readyReplicas` is refused with a named reason. `kubectl get` shows the
//! policies with the shipped CRD's columns.

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::{Gvr, KubeFake};
use serde_json::{Value, json};

const GROUP: &str = "serving.example.com";

fn crds() -> Gvr {
    gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

fn models() -> Gvr {
    gvr(GROUP, "v1", "models")
}

fn pods() -> Gvr {
    gvr("", "v1", "pods")
}

/// A namespaced CRD `kind` with `/scale`, its selector at `.status.selector`
/// when `selector`.
fn crd(kind: &str, plural: &str, selector: bool) -> Value {
    let mut scale = json!({"specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas"});
    if selector {
        scale["labelSelectorPath"] = json!(".status.selector");
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": scale}}]}})
}

fn pod(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {"containers": [{"name": "server", "image": "vllm"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn kind_policy(name: &str, kind: &str) -> Value {
    let mut p = policy(name, kind, name, "chat-gw", json!({}));
    p["spec"]["target"]["apiVersion"] = json!(format!("{GROUP}/v1"));
    p["spec"]["idle"]["for"] = json!("2s");
    p
}

fn model_replicas(kube: &KubeFake) -> i64 {
    kube.get(&models(), NS, "llm")
        .and_then(|m| m["spec"]["replicas"].as_i64())
        .unwrap_or(-1)
}

fn phase(kube: &KubeFake, name: &str) -> String {
    status(kube, name)["phase"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_custom_kind_with_scale_parks_and_wakes_on_its_pods() {
    let dir = dir();
    let kube = fake();
    let shipped = gpuscale_e2e::bins::repo_root().join("deploy/adapter/scaletozeropolicy-crd.yaml");
    kubectl(
        &kube,
        &dir,
        &["apply", "-f", &shipped.display().to_string()],
    );
    kube.put(&crds(), crd("Model", "models", true));
    kube.put(&crds(), crd("Widget", "widgets", false));
    kube.put(
        &models(),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Model",
            "metadata": {"name": "llm", "namespace": NS, "generation": 1},
            "spec": {"replicas": 1},
            "status": {"replicas": 1, "selector": "app=llm"}}),
    );
    kube.put(&pods(), pod("llm-0", "llm"));
    kube.put(
        &gvr(GROUP, "v1", "widgets"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
            "metadata": {"name": "gadget", "namespace": NS, "generation": 1},
            "spec": {"replicas": 1}, "status": {"replicas": 1}}),
    );
    kube.put(&policies(), kind_policy("llm", "Model"));
    kube.put(&policies(), kind_policy("gadget", "Widget"));

    let mut load = Load::default();
    let (series, port) = Series::serve(&exposition(load));
    let prom = Prometheus::start(port);
    let _adapter = controller(&kube, &prom.url, "kinds", &dir, &[]);

    eventually("the Model parked", || {
        (model_replicas(&kube) == 0).then_some(())
    });
    // The status follows the scale.
    eventually("the policy says Parked", || {
        (phase(&kube, "llm") == "Parked").then_some(())
    });
    // Its operator removes the pods of a Model at 0.
    kube.delete(&pods(), NS, "llm-0");
    let table = kubectl(&kube, &dir, &["get", "scaletozeropolicies", "-n", NS]);
    let header = table.lines().next().unwrap_or("");
    for column in ["NAME", "TARGET", "PHASE", "REASON", "AGE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("llm ") && l.contains("Parked")),
        "{table}"
    );
    eventually("the Widget refused: readiness unknown", || {
        (reason(&kube, "gadget") == "TargetReadinessUnknown").then_some(())
    });

    load.chat_pending = 1;
    series.set(&exposition(load));
    eventually("the Model woken", || {
        (model_replicas(&kube) == 1).then_some(())
    });
    eventually("Waking while no pod is Ready", || {
        (phase(&kube, "llm") == "Waking").then_some(())
    });
    kube.put(&pods(), pod("llm-0", "llm"));
    eventually("Active once its pod is Ready", || {
        (phase(&kube, "llm") == "Active").then_some(())
    });
    let s = status(&kube, "llm");
    assert_eq!(s["conditions"][0]["type"], "Ready", "{s}");
    assert_eq!(s["conditions"][0]["status"], "True", "{s}");
    assert_eq!(s["observedGeneration"], 1, "{s}");
    assert_eq!(reason(&kube, "gadget"), "TargetReadinessUnknown");
}
