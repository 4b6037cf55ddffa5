//! The adapter end to end: a real Prometheus holding known series, the real
//! `kubectl` (and `curl` for front-proxy headers) as clients over TLS, and a
//! Kubernetes API fake for the authentication ConfigMap, TokenReview and
//! SubjectAccessReview. One Prometheus and one adapter serve every story.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpuscale_e2e::adapter::client::{self, Adapter, Identity, assert_status, kubectl_raw};
use gpuscale_e2e::adapter::kubefake::KubeFake;
use gpuscale_e2e::adapter::pki::Ca;
use gpuscale_e2e::adapter::procs;
use gpuscale_e2e::adapter::prom;
use gpuscale_e2e::adapter::world::{HPA_USER, Pki, rbac};
use gpuscale_e2e::write_file as write;
use serde_json::Value;

/// Everything the stories read with a metric: the adapter's own queue
/// metrics on top of the presets.
const CONFIG: &str = "presets: all\nmetrics:\n  - name: jobs_waiting\n    query: sum(batch_jobs_waiting{${matchers}})\n    empty: zero\n  - name: chat_requests_waiting\n    query: sum(gateway_requests_waiting{${matchers}})\n    empty: zero\n";

struct World {
    pki: Pki,
    kube: KubeFake,
    adapter: Adapter,
    /// The same adapter reading pod metadata from kube-state-metrics, and
    /// alice's kubeconfig for it.
    ksm: Adapter,
    ksm_alice: PathBuf,
    /// alice: client-CA certificate, may read every namespace but `secret`.
    alice: PathBuf,
    alice_id: Identity,
    /// The aggregator's front-proxy certificate (CN front-proxy-client).
    proxy: Identity,
    /// Signed by the front-proxy CA, but its CN is not allowed.
    mallory: Identity,
    /// Signed by a CA nobody trusts.
    stranger: PathBuf,
    anonymous: PathBuf,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let pki = Pki::new("gpuscale-adapter-e2e-");
        let tokens = BTreeMap::from([(
            "dashboards-token".to_string(),
            ("dashboards".to_string(), vec!["viewers".to_string()]),
        )]);
        let kube = KubeFake::start(pki.cluster(tokens, rbac(&["dashboards"])));
        let adapter = pki.adapter("adapter", &kube, CONFIG, &[], true);
        let ksm_config = "pod_metadata: kube-state-metrics\npresets: all\n";
        let ksm = pki.adapter("ksm", &kube, ksm_config, &[], false);
        let alice_id = pki.identity("alice", &pki.clients.client("alice", &["team-inference"]));
        let stranger = pki.identity("stranger", &Ca::new("rogue-ca").client("alice", &[]));
        let nobody = Identity {
            basic: Some(("nobody".into(), "guess".into())),
            ..Identity::default()
        };
        World {
            alice: pki.kubeconfig("alice", &adapter, &alice_id),
            ksm_alice: pki.kubeconfig("ksm-alice", &ksm, &alice_id),
            stranger: pki.kubeconfig("stranger", &adapter, &stranger),
            anonymous: pki.kubeconfig("anonymous", &adapter, &nobody),
            proxy: pki.identity("proxy", &pki.front.client("front-proxy-client", &[])),
            mallory: pki.identity("mallory", &pki.front.client("mallory", &[])),
            pki,
            kube,
            adapter,
            ksm,
            alice_id,
        }
    })
}

fn value_path(ns: &str, metric: &str, selector: &str) -> String {
    let base = format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}");
    if selector.is_empty() {
        base
    } else {
        format!("{base}?labelSelector={}", prom::encode(selector))
    }
}

/// Read a metric as alice with kubectl; the single item's value.
fn read(ns: &str, metric: &str, selector: &str) -> String {
    read_from(Source::Exporter, ns, metric, selector)
}

/// Where the adapter reads pod metadata.
#[derive(Clone, Copy, Debug)]
enum Source {
    Exporter,
    KubeStateMetrics,
}

