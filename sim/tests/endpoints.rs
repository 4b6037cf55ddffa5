//! The simulated cluster keeps a Service's EndpointSlice as the
//! endpointslice controller does: its selector's pods with an IP, ready by
//! their Ready condition, the named target port resolved, updated as pods
//! change and gone with the Service.

use gpuscale_sim::kubeapi::{Cluster, Gvr, KubeFake};
use serde_json::{Value, json};

fn gvr(g: &str, v: &str, r: &str) -> Gvr {
    (g.into(), v.into(), r.into())
}

fn pod(name: &str, app: &str, ip: Option<&str>, ready: bool) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": app}},
        "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "server", "image": "vllm",
            "ports": [{"name": "http", "containerPort": 8000}]}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    if let Some(ip) = ip {
        p["status"]["podIP"] = json!(ip);
    }
    p
}

fn slice(kube: &KubeFake) -> Option<Value> {
    kube.get(
        &gvr("discovery.k8s.io", "v1", "endpointslices"),
        "ml",
        "chat-sim",
    )
}

fn ready_ips(s: &Value) -> Vec<(String, bool)> {
    s["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["addresses"][0].as_str().unwrap_or("").to_string(),
                e["conditions"]["ready"] == true,
            )
        })
        .collect()
}

#[test]
fn a_services_slice_follows_its_ready_pods() {
    let kube = KubeFake::start_bare(Cluster::default()).expect("start");
    let pods = gvr("", "v1", "pods");
    kube.put(&pods, pod("chat-0", "chat", Some("10.0.0.10"), true));
    kube.put(&pods, pod("chat-1", "chat", Some("10.0.0.11"), false));
    kube.put(&pods, pod("chat-2", "chat", None, false));
    kube.put(&pods, pod("embed-0", "embed", Some("10.0.0.20"), true));
    kube.put(
        &gvr("", "v1", "services"),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "chat", "namespace": "ml"},
            "spec": {"selector": {"app": "chat"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    let s = slice(&kube).expect("the Service's slice");
    assert_eq!(
        s["metadata"]["labels"]["kubernetes.io/service-name"],
        "chat"
    );
    assert_eq!(
        s["ports"],
        json!([{"name": "http", "port": 8000, "protocol": "TCP"}])
    );
    assert_eq!(
        ready_ips(&s),
        [
            ("10.0.0.10".to_string(), true),
            ("10.0.0.11".to_string(), false)
        ],
        "pods with an IP, by readiness: {s}"
    );
    assert_eq!(s["endpoints"][0]["targetRef"]["name"], "chat-0");
    assert_eq!(s["endpoints"][0]["nodeName"], "gpu-node-1");

    kube.put(&pods, pod("chat-1", "chat", Some("10.0.0.11"), true));
    let s = slice(&kube).expect("slice");
    assert!(ready_ips(&s).iter().all(|(_, r)| *r), "{s}");
    kube.delete(&pods, "ml", "chat-0");
    assert_eq!(
        ready_ips(&slice(&kube).expect("slice")),
        [("10.0.0.11".to_string(), true)]
    );

    // A slice of another manager for the Service stands beside its own.
    let by_hand = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "chat-local", "namespace": "ml",
            "labels": {"kubernetes.io/service-name": "chat"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 18000, "protocol": "TCP"}]});
    let slices = gvr("discovery.k8s.io", "v1", "endpointslices");
    kube.put(&slices, by_hand);
    assert_eq!(
        ready_ips(&slice(&kube).expect("its own slice")),
        [("10.0.0.11".to_string(), true)]
    );
    assert!(kube.get(&slices, "ml", "chat-local").is_some());

    // A pod that ended leaves the slice, its IP kept.
    let mut done = pod("chat-1", "chat", Some("10.0.0.11"), false);
    done["status"]["phase"] = json!("Succeeded");
    kube.put(&pods, done);
    assert_eq!(ready_ips(&slice(&kube).expect("slice")), []);

    kube.delete(&gvr("", "v1", "services"), "ml", "chat");
    assert!(slice(&kube).is_none(), "the slice goes with its Service");
}
