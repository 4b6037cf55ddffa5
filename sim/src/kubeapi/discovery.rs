//! Discovery: the `APIResourceList` of each group/version the fake serves,
//! with the subresources a real server lists (`deployments/scale`, …), so
//! clients that resolve kinds through discovery (kube's `pinned_kind`) see
//! what a cluster would show them.

use serde_json::{Value, json};

use super::Gvr;

/// (group, version, resource, kind, namespaced, subresources).
type Served = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
);

const SERVED: &[Served] = &[
    ("", "v1", "pods", "Pod", true, &["status"]),
    ("", "v1", "services", "Service", true, &["status"]),
    ("", "v1", "configmaps", "ConfigMap", true, &[]),
    ("", "v1", "namespaces", "Namespace", false, &["status"]),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["scale", "status"],
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["scale", "status"],
    ),
    ("batch", "v1", "jobs", "Job", true, &["status"]),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["status"],
    ),
    ("coordination.k8s.io", "v1", "leases", "Lease", true, &[]),
    ("events.k8s.io", "v1", "events", "Event", true, &[]),
    (
        "gpuscale.dev",
        "v1alpha1",
        "scaletozeropolicies",
        "ScaleToZeroPolicy",
        true,
        &["status"],
    ),
];

/// The resource list for `/api/v1` or `/apis/{group}/{version}`.
pub(super) fn resources(path: &str) -> Option<Value> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let mut list = Vec::new();
    for (g, v, plural, kind, namespaced, subs) in SERVED {
        if *g != group || *v != version {
            continue;
        }
        list.push(
            json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}),
        );
        for sub in *subs {
            let kind = if *sub == "scale" { "Scale" } else { kind };
            list.push(json!({"name": format!("{plural}/{sub}"), "singularName": "", "namespaced": namespaced,
                "kind": kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

/// Whether the collection serves the subresource.
pub(super) fn has_subresource(gvr: &Gvr, sub: &str) -> bool {
    SERVED.iter().any(|(g, v, r, _, _, subs)| {
        *g == gvr.0 && *v == gvr.1 && *r == gvr.2 && subs.contains(&sub)
    })
}