fn read_from(source: Source, ns: &str, metric: &str, selector: &str) -> String {
    let w = world();
    let (kubeconfig, adapter) = match source {
        Source::Exporter => (&w.alice, &w.adapter),
        Source::KubeStateMetrics => (&w.ksm_alice, &w.ksm),
    };
    let out = kubectl_raw(kubeconfig, &value_path(ns, metric, selector));
    assert!(
        out.ok,
        "kubectl failed for {metric}{{{selector}}} in {ns} ({source:?}): {out:?}\nadapter log:\n{}",
        adapter.guard.log_text()
    );
    let v = out.json();
    assert_eq!(v["kind"], "ExternalMetricValueList");
    assert_eq!(v["apiVersion"], "external.metrics.k8s.io/v1beta1");
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{v}");
    items[0]["value"].as_str().expect("value").to_string()
}

/// curl as the aggregator would: front-proxy certificate plus headers.
fn via_aggregator(path: &str, user: &str, groups: &[&str]) -> (u16, Value) {
    let w = world();
    let mut headers = vec![format!("X-Remote-User: {user}")];
    headers.extend(groups.iter().map(|g| format!("X-Remote-Group: {g}")));
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    w.adapter.curl_as(&w.proxy, path, &headers)
}

/// The inference servers' series carry only their own labels and what
/// discovery adds (`namespace`, `pod`, `container`, …): selecting by
/// workload, workload kind or an allowlisted pod label goes through the join
/// on pod metadata; a server's own label (`model_name`) is matched on its
/// series. The same answers with either metadata source.
pub(crate) const STORIES: &[(&str, &str, &str)] = &[
    ("vllm_queue_depth", "workload=chat", "7"),
    ("vllm_queue_depth", "label_app_kubernetes_io_name=chat", "7"),
    (
        "vllm_queue_depth",
        "workload=chat,model_name=llama-3-8b",
        "7",
    ),
    (
        "vllm_queue_depth",
        "workload in (chat, embed),container=vllm",
        "17",
    ),
    ("vllm_queue_depth", "model_name=bge-m3", "10"),
    ("vllm_kv_cache_usage", "workload=chat", "600m"),
    (
        "vllm_kv_cache_usage",
        "label_app_kubernetes_io_name=chat",
        "600m",
    ),
    // Running 2 + 0, waiting 3 + 4, no completions in the window.
    ("vllm_request_activity", "workload=chat", "9"),
    ("vllm_kv_cache_usage", "model_name=llama-3-8b", "600m"),
    ("vllm_ttft_p95_seconds", "workload=chat", "750m"),
    (
        "vllm_ttft_p95_seconds",
        "label_app_kubernetes_io_name=chat",
        "750m",
    ),
    ("vllm_ttft_p95_seconds", "model_name=llama-3-8b", "750m"),
    ("vllm_e2e_latency_p95_seconds", "workload=chat", "7500m"),
    (
        "vllm_e2e_latency_p95_seconds",
        "workload_kind=Deployment",
        "7500m",
    ),
    (
        "vllm_e2e_latency_p95_seconds",
        "model_name=llama-3-8b",
        "7500m",
    ),
    ("tgi_queue_size", "workload=tgi", "5"),
    ("tgi_queue_size", "label_app_kubernetes_io_name=tgi", "5"),
    ("tgi_queue_size", "pod=tgi-0", "5"),
    ("triton_queue_time_avg_seconds", "workload=triton", "5m"),
    (
        "triton_queue_time_avg_seconds",
        "label_app_kubernetes_io_name=triton",
        "5m",
    ),
    ("triton_queue_time_avg_seconds", "model=resnet", "5m"),
    ("gpu_pressure", "workload=chat", "825m"),
    ("gpu_pressure", "label_app_kubernetes_io_name=chat", "825m"),
    ("gpu_pressure", "pod in (chat-7d9f8b6c5-a1b2c)", "900m"),
    ("gpu_pressure", "workload=tts", "400m"),
];

#[test]
fn each_preset_returns_the_value_the_data_implies() {
    for (metric, selector, want) in STORIES {
        assert_eq!(
            read("inference", metric, selector),
            *want,
            "{metric}{{{selector}}}"
        );
    }
}

#[test]
fn kube_state_metrics_metadata_gives_the_same_answers() {
    for (metric, selector, want) in STORIES {
        assert_eq!(
            read_from(Source::KubeStateMetrics, "inference", metric, selector),
            *want,
            "{metric}{{{selector}}}"
        );
    }
}

