//! The custom metrics API end to end: `kubectl get --raw` over TLS, a real
//! Prometheus holding per-pod and per-Service series, and the in-memory
//! Kubernetes API for the pod lists, the authentication ConfigMap and the
//! SubjectAccessReviews. An HPA's `type: Pods` and `type: Object` reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock, RwLockReadGuard};

use gpuscale_e2e::adapter::client::{Adapter, Identity, assert_status, kubectl_raw};
use gpuscale_e2e::adapter::fleet::{CHAT_0, CHAT_1};
use gpuscale_e2e::adapter::procs;
use gpuscale_e2e::adapter::prom;
use gpuscale_e2e::adapter::world::{HPA_USER, Pki, rbac};
use gpuscale_e2e::kubeapi::{KubeFake, core};
use gpuscale_e2e::write_file as write;
use serde_json::{Value, json};

const CHAT: &str = "app.kubernetes.io/name=chat";

struct World {
    kube: KubeFake,
    adapter: Adapter,
    /// alice may read every namespace but `secret`.
    alice: PathBuf,
    alice_id: Identity,
    proxy: Identity,
}

fn pod(ns: &str, name: &str, app: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": app, "pod-template-hash": "7d9f8b6c5"}},
        "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai"}]},
        "status": {"phase": phase},
    })
}

/// The metrics served: the presets (per-pod queue depth, KV cache, GPU
/// pressure), a Service metric and a namespace metric.
const CONFIG: &str = "presets: all
metrics:
  - name: gateway_pending
    objects:
      services: sum by (namespace, service) (gateway_requests_pending{${matchers}})
  - name: namespace_queue
    objects:
      namespaces: sum by (namespace) (vllm:num_requests_waiting{${matchers}})
";

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let pki = Pki::new("gpuscale-custom-e2e-");
        let kube = KubeFake::start(pki.cluster(BTreeMap::new(), rbac(&[])));
        add_pods(&kube);
        let adapter = pki.adapter("adapter", &kube, CONFIG, &[], true);
        let alice_id = pki.identity("alice", &pki.clients.client("alice", &["team-inference"]));
        World {
            alice: pki.kubeconfig("alice", &adapter, &alice_id),
            proxy: pki.identity("proxy", &pki.front.client("front-proxy-client", &[])),
            alice_id,
            adapter,
            kube,
        }
    })
}

/// The pods the HPAs' selectors find.
fn add_pods(kube: &KubeFake) {
    for (ns, name, app, phase) in [
        ("inference", CHAT_0, "chat", "Running"),
        ("inference", CHAT_1, "chat", "Running"),
        // Just started: no series yet.
        ("inference", "chat-2", "chat", "Pending"),
        // Finished pods no longer serve.
        ("inference", "chat-old", "chat", "Succeeded"),
        ("inference", "embed-0", "embed", "Running"),
        // Has a series only under the same pod name in `other`.
        ("inference", "ghost-0", "ghost", "Running"),
        ("other", CHAT_0, "chat", "Running"),
        ("secret", CHAT_0, "chat", "Running"),
    ] {
        kube.put(&core("pods"), pod(ns, name, app, phase));
    }
}

fn pods_path(
    version: &str,
    ns: &str,
    metric: &str,
    selector: &str,
    metric_selector: &str,
) -> String {
    let mut p = format!(
        "/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/pods/*/{metric}?labelSelector={}",
        prom::encode(selector)
    );
    if !metric_selector.is_empty() {
        p.push_str(&format!(
            "&metricLabelSelector={}",
            prom::encode(metric_selector)
        ));
    }
    p
}

/// `pod_lists_are_cached_and_follow_the_cluster` takes a chat pod away for a
/// while (write); the stories that count the chat pods read meanwhile.
static CHAT_PODS: RwLock<()> = RwLock::new(());

fn chat_pods_in_place() -> RwLockReadGuard<'static, ()> {
    CHAT_PODS.read().unwrap_or_else(|e| e.into_inner())
}

