//! The adapter against a second query engine: VictoriaMetrics (Debian
//! package `victoria-metrics`) started on 127.0.0.1, scraping the same
//! scripted cluster as the Prometheus suites with its own scraper
//! (`-promscrape.config`, the same scrape jobs). The real `kubectl get
//! --raw` reads the presets, custom queries and custom metrics (Pods and
//! Object) over TLS, KEDA's client reads the external scaler, and the poll
//! cache's batched re-reads (`label_replace` … `or` …) run against it.
//! Then `vmalert` evaluates the shipped rule files (`victoriametrics/vmalert.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpuscale_e2e::adapter::batch::{CONFIG as BATCH_CONFIG, NS, SERVERS, exposition as servers};
use gpuscale_e2e::adapter::client::{Adapter, Identity, assert_status, kubectl_raw};
use gpuscale_e2e::adapter::fleet::{CHAT_0, CHAT_1};
use gpuscale_e2e::adapter::keda::KedaClient;
use gpuscale_e2e::adapter::kubefake::KubeFake;
use gpuscale_e2e::adapter::pki::Ca;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::encode;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::adapter::world::{Pki, rbac};
use gpuscale_e2e::kubeapi::core;
use gpuscale_e2e::victoria::{self, VictoriaMetrics};
use serde_json::{Value, json};

#[path = "victoriametrics/vmalert.rs"]
mod vmalert;

/// The presets, two custom queries (one empty reads zero) and two object
/// metrics (a Service, a namespace), as the Prometheus suites configure them.
const CONFIG: &str = "presets: all
metrics:
  - name: jobs_waiting
    query: sum(batch_jobs_waiting{${matchers}})
    empty: zero
  - name: chat_requests_waiting
    query: sum(gateway_requests_waiting{${matchers}})
    empty: zero
  - name: gateway_pending
    objects:
      services: sum by (namespace, service) (gateway_requests_pending{${matchers}})
  - name: namespace_queue
    objects:
      namespaces: sum by (namespace) (vllm:num_requests_waiting{${matchers}})
";

struct World {
    adapter: Adapter,
    /// The same adapter reading pod metadata from kube-state-metrics.
    ksm: Adapter,
    alice: PathBuf,
    ksm_alice: PathBuf,
    alice_id: Identity,
    keda: KedaClient,
    _kube: KubeFake,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let vm = victoria::shared();
        let pki = Pki::new("gpuscale-victoriametrics-e2e-");
        let kube = KubeFake::start(pki.cluster(BTreeMap::new(), rbac(&[])));
        add_pods(&kube);
        let keda_ca = Ca::new("keda-client-ca");
        let keda_port = gpuscale_e2e::free_port();
        let flags = [
            format!("--keda-listen=127.0.0.1:{keda_port}"),
            format!(
                "--keda-client-ca-file={}",
                pki.write("keda-ca.crt", &keda_ca.pem()).display()
            ),
        ];
        let adapter = pki.adapter_on("adapter", &kube, CONFIG, &vm.url, &flags, true);
        let ksm_config = "pod_metadata: kube-state-metrics\npresets: all\n";
        let ksm = pki.adapter_on("ksm", &kube, ksm_config, &vm.url, &[], false);
        let alice_id = pki.identity("alice", &pki.clients.client("alice", &["team-inference"]));
        let keda_id = pki.identity("keda", &keda_ca.client("keda-operator", &[]));
        World {
            alice: pki.kubeconfig("alice", &adapter, &alice_id),
            ksm_alice: pki.kubeconfig("ksm-alice", &ksm, &alice_id),
            keda: KedaClient {
                port: keda_port,
                ca: Some(pki.serving_ca.clone()),
                cert: keda_id.cert.zip(keda_id.key),
            },
            alice_id,
            adapter,
            ksm,
            _kube: kube,
        }
    })
}

/// The pods an HPA's `type: Pods` selector finds (as `custom_metrics.rs`).
fn add_pods(kube: &KubeFake) {
    for (ns, name, app, phase) in [
        ("inference", CHAT_0, "chat", "Running"),
        ("inference", CHAT_1, "chat", "Running"),
        ("inference", "chat-2", "chat", "Pending"),
        ("inference", "embed-0", "embed", "Running"),
        ("other", CHAT_0, "chat", "Running"),
    ] {
        kube.put(
            &core("pods"),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": app}},
                "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai"}]},
                "status": {"phase": phase},
            }),
        );
    }
}

/// `kubectl get --raw` as alice on `kubeconfig`; the JSON, or a panic with
/// the adapter's log.
fn get(kubeconfig: &Path, adapter: &Adapter, path: &str) -> Value {
    let out = kubectl_raw(kubeconfig, path);
    assert!(
        out.ok,
        "kubectl failed for {path}: {out:?}\nadapter log:\n{}",
        adapter.guard.log_tail(40)
    );
    out.json()
}

fn external_path(ns: &str, metric: &str, selector: &str) -> String {
    format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector={}",
        encode(selector)
    )
}