/// chat-cpu-0 serves 1000 waiting requests from a node the exporter does
/// not run on: it has no gpu_pod_info, so the exporter's join never counts
/// it (docs/adapter.md); kube-state-metrics knows every pod.
#[test]
fn a_pod_without_metadata_is_not_counted() {
    assert_eq!(read("inference", "vllm_queue_depth", ""), "17");
    assert_eq!(
        read("inference", "vllm_queue_depth", "workload_kind=StatefulSet"),
        "10"
    );
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("inference", "vllm_queue_depth", "workload=chat-cpu"),
        &[],
    );
    assert_status(code, &body, 503, "ServiceUnavailable");
    let ksm = |selector| {
        read_from(
            Source::KubeStateMetrics,
            "inference",
            "vllm_queue_depth",
            selector,
        )
    };
    assert_eq!(ksm(""), "1017");
    assert_eq!(ksm("workload=chat-cpu"), "1k");
    assert_eq!(ksm("workload_kind=StatefulSet"), "1010");
}

#[test]
fn the_response_has_the_shape_the_hpa_reads() {
    let w = world();
    let out = kubectl_raw(
        &w.alice,
        &value_path("inference", "vllm_queue_depth", "workload=chat"),
    );
    let item = &out.json()["items"][0];
    assert_eq!(item["metricName"], "vllm_queue_depth");
    assert_eq!(item["window"], 60);
    let ts = item["timestamp"].as_str().expect("timestamp");
    assert!(
        ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );
    assert!(item["metricLabels"].is_object());
}

/// An External metric target, as the HPA spec spells it.
enum Target {
    Value(f64),
    AverageValue(f64),
}

/// The HPA's desired replicas for an External metric (Kubernetes'
/// replica calculator): `Value` scales the ready pods by value / target
/// unless within the 0.1 tolerance; `AverageValue` is ⌈value / target⌉,
/// with the same tolerance against the current replicas.
fn hpa_desired(value: f64, target: Target, ready: u32) -> u32 {
    let (ratio, desired) = match target {
        Target::Value(t) => (value / t, (value / t * f64::from(ready)).ceil()),
        Target::AverageValue(t) => (value / (t * f64::from(ready)), (value / t).ceil()),
    };
    if (ratio - 1.0).abs() <= 0.1 {
        return ready;
    }
    desired as u32
}

/// docs/adapter.md works this example through: 7 requests waiting over 2
/// ready pods. The bold figures there are the adapter's value and what the
/// HPA's arithmetic makes of it for each target.
#[test]
fn hpa_arithmetic_worked_example() {
    let v = read("inference", "vllm_queue_depth", "workload=chat");
    let value: f64 = v.parse().expect("a whole number");
    let docs = std::fs::read_to_string(gpuscale_e2e::bins::repo_root().join("docs/adapter.md"))
        .expect("docs/adapter.md");
    let section = docs
        .split("## HPA arithmetic, worked through")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the worked example in docs/adapter.md");
    let bold: Vec<&str> = section.split("**").skip(1).step_by(2).collect();
    let computed = [
        v.clone(),
        hpa_desired(value, Target::Value(5.0), 2).to_string(),
        hpa_desired(value, Target::AverageValue(2.0), 2).to_string(),
    ];
    assert_eq!(bold, computed, "docs/adapter.md's worked example");
    assert_eq!(computed, ["7", "3", "4"]);
}