/// GET as alice with kubectl, every chat pod in place; the MetricValueList.
fn list(path: &str) -> Value {
    let _in_place = chat_pods_in_place();
    let w = world();
    let out = kubectl_raw(&w.alice, path);
    assert!(
        out.ok,
        "kubectl failed for {path}: {out:?}\nadapter log:\n{}",
        w.adapter.guard.log_tail(40)
    );
    let v = out.json();
    assert_eq!(v["kind"], "MetricValueList", "{v}");
    v
}

/// (object name, value) of each item.
fn values(v: &Value) -> Vec<(String, String)> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["describedObject"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                i["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn per_pod_values_for_the_scale_targets_pod_selector() {
    let v = list(&pods_path(
        "v1beta2",
        "inference",
        "vllm_queue_depth",
        CHAT,
        "",
    ));
    assert_eq!(v["apiVersion"], "custom.metrics.k8s.io/v1beta2");
    // chat-2 has no series yet and is left out; chat-old has finished.
    assert_eq!(values(&v), pairs(&[(CHAT_0, "3"), (CHAT_1, "4")]));
    let item = &v["items"][0];
    assert_eq!(
        item["describedObject"],
        json!({"kind": "Pod", "namespace": "inference", "name": CHAT_0, "apiVersion": "v1"})
    );
    assert_eq!(item["metric"], json!({"name": "vllm_queue_depth"}));
    assert_eq!(item["windowSeconds"], 60);
    let ts = item["timestamp"].as_str().expect("timestamp");
    assert!(ts.len() == 20 && ts.ends_with('Z'), "{ts}");
    for (metric, want) in [
        ("vllm_kv_cache_usage", [(CHAT_0, "500m"), (CHAT_1, "700m")]),
        // The per-pod maxima the external gpu_pressure averages to 825m.
        ("gpu_pressure", [(CHAT_0, "900m"), (CHAT_1, "750m")]),
    ] {
        let v = list(&pods_path("v1beta2", "inference", metric, CHAT, ""));
        assert_eq!(values(&v), pairs(&want), "{metric}");
    }
}

#[test]
fn v1beta1_and_v1beta2_give_the_same_values() {
    let b2 = list(&pods_path(
        "v1beta2",
        "inference",
        "vllm_queue_depth",
        CHAT,
        "model_name=llama-3-8b",
    ));
    let b1 = list(&pods_path(
        "v1beta1",
        "inference",
        "vllm_queue_depth",
        CHAT,
        "model_name=llama-3-8b",
    ));
    assert_eq!(b1["apiVersion"], "custom.metrics.k8s.io/v1beta1");
    assert_eq!(values(&b1), values(&b2));
    assert_eq!(values(&b1), pairs(&[(CHAT_0, "3"), (CHAT_1, "4")]));
    assert_eq!(b1["items"][0]["metricName"], "vllm_queue_depth");
    assert_eq!(b1["items"][0]["window"], 60);
    // The metric selector is echoed as a LabelSelector.
    let sel = json!({"matchLabels": {"model_name": "llama-3-8b"}});
    assert_eq!(b1["items"][0]["selector"], sel);
    assert_eq!(b2["items"][0]["metric"]["selector"], sel);
}

#[test]
fn one_pod_a_service_and_the_namespace_by_name() {
    let v = list(&format!(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/pods/{CHAT_1}/vllm_queue_depth"
    ));
    assert_eq!(values(&v), pairs(&[(CHAT_1, "4")]));
    let v = list(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/services/gateway/gateway_pending",
    );
    assert_eq!(values(&v), pairs(&[("gateway", "12")]));
    assert_eq!(v["items"][0]["describedObject"]["kind"], "Service");
    // chat 3 + 4, embed 10 and the CPU-only chat-cpu-0's 1000: a namespace
    // object is every series in it.
    let v =
        list("/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/metrics/namespace_queue");
    assert_eq!(values(&v), pairs(&[("inference", "1017")]));
    assert_eq!(v["items"][0]["describedObject"]["kind"], "Namespace");
    // A metric not served for that kind.
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/services/gateway/vllm_queue_depth",
        &[],
    );
    assert_status(code, &body, 404, "NotFound");
}

