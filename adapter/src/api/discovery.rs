//! Discovery documents: `/apis`, the group, and the version's resources.

use serde_json::{Value, json};

use super::{GROUP, GROUP_VERSION, VERSION};

fn group() -> Value {
    let v = json!({"groupVersion": GROUP_VERSION, "version": VERSION});
    json!({"name": GROUP, "versions": [v.clone()], "preferredVersion": v})
}

/// `GET /apis` (always the plain APIGroupList; an aggregator asking for
/// aggregated discovery falls back to it).
pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group(), super::custom::group()]})
}

/// `GET /apis/external.metrics.k8s.io`.
pub fn api_group() -> Value {
    let mut g = group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `GET /apis/external.metrics.k8s.io/v1beta1`.
pub fn resource_list(metrics: &[String]) -> Value {
    let resources: Vec<Value> = metrics
        .iter()
        .map(|m| {
            json!({
                "name": m,
                "singularName": "",
                "namespaced": true,
                "kind": "ExternalMetricValueList",
                "verbs": ["get"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": resources,
    })
}