/// An HPA with `minReplicas: 0` (Kubernetes 1.37+): the namespace has no
/// pods, yet the gateway's queue is served, and an `AverageValue` target
/// gives ceil(value / target) replicas from zero (docs/scale-to-zero.md).
#[test]
fn a_namespace_with_no_pods_gets_its_external_metric_and_wakes_from_zero() {
    let pods = prom::shared()
        .query(r#"count({namespace="idle",pod!=""})"#)
        .expect("query");
    assert_eq!(pods["data"]["result"], serde_json::json!([]), "{pods}");
    let v: f64 = read("idle", "chat_requests_waiting", "service=chat")
        .parse()
        .expect("a whole number");
    assert_eq!(v, 5.0);
    // deploy/examples/vllm-hpa-scale-to-zero.yaml: averageValue "4".
    assert_eq!((v / 4.0).ceil(), 2.0);
    // No request waiting reads 0 (not an error): ceil(0 / 4) = 0 replicas.
    assert_eq!(
        read("inference", "chat_requests_waiting", "service=chat"),
        "0"
    );
}

#[test]
fn the_hpa_reaches_the_adapter_through_the_aggregator() {
    let w = world();
    let (code, body) = via_aggregator(
        &value_path("inference", "vllm_queue_depth", "workload=embed"),
        HPA_USER,
        &["system:serviceaccounts"],
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"][0]["value"], "10");
    let reviews = w.kube.access_reviews();
    let sar = reviews
        .iter()
        .find(|s| {
            s["user"] == HPA_USER && s["resourceAttributes"]["resource"] == "vllm_queue_depth"
        })
        .expect("a SubjectAccessReview for the HPA");
    assert_eq!(
        sar["resourceAttributes"]["group"],
        "external.metrics.k8s.io"
    );
    assert_eq!(sar["resourceAttributes"]["namespace"], "inference");
    assert_eq!(sar["resourceAttributes"]["verb"], "list");
    assert_eq!(sar["groups"][0], "system:serviceaccounts");
}

#[test]
fn discovery_lists_the_configured_metrics() {
    let w = world();
    let out = kubectl_raw(&w.alice, "/apis/external.metrics.k8s.io/v1beta1");
    let v = out.json();
    assert_eq!(v["kind"], "APIResourceList");
    let names: Vec<&str> = v["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for m in [
        "vllm_queue_depth",
        "gpu_pressure",
        "triton_queue_time_avg_seconds",
        "jobs_waiting",
    ] {
        assert!(names.contains(&m), "{m} missing from {names:?}");
    }
    assert_eq!(v["resources"][0]["kind"], "ExternalMetricValueList");
    assert_eq!(v["resources"][0]["namespaced"], true);
    // The aggregator asks for aggregated discovery; plain JSON makes it fall back.
    let (code, body) = via_aggregator("/apis", "system:kube-aggregator", &[]);
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "APIGroupList");
    let (code, body) = w.adapter.curl_as(
        &w.proxy,
        "/apis",
        &[
            "X-Remote-User: system:kube-aggregator",
            "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        ],
    );
    assert_eq!((code, body["kind"].as_str()), (200, Some("APIGroupList")));
    assert_eq!(
        kubectl_raw(&w.alice, "/apis/external.metrics.k8s.io").json()["kind"],
        "APIGroup"
    );
}

#[test]
fn metric_names_match_case_insensitively() {
    let w = world();
    let out = kubectl_raw(
        &w.alice,
        &value_path("inference", "VLLM_Queue_Depth", "workload=chat"),
    );
    assert!(out.ok, "{out:?}");
    assert_eq!(out.json()["items"][0]["metricName"], "vllm_queue_depth");
    assert_eq!(out.json()["items"][0]["value"], "7");
}

#[test]
fn an_unknown_metric_is_404() {
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("inference", "no_such_metric", ""),
        &[],
    );
    assert_status(code, &body, 404, "NotFound");
    let out = kubectl_raw(
        &world().alice,
        &value_path("inference", "no_such_metric", ""),
    );
    assert!(!out.ok && out.stderr.contains("NotFound"), "{out:?}");
}

#[test]
fn an_empty_result_is_an_error_unless_the_metric_says_zero() {
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("empty", "vllm_queue_depth", ""),
        &[],
    );
    assert_status(code, &body, 503, "ServiceUnavailable");
    assert!(
        body["message"].as_str().unwrap_or("").contains("no series"),
        "{body}"
    );
    assert_eq!(read("empty", "jobs_waiting", ""), "0");
}

#[test]
fn nan_and_infinity_are_errors_never_numbers() {
    for workload in ["nan", "inf"] {
        let (code, body) = world().adapter.curl_as(
            &world().alice_id,
            &value_path(
                "broken",
                "vllm_queue_depth",
                &format!("workload={workload}"),
            ),
            &[],
        );
        assert_status(code, &body, 503, "ServiceUnavailable");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or("")
                .contains("NaN or infinite"),
            "{body}"
        );
    }
}

/// `other` runs its own chat Deployment whose pod has the same name as one
/// in `inference`: the join is on (namespace, pod), and a workload of another
/// namespace selects nothing here.
#[test]
fn the_requests_namespace_is_always_enforced() {
    for source in [Source::Exporter, Source::KubeStateMetrics] {
        assert_eq!(
            read_from(source, "inference", "vllm_queue_depth", "workload=chat"),
            "7"
        );
        assert_eq!(
            read_from(source, "other", "vllm_queue_depth", "workload=chat"),
            "100"
        );
    }
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("other", "vllm_queue_depth", "workload=embed"),
        &[],
    );
    assert_status(code, &body, 503, "ServiceUnavailable");
    assert!(
        body["message"].as_str().unwrap_or("").contains("no series"),
        "{body}"
    );
}