/// The single value of an external metric.
fn external(kubeconfig: &Path, adapter: &Adapter, ns: &str, metric: &str, sel: &str) -> String {
    let v = get(kubeconfig, adapter, &external_path(ns, metric, sel));
    assert_eq!(v["kind"], "ExternalMetricValueList", "{v}");
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{metric}{{{sel}}}: {v}");
    items[0]["value"].as_str().expect("value").to_string()
}

/// The stories of `adapter.rs` (`STORIES`): every preset by workload, pod
/// label, workload kind and the servers' own labels, with the value the
/// scripted data implies. Rates and quantiles are exact on either engine
/// (counters grow by a fixed step per scrape).
pub(crate) const STORIES: &[(&str, &str, &str)] = &[
    ("vllm_queue_depth", "workload=chat", "7"),
    ("vllm_queue_depth", "label_app_kubernetes_io_name=chat", "7"),
    (
        "vllm_queue_depth",
        "workload in (chat, embed),container=vllm",
        "17",
    ),
    ("vllm_queue_depth", "model_name=bge-m3", "10"),
    ("vllm_kv_cache_usage", "workload=chat", "600m"),
    ("vllm_request_activity", "workload=chat", "9"),
    ("vllm_ttft_p95_seconds", "workload=chat", "750m"),
    ("vllm_ttft_p95_seconds", "model_name=llama-3-8b", "750m"),
    (
        "vllm_e2e_latency_p95_seconds",
        "workload_kind=Deployment",
        "7500m",
    ),
    ("tgi_queue_size", "workload=tgi", "5"),
    ("tgi_queue_size", "pod=tgi-0", "5"),
    ("triton_queue_time_avg_seconds", "workload=triton", "5m"),
    ("triton_queue_time_avg_seconds", "model=resnet", "5m"),
    ("gpu_pressure", "workload=chat", "825m"),
    ("gpu_pressure", "pod in (chat-7d9f8b6c5-a1b2c)", "900m"),
    ("gpu_pressure", "workload=tts", "400m"),
];

#[test]
fn every_preset_reads_the_value_the_data_implies_from_either_metadata_source() {
    let w = world();
    for (metric, selector, want) in STORIES {
        let got = external(&w.alice, &w.adapter, "inference", metric, selector);
        assert_eq!(got, *want, "{metric}{{{selector}}} (exporter metadata)");
        let got = external(&w.ksm_alice, &w.ksm, "inference", metric, selector);
        assert_eq!(got, *want, "{metric}{{{selector}}} (kube-state-metrics)");
    }
    // chat-cpu-0 has no gpu_pod_info: only kube-state-metrics knows it.
    let all = |kc, a| external(kc, a, "inference", "vllm_queue_depth", "");
    assert_eq!(all(&w.alice, &w.adapter), "17");
    assert_eq!(all(&w.ksm_alice, &w.ksm), "1017");
}

#[test]
fn custom_queries_read_values_zero_when_empty_and_errors_never_numbers() {
    let w = world();
    let read = |ns, metric, sel| external(&w.alice, &w.adapter, ns, metric, sel);
    assert_eq!(read("idle", "chat_requests_waiting", "service=chat"), "5");
    assert_eq!(
        read("inference", "chat_requests_waiting", "service=chat"),
        "0"
    );
    assert_eq!(read("empty", "jobs_waiting", ""), "0");
    // An empty preset, a NaN and an infinite queue are errors. (NaN samples
    // are not stored by VictoriaMetrics: that series reads "no series".)
    for (ns, sel) in [
        ("empty", ""),
        ("broken", "workload=nan"),
        ("broken", "workload=inf"),
    ] {
        let (code, body) = w.adapter.curl_as(
            &w.alice_id,
            &external_path(ns, "vllm_queue_depth", sel),
            &[],
        );
        assert_status(code, &body, 503, "ServiceUnavailable");
    }
}

