//! EndpointSlices for Services, as the endpointslice controller keeps
//! them: each Service with a selector has one slice (`<service>-sim`,
//! labelled `kubernetes.io/service-name`) listing the pods its selector
//! matches that have an IP and have not ended (`Succeeded`, `Failed`),
//! each `ready` and `serving` by its Ready
//! condition (`terminating` once it is being deleted), with the Service's
//! ports resolved to the pods' (a named `targetPort` through the
//! container port of that name). Kept in step on every write of a pod, a
//! Service or a slice; a Service without a selector gets none (its slices
//! are the user's, as on a real cluster), and a Service gone takes its
//! slice. Slices of another manager are left alone beside it.

use serde_json::{Value, json};

use super::State;
use crate::kubeapi::Gvr;
use crate::kubeapi::fields::Fields;
use crate::kubeapi::labels::Selector;

const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

fn core(plural: &str) -> Gvr {
    (String::new(), "v1".into(), plural.into())
}

fn slices() -> Gvr {
    (
        "discovery.k8s.io".into(),
        "v1".into(),
        "endpointslices".into(),
    )
}

/// Whether a write of `gvr` can change a slice.
pub(crate) fn follows(gvr: &Gvr) -> bool {
    *gvr == core("pods") || *gvr == core("services") || *gvr == slices()
}

fn matches(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels[k] == *v))
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// A Service port's port on `pods`: a number as is, a name through the
/// first pod's container port of that name, none as the Service's port.
fn target(port: &Value, pods: &[&Value]) -> Value {
    match &port["targetPort"] {
        Value::Number(n) => json!(n),
        Value::String(name) => pods
            .iter()
            .flat_map(|p| p["spec"]["containers"].as_array().into_iter().flatten())
            .flat_map(|c| c["ports"].as_array().into_iter().flatten())
            .find(|p| p["name"] == name.as_str())
            .map_or(Value::Null, |p| p["containerPort"].clone()),
        _ => port["port"].clone(),
    }
}

fn endpoint(pod: &Value) -> Value {
    let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
    let up = ready(pod) && !terminating;
    let mut e = json!({
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": up, "serving": ready(pod), "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": pod["metadata"]["namespace"],
            "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
    });
    if let Some(node) = pod["spec"]["nodeName"].as_str() {
        e["nodeName"] = json!(node);
    }
    e
}

/// The slice `service` should have now, given the namespace's `pods`.
fn desired(service: &Value, pods: &[Value]) -> Value {
    let ns = service["metadata"]["namespace"].clone();
    let name = service["metadata"]["name"].as_str().unwrap_or("");
    let selected: Vec<&Value> = pods
        .iter()
        .filter(|p| matches(&service["spec"]["selector"], &p["metadata"]["labels"]))
        .filter(|p| p["status"]["podIP"].is_string())
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect();
    let ports: Vec<Value> = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut out = json!({"port": target(p, &selected),
                "protocol": p["protocol"].as_str().unwrap_or("TCP")});
            if let Some(n) = p["name"].as_str() {
                out["name"] = json!(n);
            }
            out
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-sim"), "namespace": ns,
            "labels": {"kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                "uid": service["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "endpoints": selected.iter().map(|p| endpoint(p)).collect::<Vec<_>>(),
        "ports": ports})
}

/// Brings the namespace's managed slices in step with its Services and
/// pods; a slice is written only when it changes.
pub(crate) fn sync(st: &mut State, ns: &str) {
    let all = Selector::default();
    let none = Fields::default();
    let services = st.list(&core("services"), Some(ns), &all, &none);
    let pods = st.list(&core("pods"), Some(ns), &all, &none);
    let existing = st.list(&slices(), Some(ns), &all, &none);
    let ours =
        |s: &Value| s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == MANAGED_BY;
    let selects = |s: &Value| {
        s["spec"]["selector"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
    };
    let mut keep = Vec::new();
    for svc in services.iter().filter(|s| selects(s)) {
        let want = desired(svc, &pods);
        let name = want["metadata"]["name"].as_str().unwrap_or("").to_string();
        keep.push(name.clone());
        let same = st.get(&slices(), ns, &name).is_some_and(|have| {
            have["endpoints"] == want["endpoints"] && have["ports"] == want["ports"]
        });
        if !same {
            st.store(&slices(), want);
        }
    }
    let stale: Vec<String> = existing
        .iter()
        .filter(|s| ours(s))
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| !keep.contains(n))
        .collect();
    for name in stale {
        st.remove(&slices(), ns, &name);
    }
}