#[test]
fn injection_attempts_in_selectors_are_400() {
    for selector in [
        r#"workload="chat"}) or vector(1) #"#,
        "workload=chat}",
        "namespace=other",
        "__name__=up",
        "workload=~.*",
        "workload in (chat) or vector(1)",
        "workload=chat\"",
        "workload=chat\\",
        "workload>1",
        "app.kubernetes.io/name=chat",
    ] {
        let (code, body) = world().adapter.curl_as(
            &world().alice_id,
            &value_path("inference", "vllm_queue_depth", selector),
            &[],
        );
        assert_status(code, &body, 400, "BadRequest");
    }
    // A namespace that is not a DNS label never reaches Prometheus either.
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/Inference%22%7D/vllm_queue_depth",
        &[],
    );
    assert_status(code, &body, 400, "BadRequest");
}

#[test]
fn no_client_certificate_is_401() {
    let w = world();
    // kubectl with neither a client certificate nor a token (only a basic-auth
    // password, which the adapter does not accept).
    let out = kubectl_raw(&w.anonymous, "/apis/external.metrics.k8s.io/v1beta1");
    assert!(!out.ok && out.stderr.contains("Unauthorized"), "{out:?}");
    let (code, body) = w.adapter.curl_as(
        &Identity::default(),
        "/apis/external.metrics.k8s.io/v1beta1",
        &[],
    );
    assert_status(code, &body, 401, "Unauthorized");
    // Health endpoints need no credentials, as in Kubernetes.
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, body) = client::curl(
            &format!("{}{path}", w.adapter.url()),
            Some(&w.pki.serving_ca),
            &Identity::default(),
            &[],
        );
        assert_eq!((code, body.as_str()), (200, "ok"), "{path}");
    }
}

#[test]
fn a_certificate_from_an_unknown_ca_is_401() {
    let out = kubectl_raw(
        &world().stranger,
        &value_path("inference", "vllm_queue_depth", ""),
    );
    assert!(!out.ok && out.stderr.contains("Unauthorized"), "{out:?}");
}

#[test]
fn a_front_proxy_certificate_with_a_name_not_allowed_is_401() {
    let (code, body) = world().adapter.curl_as(
        &world().mallory,
        &value_path("inference", "vllm_queue_depth", ""),
        &[&format!("X-Remote-User: {HPA_USER}")],
    );
    assert_status(code, &body, 401, "Unauthorized");
}

#[test]
fn remote_user_headers_are_ignored_without_a_front_proxy_certificate() {
    // alice's certificate is from the client CA: X-Remote-* must not make her a cluster admin.
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("secret", "vllm_queue_depth", ""),
        &["X-Remote-User: admin", "X-Remote-Group: system:masters"],
    );
    assert_status(code, &body, 403, "Forbidden");
}

#[test]
fn a_denied_subject_access_review_is_403() {
    let out = kubectl_raw(
        &world().alice,
        &value_path("secret", "vllm_queue_depth", ""),
    );
    assert!(!out.ok && out.stderr.contains("Forbidden"), "{out:?}");
    let (code, body) = world().adapter.curl_as(
        &world().alice_id,
        &value_path("secret", "vllm_queue_depth", ""),
        &[],
    );
    assert_status(code, &body, 403, "Forbidden");
}

#[test]
fn bearer_tokens_go_through_token_review() {
    let w = world();
    let good = Identity {
        token: Some("dashboards-token".into()),
        ..Identity::default()
    };
    let kc = w.pki.kubeconfig("dashboards", &w.adapter, &good);
    let out = kubectl_raw(&kc, &value_path("inference", "tgi_queue_size", ""));
    assert!(out.ok, "{out:?}");
    assert_eq!(out.json()["items"][0]["value"], "5");
    let bad = Identity {
        token: Some("stolen".into()),
        ..Identity::default()
    };
    let kc = w.pki.kubeconfig("stolen", &w.adapter, &bad);
    let out = kubectl_raw(&kc, &value_path("inference", "tgi_queue_size", ""));
    assert!(!out.ok && out.stderr.contains("Unauthorized"), "{out:?}");
}