/// (object name, value) of each item of a MetricValueList.
fn values(v: &Value) -> Vec<(String, String)> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            let name = i["describedObject"]["name"].as_str().unwrap_or("");
            (
                name.to_string(),
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
fn custom_metrics_for_pods_and_objects() {
    let w = world();
    let list = |path: &str| {
        let v = get(&w.alice, &w.adapter, path);
        assert_eq!(v["kind"], "MetricValueList", "{v}");
        values(&v)
    };
    let pods = |metric: &str| {
        format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/inference/pods/*/{metric}?labelSelector={}",
            encode("app.kubernetes.io/name=chat")
        )
    };
    // chat-2 has no series yet and is left out.
    let want = pairs(&[(CHAT_0, "3"), (CHAT_1, "4")]);
    assert_eq!(list(&pods("vllm_queue_depth")), want);
    let want = pairs(&[(CHAT_0, "900m"), (CHAT_1, "750m")]);
    assert_eq!(list(&pods("gpu_pressure")), want);
    let base = "/apis/custom.metrics.k8s.io/v1beta2/namespaces";
    assert_eq!(
        list(&format!("{base}/inference/pods/{CHAT_1}/vllm_queue_depth")),
        pairs(&[(CHAT_1, "4")])
    );
    assert_eq!(
        list(&format!(
            "{base}/inference/services/gateway/gateway_pending"
        )),
        pairs(&[("gateway", "12")])
    );
    assert_eq!(
        list(&format!("{base}/inference/metrics/namespace_queue")),
        pairs(&[("inference", "1017")])
    );
    // Another namespace's pod of the same name reads its own series.
    let other = format!(
        "{base}/other/pods/*/vllm_queue_depth?labelSelector={}",
        encode("app.kubernetes.io/name=chat")
    );
    assert_eq!(list(&other), pairs(&[(CHAT_0, "100")]));
}

#[test]
fn keda_reads_the_spec_the_value_and_the_activity() {
    let w = world();
    let chat = gpuscale_e2e::adapter::keda::scaled_object(
        "inference",
        &[
            ("scalerAddress", "gpuscale-adapter.gpuscale.svc:9443"),
            ("metric", "vllm_queue_depth"),
            ("labelSelector", "workload=chat"),
            ("targetValue", "2"),
        ],
    );
    let rounds = w.keda.poll(&chat, 2, "0.2");
    assert_eq!(rounds.len(), 2, "{}", w.adapter.guard.log_tail(30));
    for r in &rounds {
        assert_eq!(
            r["metrics"]["ok"]["metricValues"],
            json!([{"metricName": "vllm_queue_depth", "metricValue": "7", "metricValueFloat": 7.0}]),
            "{r}"
        );
        assert_eq!(r["active"]["ok"]["result"], true, "{r}");
    }
    // An empty result is never "inactive": KEDA gets an error.
    let empty =
        gpuscale_e2e::adapter::keda::scaled_object("empty", &[("metric", "vllm_queue_depth")]);
    let out = w.keda.call("IsActive", &empty);
    assert_eq!(out["code"], "UNAVAILABLE", "{out}");
}

/// (HTTP status, summed value) of one external metric read.
fn read_sum(adapter: &Adapter, metric: &str, selector: &str) -> (u16, Option<f64>) {
    let (code, json) = adapter.curl_as(
        &Identity::default(),
        &external_path(NS, metric, selector),
        &[],
    );
    let sum = json["items"].as_array().map(|items| {
        items
            .iter()
            .filter_map(|i| i["value"].as_str())
            .map(|q| match q.strip_suffix('m') {
                Some(milli) => milli.parse::<f64>().unwrap_or(f64::NAN) / 1000.0,
                None => q.parse().unwrap_or(f64::NAN),
            })
            .sum()
    });
    (code, sum)
}

fn key_reads(adapter: &Adapter) -> f64 {
    adapter
        .self_metrics()
        .lines()
        .filter(|l| l.starts_with("gpuscale_adapter_prometheus_queries_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn batched_re_reads_give_each_key_its_own_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (series, port) = Series::serve(&servers(1));
    let vm = VictoriaMetrics::start(&format!(
        "scrape_configs:\n  - job_name: apps\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    ));
    let cfg = gpuscale_e2e::write_file(dir.path(), "metrics.yaml", BATCH_CONFIG);
    let adapter = Adapter::start(
        &[
            "--dev".into(),
            format!("--config={}", cfg.display()),
            format!("--prometheus-url={}", vm.url),
            "--poll-interval=1s".into(),
        ],
        dir.path().join("adapter.log"),
    );
    eventually("the servers' queues in VictoriaMetrics", || {
        (read_sum(&adapter, "queue_depth", "pod=s1-0") == (200, Some(1.0))).then_some(())
    });
    for i in 0..SERVERS {
        let got = read_sum(&adapter, "queue_depth", &format!("pod=s{i}-0"));
        assert_eq!(got, (200, Some(i as f64)));
    }
    assert_eq!(
        read_sum(&adapter, "queue_scalar", "pod=s2-0"),
        (200, Some(2.0))
    );
    assert_eq!(
        read_sum(&adapter, "queue_paired", "pod=s3-0"),
        (200, Some(6.0))
    );
    assert_eq!(read_sum(&adapter, "queue_paired", "pod=twin-0").0, 503);
    series.set(&servers(10));

    eventually("every key re-read with the new values", || {
        let all = (0..SERVERS).all(|i| {
            read_sum(&adapter, "queue_depth", &format!("pod=s{i}-0"))
                == (200, Some((i * 10) as f64))
        });
        let others = read_sum(&adapter, "queue_scalar", "pod=s2-0") == (200, Some(20.0))
            && read_sum(&adapter, "queue_paired", "pod=s3-0") == (200, Some(60.0));
        (all && others).then_some(())
    });
    assert_eq!(read_sum(&adapter, "queue_paired", "pod=twin-0").0, 503);

    // A few requests per round, not one per key.
    let (q0, k0) = (vm.query_requests(), key_reads(&adapter));
    eventually("five more rounds of re-reads", || {
        (key_reads(&adapter) - k0 >= 5.0 * 33.0).then_some(())
    });
    let (q1, k1) = (vm.query_requests(), key_reads(&adapter));
    let ratio = (q1 - q0) / (k1 - k0);
    assert!(
        ratio < 0.2,
        "{} requests for {} key reads",
        q1 - q0,
        k1 - k0
    );
}