#[test]
fn all_pods_missing_is_an_error_never_zeros() {
    for selector in [
        "app.kubernetes.io/name=ghost",
        "app.kubernetes.io/name=nobody",
    ] {
        let (code, body) = world().adapter.curl_as(
            &world().alice_id,
            &pods_path("v1beta2", "inference", "vllm_queue_depth", selector, ""),
            &[],
        );
        assert_status(code, &body, 503, "ServiceUnavailable");
    }
    // A metric selector that no series matches.
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &pods_path(
            "v1beta2",
            "inference",
            "vllm_queue_depth",
            CHAT,
            "model_name=other",
        ),
        &[],
    );
    assert_status(code, &body, 503, "ServiceUnavailable");
}

#[test]
fn a_pod_of_another_namespace_never_appears() {
    let v = list(&pods_path("v1beta2", "other", "vllm_queue_depth", CHAT, ""));
    assert_eq!(values(&v), pairs(&[(CHAT_0, "100")]));
    assert_eq!(v["items"][0]["describedObject"]["namespace"], "other");
    let v = list(&pods_path(
        "v1beta2",
        "inference",
        "vllm_queue_depth",
        "app.kubernetes.io/name in (chat,embed)",
        "",
    ));
    assert_eq!(
        values(&v),
        pairs(&[(CHAT_0, "3"), (CHAT_1, "4"), ("embed-0", "10")])
    );
}