#[test]
fn prometheus_down_is_a_503_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dead = procs::free_port();
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--prometheus-url=http://127.0.0.1:{dead}"),
        ],
        dir.path().join("dev.log"),
    );
    let (code, body) = adapter.curl_as(
        &Identity::default(),
        &value_path("inference", "vllm_queue_depth", ""),
        &[],
    );
    assert_status(code, &body, 503, "ServiceUnavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable"),
        "{body}"
    );
    // --dev says so loudly.
    assert!(
        adapter.guard.log_text().contains("DEV MODE"),
        "{}",
        adapter.guard.log_text()
    );
    assert!(adapter.self_metrics().contains(r#"gpuscale_adapter_prometheus_queries_total{metric="vllm_queue_depth",result="error"} 1"#), "{}", adapter.self_metrics());
}

#[test]
fn self_metrics_count_requests_and_queries() {
    let w = world();
    read("inference", "tgi_queue_size", "workload=tgi");
    let text = w.adapter.self_metrics();
    for needle in [
        r#"gpuscale_adapter_requests_total{api="external",metric="tgi_queue_size",code="200"}"#,
        r#"gpuscale_adapter_request_duration_seconds_bucket{api="external",metric="tgi_queue_size",code="200",le="+Inf"}"#,
        r#"gpuscale_adapter_prometheus_queries_total{metric="tgi_queue_size",result="ok"}"#,
        r#"gpuscale_adapter_prometheus_query_duration_seconds_count{metric="tgi_queue_size"}"#,
        r#"gpuscale_adapter_metric_value{metric="tgi_queue_size",request_namespace="inference",selector="workload=tgi"} 5"#,
        r#"gpuscale_adapter_metric_age_seconds{metric="tgi_queue_size"}"#,
        "gpuscale_adapter_build_info{version=",
        "gpuscale_adapter_up 1",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

/// Two HPAs on `gpu_pressure` in two namespaces: two series, each with its
/// own value, instead of one series alternating between them.
#[test]
fn metric_value_has_one_series_per_namespace_and_selector() {
    let w = world();
    assert_eq!(read("inference", "gpu_pressure", "workload=chat"), "825m");
    assert_eq!(read("other", "gpu_pressure", "workload=chat"), "600m");
    let text = w.adapter.self_metrics();
    for (ns, v) in [("inference", "0.825"), ("other", "0.6")] {
        let line = format!(
            r#"gpuscale_adapter_metric_value{{metric="gpu_pressure",request_namespace="{ns}",selector="workload=chat"}} {v}"#
        );
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
}

/// A selector flood cannot grow the poll cache past `--max-cached-queries`:
/// the key beyond gets a 503 Status (the HPA holds its replicas), the keys
/// already held are still served, and the self-metrics count the refusal.
/// Two keys over a budget of one query per second stretch the poll interval.
#[test]
fn a_full_poll_cache_refuses_new_keys_and_the_budget_stretches_polling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--prometheus-url={}", prom::shared().url),
            "--poll-interval=1s".into(),
            "--max-cached-queries=2".into(),
            "--prometheus-query-budget=1".into(),
        ],
        dir.path().join("cap.log"),
    );
    let get = |selector: &str| {
        let path = value_path("inference", "gpu_pressure", selector);
        adapter.curl_as(&Identity::default(), &path, &[])
    };
    for selector in ["workload=chat", "workload=tts"] {
        let (code, body) = get(selector);
        assert_eq!(code, 200, "{selector}: {body}");
    }
    let (code, body) = get("pod in (chat-7d9f8b6c5-a1b2c)");
    assert_status(code, &body, 503, "ServiceUnavailable");
    let message = body["message"].as_str().unwrap_or("");
    assert!(
        message.contains("poll cache is full (2 keys, --max-cached-queries)"),
        "{body}"
    );
    let (code, body) = get("workload=chat");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"][0]["value"], "825m", "{body}");
    let text = adapter.self_metrics();
    for needle in [
        r#"gpuscale_adapter_cache_refusals_total{metric="gpu_pressure"} 1"#,
        "gpuscale_adapter_cached_queries 2",
        "gpuscale_adapter_max_cached_queries 2",
    ] {
        assert!(
            text.lines().any(|l| l == needle),
            "{needle} missing from:\n{text}"
        );
    }
    // 2 keys at 1 query/s: every 2 s instead of every 1 s.
    procs::eventually("the poll interval to stretch", || {
        adapter
            .self_metrics()
            .lines()
            .any(|l| l == "gpuscale_adapter_poll_interval_seconds 2")
            .then_some(())
    });
}

#[test]
fn a_bad_config_file_is_reported_with_file_and_keys_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        dir.path(),
        "bad.yaml",
        "metrics:\n  - name: a\n    query: up\n    emtpy: zero\n  - name: b\n    query: x{${matchers}}\n    freshness: soon\n",
    );
    let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
        .arg("check-config")
        .arg(format!("--config={}", path.display()))
        .output()
        .expect("run adapter");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for needle in [
        "bad.yaml",
        "metrics[0].query",
        "metrics[0].emtpy",
        "metrics[1].freshness",
    ] {
        assert!(err.contains(needle), "{needle} missing from:\n{err}");
    }
}

