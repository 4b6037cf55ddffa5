//! What the scale-to-zero stories share: the fake cluster, the scraped
//! series, the adapter with `--scale-to-zero`, and reads of what it did.

#![allow(dead_code)] // each story file uses its own share

use std::path::PathBuf;
use std::sync::Arc;

use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake};
use serde_json::{Value, json};

pub const NS: &str = "inference";

pub fn gvr(g: &str, v: &str, r: &str) -> Gvr {
    (g.into(), v.into(), r.into())
}

pub fn deployments() -> Gvr {
    gvr("apps", "v1", "deployments")
}

pub fn policies() -> Gvr {
    gvr("gpuscale.dev", "v1alpha1", "scaletozeropolicies")
}

/// What the scraped series say: queue depth of two model servers' pods,
/// pending requests at three gateways.
#[derive(Clone, Copy, Default)]
pub struct Load {
    pub chat_queue: u32,
    pub bursty_queue: u32,
    pub chat_pending: u32,
    pub cold_pending: u32,
}

/// `load` as a PodMonitor scrape of the servers and gateways gives it.
pub fn exposition(load: Load) -> String {
    let queue = |pod: &str, n: u32| {
        format!(
            "vllm:num_requests_waiting{{namespace=\"{NS}\",pod=\"{pod}\",container=\"server\",model_name=\"m\"}} {n}\n"
        )
    };
    let pending = |service: &str, n: u32| {
        format!("gateway_requests_pending{{namespace=\"{NS}\",service=\"{service}\"}} {n}\n")
    };
    [
        "# TYPE vllm:num_requests_waiting gauge\n".to_string(),
        queue("chat-0", load.chat_queue),
        queue("bursty-0", load.bursty_queue),
        "# TYPE gateway_requests_pending gauge\n".to_string(),
        pending("chat-gw", load.chat_pending),
        pending("cold-gw", load.cold_pending),
        pending("other-gw", 0),
    ]
    .concat()
}

pub const CONFIG: &str = "metrics:\n  - name: queue_depth\n    query: sum(vllm:num_requests_waiting{${matchers}})\n  - name: gateway_pending\n    query: sum(gateway_requests_pending{${matchers}})\n";

pub fn deployment(name: &str, replicas: i64, ready: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": ready}})
}

pub fn policy(name: &str, kind: &str, target: &str, gateway: &str, extra: Value) -> Value {
    let api = if kind == "Job" { "batch/v1" } else { "apps/v1" };
    let mut spec = json!({
        "target": {"apiVersion": api, "kind": kind, "name": target},
        "idle": {"metric": "queue_depth", "labelSelector": "pod=chat-0", "threshold": 0, "for": "3s"},
        "activation": {"metric": "gateway_pending", "labelSelector": format!("service={gateway}"), "threshold": 0},
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "gpuscale.dev/v1alpha1", "kind": "ScaleToZeroPolicy",
        "metadata": {"name": name, "namespace": NS, "generation": 1}, "spec": spec})
}

pub fn fake() -> KubeFake {
    KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    })
}

pub fn dir() -> PathBuf {
    tempfile::Builder::new()
        .prefix("gpuscale-stz-")
        .tempdir()
        .expect("tempdir")
        .keep()
}

/// The adapter with `--scale-to-zero` and short intervals, plus `extra` flags.
pub fn controller(
    kube: &KubeFake,
    prom_url: &str,
    identity: &str,
    dir: &std::path::Path,
    extra: &[&str],
) -> Adapter {
    let kc = dir.join(format!("kubeconfig-{identity}"));
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let cfg = dir.join("metrics.yaml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--dev".into(),
        format!("--kubeconfig={}", kc.display()),
        format!("--config={}", cfg.display()),
        format!("--prometheus-url={prom_url}"),
        "--poll-interval=1s".into(),
        "--scale-to-zero".into(),
        "--scale-to-zero-lease-namespace=gpuscale".into(),
        format!("--scale-to-zero-identity={identity}"),
        "--scale-to-zero-lease-duration=3s".into(),
        "--scale-to-zero-lease-renew-deadline=2s".into(),
        "--scale-to-zero-lease-retry-period=500ms".into(),
        "--scale-to-zero-wake-interval=1s".into(),
        "--scale-to-zero-check-interval=1s".into(),
    ]);
    Adapter::start(&args, dir.join(format!("adapter-{identity}.log")))
}

pub fn replicas(kube: &KubeFake, name: &str) -> i64 {
    kube.get(&deployments(), NS, name)
        .and_then(|d| d["spec"]["replicas"].as_i64())
        .unwrap_or(-1)
}

pub fn status(kube: &KubeFake, name: &str) -> Value {
    kube.get(&policies(), NS, name)
        .map(|p| p["status"].clone())
        .unwrap_or(Value::Null)
}

pub fn reason(kube: &KubeFake, name: &str) -> String {
    status(kube, name)["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `kubectl ARGS` against `kube`; its stdout. Fails the test when kubectl does.
pub fn kubectl(kube: &KubeFake, dir: &std::path::Path, args: &[&str]) -> String {
    let kc = dir.join("kubeconfig-kubectl");
    std::fs::write(&kc, kube.kubeconfig()).expect("kubeconfig");
    let out = std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kc.display()))
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether the adapter says it holds the Lease (a sample line, not HELP).
pub fn leads(adapter: &Adapter) -> bool {
    adapter
        .self_metrics()
        .lines()
        .any(|l| l == "gpuscale_scale_to_zero_leader 1")
}

pub fn events(kube: &KubeFake) -> Vec<(String, String)> {
    kube.list(&gvr("events.k8s.io", "v1", "events"), NS)
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["note"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The self-metric sample of `family` for target `target`, if present.
pub fn sample(adapter: &Adapter, family: &str, target: &str) -> Option<String> {
    let prefix = format!("{family}{{namespace=\"{NS}\",target=\"{target}\"}} ");
    adapter
        .self_metrics()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
}
