//! Orphan repair (at the controller's start) finds what an earlier
//! gpuscale parked in any kind with a `scale` subresource, not only
//! Deployments and StatefulSets, and walks the whole paged list: a
//! cluster of 1,200 Deployments is read in three pages of 500, and the
//! annotated Deployment on the last page is woken as the custom `Model` is.

use crate::scale_to_zero_support::*;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::kubeapi::Gvr;
use serde_json::json;

const GROUP: &str = "serving.example.com";

fn models() -> Gvr {
    gvr(GROUP, "v1", "models")
}

/// A namespaced CRD with `/scale`, as a model operator ships.
fn model_crd() -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("models.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "models", "singular": "model", "kind": "Model",
                "listKind": "ModelList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}}}]}})
}

fn parked(mut obj: serde_json::Value, replicas: &str) -> serde_json::Value {
    obj["metadata"]["annotations"] = json!({"gpuscale.dev/parked-replicas": replicas});
    obj
}

#[test]
fn orphans_of_any_scale_kind_are_woken_across_every_page() {
    let kube = fake();
    kube.put(
        &gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        model_crd(),
    );
    for i in 0..1200 {
        kube.put(&deployments(), deployment(&format!("web-{i:04}"), 1, 1));
    }
    // Named to sort last: on the third page of 500.
    kube.put(&deployments(), parked(deployment("zz-orphan", 0, 0), "3"));
    kube.put(
        &models(),
        parked(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Model",
                "metadata": {"name": "llm", "namespace": NS, "generation": 1},
                "spec": {"replicas": 0},
                "status": {"replicas": 0, "selector": "app=llm"}}),
            "2",
        ),
    );
    let dead = format!("http://127.0.0.1:{}", gpuscale_e2e::free_port());
    let dir = dir();
    let _adapter = controller(&kube, &dead, "a", &dir, &[]);

    eventually("the orphaned Model woken to 2", || {
        let m = kube.get(&models(), NS, "llm")?;
        (m["spec"]["replicas"] == 2).then_some(())
    });
    eventually("the Deployment on the last page woken to 3", || {
        (replicas(&kube, "zz-orphan") == 3).then_some(())
    });
    let pages: Vec<String> = kube
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /apis/apps/v1/deployments?") && r.contains("limit=500"))
        .collect();
    assert!(pages.len() >= 3, "three pages of 500: {pages:#?}");
    assert!(
        pages.iter().filter(|r| r.contains("continue=")).count() >= 2,
        "pages after the first follow the continue token: {pages:#?}"
    );
    let events = events(&kube);
    assert!(
        events.iter().filter(|(r, _)| r == "OrphanWoken").count() >= 2,
        "{events:?}"
    );
    // Nothing else was touched.
    assert_eq!(replicas(&kube, "web-0000"), 1);
}