#[test]
fn the_deployed_config_and_flags_are_accepted() {
    let root = gpuscale_e2e::bins::repo_root().join("deploy/adapter");
    let cm: Value = yaml_serde::from_str(
        &std::fs::read_to_string(root.join("configmap.yaml")).expect("configmap.yaml"),
    )
    .expect("ConfigMap YAML");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "metrics.yaml",
        cm["data"]["metrics.yaml"]
            .as_str()
            .expect("metrics.yaml key"),
    );
    let deploy: Value = yaml_serde::from_str(
        &std::fs::read_to_string(root.join("deployment.yaml")).expect("deployment.yaml"),
    )
    .expect("Deployment YAML");
    let args: Vec<String> = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .map(|a| {
            if a.starts_with("--config=") {
                format!("--config={}", config.display())
            } else if a == "serve" {
                // The same flags, checked instead of served.
                "check-config".to_string()
            } else {
                // The kubelet expands $(PROMETHEUS_URL) from the ConfigMap.
                a.replace(
                    "$(PROMETHEUS_URL)",
                    cm["data"]["prometheus-url"]
                        .as_str()
                        .expect("prometheus-url key"),
                )
            }
        })
        .collect();
    assert_eq!(
        args.first().map(String::as_str),
        Some("check-config"),
        "serve first: {args:?}"
    );
    let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
        .args(&args)
        .output()
        .expect("run adapter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = String::from_utf8_lossy(&out.stdout);
    assert!(
        served.contains("vllm_queue_depth") && served.contains("gpu_pressure"),
        "{served}"
    );
}

#[test]
fn only_get_is_served_and_only_after_authentication() {
    let w = world();
    let path = value_path("inference", "vllm_queue_depth", "");
    let (code, body) = w.adapter.request("POST", &Identity::default(), &path, &[]);
    assert_status(code, &body, 401, "Unauthorized");
    let (code, body) = w.adapter.request("DELETE", &w.alice_id, &path, &[]);
    assert_status(code, &body, 405, "MethodNotAllowed");
}

#[test]
fn cas_and_allowed_names_can_come_from_files() {
    let w = world();
    let pki = &w.pki;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, text: &str| write(dir.path(), name, text).display().to_string();
    let mut args = pki.tls_flags().to_vec();
    args.extend([
        format!("--kubeconfig={}", file("kubeconfig", &w.kube.kubeconfig())),
        format!(
            "--client-ca-file={}",
            file("client-ca.crt", &pki.clients.pem())
        ),
        format!(
            "--requestheader-client-ca-file={}",
            file("front-proxy-ca.crt", &pki.front.pem())
        ),
        "--requestheader-allowed-names=front-proxy-client".into(),
        format!("--prometheus-url={}", prom::shared().url),
    ]);
    let mut adapter = Adapter::start(&args, dir.path().join("adapter.log"));
    adapter.ca = Some(pki.serving_ca.clone());
    assert!(
        adapter
            .guard
            .log_text()
            .contains("authentication CAs read from files")
    );
    let path = value_path("inference", "tgi_queue_size", "");
    let alice = client::kubeconfig(
        dir.path(),
        "alice",
        &adapter.url(),
        &pki.serving_ca,
        &w.alice_id,
    );
    let out = kubectl_raw(&alice, &path);
    assert!(out.ok, "{out:?}\n{}", adapter.guard.log_text());
    assert_eq!(out.json()["items"][0]["value"], "5");
    let hpa = format!("X-Remote-User: {HPA_USER}");
    let (code, _) = adapter.curl_as(&w.proxy, &path, &[&hpa]);
    assert_eq!(code, 200);
    let (code, body) = adapter.curl_as(&w.mallory, &path, &[&hpa]);
    assert_status(code, &body, 401, "Unauthorized");
}