#[test]
fn selector_abuse_is_400() {
    let w = world();
    for selector in [
        r#"app="chat"}) or vector(1) #"#,
        "app>1",
        "app in (",
        "app=chat\\",
    ] {
        let (code, body) = w.adapter.curl_as(
            &w.alice_id,
            &pods_path("v1beta2", "inference", "vllm_queue_depth", selector, ""),
            &[],
        );
        assert_status(code, &body, 400, "BadRequest");
    }
    for metric_selector in [
        "namespace=other",
        "__name__=up",
        r#"model_name="m"}"#,
        "pod=~.*",
        "app.kubernetes.io/name=chat",
    ] {
        let (code, body) = w.adapter.curl_as(
            &w.alice_id,
            &pods_path(
                "v1beta2",
                "inference",
                "vllm_queue_depth",
                CHAT,
                metric_selector,
            ),
            &[],
        );
        assert_status(code, &body, 400, "BadRequest");
    }
    for path in [
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/services/gate%22way/gateway_pending",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/Inference%22%7D/pods/*/vllm_queue_depth",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/services/*/gateway_pending",
    ] {
        let (code, body) = w.adapter.curl_as(&w.alice_id, path, &[]);
        assert_status(code, &body, 400, "BadRequest");
    }
}

#[test]
fn a_denied_subject_access_review_is_403_and_names_kind_and_metric() {
    let w = world();
    let out = kubectl_raw(
        &w.alice,
        &pods_path("v1beta2", "secret", "vllm_queue_depth", CHAT, ""),
    );
    assert!(!out.ok && out.stderr.contains("Forbidden"), "{out:?}");
    let (code, body) = w.adapter.curl_as(
        &w.proxy,
        &pods_path("v1beta2", "inference", "gpu_pressure", CHAT, ""),
        &[&format!("X-Remote-User: {HPA_USER}")],
    );
    assert_eq!(code, 200, "{body}");
    let reviews = w.kube.access_reviews();
    let sar = reviews
        .iter()
        .find(|s| {
            s["user"] == HPA_USER && s["resourceAttributes"]["resource"] == "pods/gpu_pressure"
        })
        .expect("a SubjectAccessReview for the HPA");
    assert_eq!(sar["resourceAttributes"]["group"], "custom.metrics.k8s.io");
    assert_eq!(sar["resourceAttributes"]["version"], "v1beta2");
    assert_eq!(sar["resourceAttributes"]["namespace"], "inference");
    assert_eq!(sar["resourceAttributes"]["verb"], "list");
}

#[test]
fn discovery_lists_what_the_config_serves() {
    for version in ["v1beta1", "v1beta2"] {
        let v = list_any(&format!("/apis/custom.metrics.k8s.io/{version}"));
        assert_eq!(v["kind"], "APIResourceList");
        let names: Vec<&str> = v["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "pods/gpu_pressure",
                "pods/vllm_kv_cache_usage",
                "pods/vllm_queue_depth",
                "services/gateway_pending",
                "namespaces/namespace_queue"
            ],
            "{v}"
        );
        assert_eq!(v["resources"][0]["kind"], "MetricValueList");
    }
    let g = list_any("/apis/custom.metrics.k8s.io");
    assert_eq!(g["preferredVersion"]["version"], "v1beta2");
    let groups = list_any("/apis");
    assert!(
        groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .any(|g| g["name"] == "custom.metrics.k8s.io"),
        "{groups}"
    );
    // A custom-only metric is not offered on the external API.
    let ext = list_any("/apis/external.metrics.k8s.io/v1beta1").to_string();
    assert!(
        !ext.contains("gateway_pending") && ext.contains("vllm_queue_depth"),
        "{ext}"
    );
}

fn list_any(path: &str) -> Value {
    let out = kubectl_raw(&world().alice, path);
    assert!(out.ok, "{out:?}");
    out.json()
}

#[test]
fn pod_lists_are_cached_and_follow_the_cluster() {
    let w = world();
    let selector = "app.kubernetes.io/name=chat,pod-template-hash=7d9f8b6c5";
    let path = pods_path("v1beta2", "inference", "vllm_queue_depth", selector, "");
    let lists = || {
        w.kube
            .requests()
            .iter()
            .filter(|r| {
                r.starts_with("GET /api/v1/namespaces/inference/pods?")
                    && r.contains("pod-template-hash")
            })
            .count()
    };
    w.adapter.curl_as(&w.alice_id, &path, &[]);
    let before = lists();
    for _ in 0..10 {
        let (code, body) = w.adapter.curl_as(&w.alice_id, &path, &[]);
        assert_eq!(code, 200, "{body}");
    }
    // Ten HPA reads, and at most the background refreshes of the time they took.
    assert!(
        lists() - before < 10,
        "pod list per request: {} lists",
        lists() - before
    );
    // A pod that goes away leaves the answer once the list is refreshed.
    let _alone = CHAT_PODS.write().unwrap_or_else(|e| e.into_inner());
    w.kube
        .put(&core("pods"), pod("inference", CHAT_1, "chat", "Succeeded"));
    procs::eventually("the second chat pod to leave the answer", || {
        let (_, body) = w.adapter.curl_as(&w.alice_id, &path, &[]);
        (values(&body) == pairs(&[(CHAT_0, "3")])).then_some(())
    });
    w.kube
        .put(&core("pods"), pod("inference", CHAT_1, "chat", "Running"));
    procs::eventually("the second chat pod to come back", || {
        let (_, body) = w.adapter.curl_as(&w.alice_id, &path, &[]);
        (values(&body).len() == 2).then_some(())
    });
}

/// docs/adapter.md works the `type: Pods` arithmetic through with these values.
#[test]
fn pods_hpa_arithmetic_worked_example() {
    let v = list(&pods_path(
        "v1beta2",
        "inference",
        "vllm_queue_depth",
        CHAT,
        "",
    ));
    let got: Vec<f64> = values(&v)
        .iter()
        .map(|(_, x)| x.parse().expect("whole number"))
        .collect();
    assert_eq!(got, [3.0, 4.0]);
    let (sum, with_values, pods) = (7.0_f64, 2.0, 3.0);
    // Target 2: 1.75 → scale-up, the missing pod counts as 0 → ⌈7/3/2 × 3⌉ = 4.
    assert!(sum / with_values / 2.0 > 1.1);
    assert_eq!((sum / pods / 2.0 * pods).ceil(), 4.0);
    // Target 5: 0.7 → scale-down, the missing pod counts as at target → ⌈12/3/5 × 3⌉ = 3.
    assert!(sum / with_values / 5.0 < 0.9);
    assert_eq!(((sum + 5.0) / pods / 5.0 * pods).ceil(), 3.0);
}

#[test]
fn self_metrics_count_requests_by_api() {
    let w = world();
    list(&pods_path(
        "v1beta2",
        "inference",
        "vllm_queue_depth",
        CHAT,
        "",
    ));
    let text = w.adapter.self_metrics();
    assert!(
        text.contains(
            r#"gpuscale_adapter_requests_total{api="custom",metric="vllm_queue_depth",code="200"}"#
        ),
        "{text}"
    );
}

#[test]
fn prometheus_down_is_an_error_for_cold_and_warm_keys() {
    let w = world();
    let dir = tempfile::tempdir().expect("tempdir");
    let own = prom::Prometheus::start_fleet(prom::start_target());
    own.wait_for_data();
    let kc = write(dir.path(), "kubeconfig", &w.kube.kubeconfig());
    let config = write(
        dir.path(),
        "metrics.yaml",
        "metrics:\n  - name: queue\n    freshness: 1s\n    objects:\n      pods: sum by (namespace, pod) (vllm:num_requests_waiting{${matchers}})\n",
    );
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--kubeconfig={}", kc.display()),
            format!("--config={}", config.display()),
            format!("--prometheus-url={}", own.url),
            "--poll-interval=1s".into(),
        ],
        dir.path().join("adapter.log"),
    );
    let get = |selector: &str| {
        let path = pods_path("v1beta2", "inference", "queue", selector, "");
        adapter.curl_as(&Identity::default(), &path, &[])
    };
    let (code, warm) = {
        let _in_place = chat_pods_in_place();
        get(CHAT)
    };
    assert_eq!(code, 200, "{warm}\n{}", adapter.guard.log_text());
    assert_eq!(values(&warm), pairs(&[(CHAT_0, "3"), (CHAT_1, "4")]));
    drop(own);
    let (code, body) = get("app.kubernetes.io/name=embed");
    assert_status(code, &body, 503, "ServiceUnavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable"),
        "{body}"
    );
    procs::eventually(
        "the warm key to turn into an error past its freshness",
        || {
            let (code, body) = get(CHAT);
            (code == 503 && body["kind"] == "Status").then_some(())
        },
    );
}

#[test]
fn the_apiservices_rbac_and_hpa_examples_are_valid_manifests() {
    let root = gpuscale_e2e::bins::repo_root().join("deploy");
    let files: Vec<PathBuf> = [
        "adapter/apiservice.yaml",
        "adapter/rbac.yaml",
        "examples/hpa-pods.yaml",
        "examples/hpa-object.yaml",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    gpuscale_e2e::python::validate_manifests(&files).unwrap_or_else(|e| panic!("{e}"));
    let apiservices =
        std::fs::read_to_string(root.join("adapter/apiservice.yaml")).expect("apiservice.yaml");
    for name in [
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
    ] {
        assert!(
            apiservices.contains(&format!("name: {name}")),
            "{name} missing"
        );
    }
    // The examples ask for metrics this test's configuration serves.
    let pods = std::fs::read_to_string(root.join("examples/hpa-pods.yaml")).expect("hpa-pods.yaml");
    assert!(pods.contains("name: vllm_queue_depth") && pods.contains("type: Pods"));
    let object =
        std::fs::read_to_string(root.join("examples/hpa-object.yaml")).expect("hpa-object.yaml");
    assert!(object.contains("name: gateway_pending") && CONFIG.contains("name: gateway_pending"));
}