/// `check-prometheus` tells a user whether the joined metrics' series
/// carry the labels the join needs.
#[test]
fn check_prometheus_finds_series_the_join_would_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let check = |config: Option<&Path>| {
        let mut cmd = std::process::Command::new(gpuscale_e2e::bins::adapter());
        cmd.arg("check-prometheus")
            .arg(format!("--prometheus-url={}", prom::shared().url));
        if let Some(c) = config {
            cmd.arg(format!("--config={}", c.display()));
        }
        let out = cmd.output().expect("run adapter");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = check(None);
    assert!(ok, "{stdout}\n{stderr}");
    for line in [
        "vllm_queue_depth\tvllm:num_requests_waiting\t8 series, all with namespace and pod",
        "tgi_queue_size\ttgi_queue_size\t1 series, all with namespace and pod",
        "pod metadata\tgpu_pod_info\t11 series",
    ] {
        assert!(stdout.contains(line), "{line} missing from:\n{stdout}");
    }
    // The shared GPU's device series has no pod: a join on it misses it.
    let config = write(
        dir.path(),
        "gpu.yaml",
        "pod_metadata: kube-state-metrics\nmetrics:\n  - name: gpu_busy\n    query: sum(gpu_utilization_ratio{${series_matchers}} * on (namespace, pod) group_left () ${pods})\n",
    );
    let (ok, stdout, stderr) = check(Some(&config));
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains(
            "gpu_busy\tgpu_utilization_ratio\tPROBLEM: 1 of 4 series lack a namespace or pod label"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("pod metadata\tkube_pod_labels\t10 series"),
        "{stdout}"
    );
    assert!(stderr.contains("1 problem(s) found"), "{stderr}");
}

/// The shipped scrape examples keep `namespace` and `pod` as target labels
/// (what the join needs), and the example HPA is valid and names presets.
#[test]
fn the_scrape_and_hpa_examples_fit_the_join() {
    let root = gpuscale_e2e::bins::repo_root().join("deploy/examples");
    let read = |name: &str| std::fs::read_to_string(root.join(name)).expect(name);
    for doc in read("inference-podmonitors.yaml").split("\n---\n") {
        let pm: Value = yaml_serde::from_str(doc).expect("PodMonitor YAML");
        assert_eq!(pm["kind"], "PodMonitor");
        for ep in pm["spec"]["podMetricsEndpoints"]
            .as_array()
            .expect("endpoints")
        {
            // The operator's namespace/pod target labels are kept as they are.
            assert_ne!(ep["honorLabels"], true, "{ep}");
            assert!(ep.get("relabelings").is_none(), "{ep}");
        }
    }
    let prom: Value =
        yaml_serde::from_str(&read("prometheus-inference-scrape.yml")).expect("scrape YAML");
    let job = &prom["scrape_configs"][0];
    assert_eq!(job["kubernetes_sd_configs"][0]["role"], "pod");
    for (meta, target) in [
        ("__meta_kubernetes_namespace", "namespace"),
        ("__meta_kubernetes_pod_name", "pod"),
        ("__meta_kubernetes_pod_container_name", "container"),
    ] {
        assert!(
            job["relabel_configs"]
                .as_array()
                .expect("relabel_configs")
                .iter()
                .any(|r| r["source_labels"][0] == meta && r["target_label"] == target),
            "{target} not kept"
        );
    }
    let hpa = root.join("vllm-hpa.yaml");
    gpuscale_e2e::python::validate_manifests(std::slice::from_ref(&hpa))
        .unwrap_or_else(|e| panic!("{e}"));
    let hpa: Value = yaml_serde::from_str(&read("vllm-hpa.yaml")).expect("HPA YAML");
    for m in hpa["spec"]["metrics"].as_array().expect("metrics") {
        let name = m["external"]["metric"]["name"].as_str().expect("name");
        assert!(
            gpuscale_adapter_presets().contains(&name.to_string()),
            "{name}"
        );
    }
}

fn gpuscale_adapter_presets() -> Vec<String> {
    let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
        .arg("check-config")
        .output()
        .expect("run adapter");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_string)
        .collect()
}
