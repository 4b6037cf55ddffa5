//! The KEDA external scaler end to end: the adapter's gRPC listener read by
//! an independent Python client that behaves as KEDA does (grpcio, stubs
//! generated from the adapter's `.proto`), over TLS with KEDA's client
//! certificate, against a real Prometheus holding known series.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::keda::{KedaClient, scaled_object};
use gpuscale_e2e::adapter::kubefake::{Cluster, KubeFake};
use gpuscale_e2e::adapter::pki::Ca;
use gpuscale_e2e::adapter::world::Pki;
use gpuscale_e2e::adapter::{procs, prom};
use gpuscale_e2e::write_file as write;
use serde_json::{Value, json};

const CONFIG: &str = "presets: all\nmetrics:\n  - name: chat_requests_waiting\n    query: sum(gateway_requests_waiting{${matchers}})\n    empty: zero\n  - name: tgi_waiting\n    query: sum(tgi_queue_size{${matchers}})\n    activation: 5\n  - name: jobs_waiting\n    query: sum(batch_jobs_waiting{${matchers}})\n    empty: zero\n";

struct World {
    adapter: Adapter,
    /// KEDA with its client certificate.
    keda: KedaClient,
    /// No client certificate, and one from a CA nobody trusts.
    bare: KedaClient,
    rogue: KedaClient,
    _kube: KubeFake,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let pki = Pki::new("gpuscale-keda-e2e-");
        let keda_ca = Ca::new("keda-client-ca");
        // The cluster grants no one anything: KEDA's calls need only its
        // certificate.
        let kube = KubeFake::start(Cluster {
            auth_configmap: Default::default(),
            tokens: Default::default(),
            sar: Arc::new(|_: &Value| (false, String::new())),
        });
        let keda_port = procs::free_port();
        let flags = [
            format!(
                "--client-ca-file={}",
                pki.write("client-ca.crt", &pki.clients.pem()).display()
            ),
            format!("--keda-listen=127.0.0.1:{keda_port}"),
            format!(
                "--keda-client-ca-file={}",
                pki.write("keda-ca.crt", &keda_ca.pem()).display()
            ),
        ];
        let adapter = pki.adapter("adapter", &kube, CONFIG, &flags, true);
        let leaf = |name: &str, ca: &Ca| {
            let id = pki.identity(name, &ca.client("keda-operator", &[]));
            id.cert.zip(id.key)
        };
        let client = |cert| KedaClient {
            port: keda_port,
            ca: Some(pki.serving_ca.clone()),
            cert,
        };
        World {
            keda: client(leaf("keda", &keda_ca)),
            bare: client(None),
            rogue: client(leaf("rogue", &Ca::new("rogue-ca"))),
            adapter,
            _kube: kube,
        }
    })
}

fn trigger(metric: &str, selector: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut m = vec![
        (
            "scalerAddress".to_string(),
            "gpuscale-adapter.gpuscale.svc:9443".to_string(),
        ),
        ("metric".to_string(), metric.to_string()),
    ];
    if !selector.is_empty() {
        m.push(("labelSelector".into(), selector.into()));
    }
    m.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    m
}

fn so(namespace: &str, meta: &[(String, String)]) -> Value {
    let pairs: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    scaled_object(namespace, &pairs)
}

fn code(v: &Value) -> &str {
    v["code"].as_str().unwrap_or("OK")
}

#[test]
fn keda_polls_the_spec_the_value_and_the_activity() {
    let w = world();
    let chat = so(
        "inference",
        &trigger("vllm_queue_depth", "workload=chat", &[("targetValue", "2")]),
    );
    let rounds = w.keda.poll(&chat, 2, "0.2");
    assert_eq!(rounds.len(), 2, "{}", w.adapter.guard.log_tail(30));
    assert_eq!(
        code(&rounds[0]["spec"]),
        "OK",
        "{}",
        w.adapter.guard.log_tail(30)
    );
    for r in &rounds {
        assert_eq!(
            r["spec"]["ok"]["metricSpecs"],
            json!([{"metricName": "vllm_queue_depth", "targetSize": "2", "targetSizeFloat": 2.0}]),
            "{r}"
        );
        assert_eq!(
            r["metrics"]["ok"]["metricValues"],
            json!([{"metricName": "vllm_queue_depth", "metricValue": "7", "metricValueFloat": 7.0}]),
            "{r}"
        );
        assert_eq!(r["active"]["ok"]["result"], true, "{r}");
    }
    // 0.6 is sent exactly as a float and rounded up in the int64, never 0.
    let kv = so(
        "inference",
        &trigger(
            "vllm_kv_cache_usage",
            "workload=chat",
            &[("targetValue", "0.5")],
        ),
    );
    let out = w
        .keda
        .calls(&[("GetMetrics", kv.clone()), ("GetMetricSpec", kv)]);
    let v = &out[0]["ok"]["metricValues"][0];
    assert_eq!(
        (v["metricValue"].as_str(), v["metricValueFloat"].as_f64()),
        (Some("1"), Some(0.6)),
        "{out:?}"
    );
    let s = &out[1]["ok"]["metricSpecs"][0];
    assert_eq!(
        (s["targetSize"].as_str(), s["targetSizeFloat"].as_f64()),
        (Some("1"), Some(0.5)),
        "{out:?}"
    );
}

#[test]
fn activation_follows_the_config_and_the_trigger_threshold() {
    let w = world();
    // tgi_waiting reads 5 and is configured with `activation: 5`.
    let at_threshold = so("inference", &trigger("tgi_waiting", "", &[]));
    let lower = so(
        "inference",
        &trigger("tgi_waiting", "", &[("activationThreshold", "4.5")]),
    );
    // An empty result under `empty: zero` is a real 0: inactive.
    let idle = so("idle", &trigger("jobs_waiting", "", &[]));
    let out = w.keda.calls(&[
        ("IsActive", at_threshold),
        ("IsActive", lower),
        ("IsActive", idle.clone()),
        ("GetMetrics", idle),
    ]);
    assert_eq!(out[0]["ok"]["result"], false, "{out:?}");
    assert_eq!(out[1]["ok"]["result"], true, "{out:?}");
    assert_eq!(out[2]["ok"]["result"], false, "{out:?}");
    assert_eq!(
        out[3]["ok"]["metricValues"][0]["metricValue"], "0",
        "{out:?}"
    );
}

#[test]
fn nan_infinity_and_empty_results_are_unavailable_never_inactive() {
    let w = world();
    let mut calls = Vec::new();
    for (ns, metric, selector) in [
        ("broken", "vllm_queue_depth", "workload=nan"),
        ("broken", "vllm_queue_depth", "workload=inf"),
        // No series, and the preset's policy is `empty: error`.
        ("nobody", "vllm_queue_depth", ""),
    ] {
        let s = so(ns, &trigger(metric, selector, &[]));
        calls.push(("IsActive", s.clone()));
        calls.push(("GetMetrics", s));
    }
    for r in w.keda.calls(&calls) {
        assert_eq!(code(&r), "UNAVAILABLE", "{r}");
        // Said by the adapter, not a failed connection.
        assert!(
            r["details"]
                .as_str()
                .unwrap_or("")
                .contains("metric vllm_queue_depth"),
            "{r}"
        );
    }
}

/// A full poll cache (`--max-cached-queries`): a trigger on a new key is
/// UNAVAILABLE (KEDA keeps the replicas), never `false`; the key already
/// held still answers.
#[test]
fn a_full_poll_cache_is_unavailable_never_inactive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), "metrics.yaml", CONFIG);
    let (_adapter, keda) = KedaClient::dev_adapter(
        &[
            format!("--config={}", config.display()),
            format!("--prometheus-url={}", prom::shared().url),
            "--max-cached-queries=1".into(),
        ],
        dir.path().join("adapter.log"),
    );
    // Held: a real 0, inactive. New: tgi_waiting, which would read 5.
    let held = so("idle", &trigger("jobs_waiting", "", &[]));
    let new = so(
        "inference",
        &trigger("tgi_waiting", "", &[("activationThreshold", "1")]),
    );
    let out = keda.calls(&[
        ("IsActive", held.clone()),
        ("IsActive", new.clone()),
        ("GetMetrics", new),
        ("IsActive", held),
    ]);
    assert_eq!(out[0]["ok"]["result"], false, "{out:?}");
    for r in &out[1..3] {
        assert_eq!(code(r), "UNAVAILABLE", "{r}");
        assert!(
            r["details"]
                .as_str()
                .unwrap_or("")
                .contains("poll cache is full"),
            "{r}"
        );
    }
    assert_eq!(out[3]["ok"]["result"], false, "{out:?}");
}

#[test]
fn bad_triggers_are_invalid_argument_naming_the_key() {
    let w = world();
    let cases = [
        (
            "inference",
            trigger("vllm_queue_depth", "", &[("selector", "a=b")]),
            "scalerMetadata.selector",
        ),
        ("inference", vec![], "scalerMetadata.metric"),
        (
            "inference",
            trigger("no_such_metric", "", &[]),
            "scalerMetadata.metric",
        ),
        (
            "inference",
            trigger(
                "vllm_queue_depth",
                "workload=chat\"} or vector(1) or {a=\"",
                &[],
            ),
            "scalerMetadata.labelSelector",
        ),
        // Another namespace cannot be reached through the selector.
        (
            "inference",
            trigger("vllm_queue_depth", "namespace=other", &[]),
            "scalerMetadata.labelSelector",
        ),
        (
            "inference",
            trigger("vllm_queue_depth", "__name__=up", &[]),
            "scalerMetadata.labelSelector",
        ),
        (
            "inference",
            trigger("vllm_queue_depth", "", &[("activationThreshold", "high")]),
            "scalerMetadata.activationThreshold",
        ),
        (
            "Not_A_Namespace",
            trigger("vllm_queue_depth", "", &[]),
            "ScaledObjectRef.namespace",
        ),
    ];
    let calls: Vec<(&str, Value)> = cases
        .iter()
        .map(|(ns, m, _)| ("IsActive", so(ns, m)))
        .collect();
    for (r, (_, _, key)) in w.keda.calls(&calls).iter().zip(&cases) {
        assert_eq!(code(r), "INVALID_ARGUMENT", "{key}: {r}");
        assert!(
            r["details"].as_str().unwrap_or("").contains(key),
            "{key}: {r}"
        );
    }
    let no_target = so("inference", &trigger("vllm_queue_depth", "", &[]));
    let out = w.keda.calls(&[
        ("GetMetricSpec", no_target.clone()),
        ("StreamMetricSpec", no_target),
    ]);
    assert_eq!(code(&out[0]), "INVALID_ARGUMENT", "{out:?}");
    assert!(
        out[0]["details"]
            .as_str()
            .unwrap_or("")
            .contains("scalerMetadata.targetValue"),
        "{out:?}"
    );
    assert_eq!(code(&out[1]), "UNIMPLEMENTED", "{out:?}");
}

#[test]
fn a_client_without_kedas_certificate_is_refused_at_the_handshake() {
    let w = world();
    let s = so("inference", &trigger("tgi_queue_size", "", &[]));
    for client in [&w.bare, &w.rogue] {
        let r = client.call("IsActive", &s);
        assert_eq!(code(&r), "UNAVAILABLE", "{r}");
        assert!(r.get("ok").is_none(), "{r}");
    }
    assert!(
        w.adapter
            .guard
            .log_text()
            .contains("keda: TLS handshake refused")
    );
    assert_eq!(w.keda.call("IsActive", &s)["ok"]["result"], true);
    let text = w.adapter.self_metrics();
    assert!(
        text.contains(r#"gpuscale_adapter_keda_requests_total{method="IsActive",code="OK"}"#),
        "{text}"
    );
}

/// A service at zero behind a gateway: the push stream says `true` once the
/// gateway's queue appears, and after Prometheus stops, cold and warm keys
/// read `UNAVAILABLE`, never `false`.
#[test]
fn a_new_series_wakes_the_push_stream_and_a_stopped_prometheus_is_never_idle() {
    let waiting = Arc::new(AtomicU64::new(0));
    let mut p = prom::Prometheus::start(prom::start_switch_target(waiting.clone()));
    procs::eventually("Prometheus to scrape the gateway", || {
        let v = p.query("gateway_up")?;
        (v["data"]["result"].as_array()?.len() == 1).then_some(())
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "metrics.yaml",
        "metrics:\n  - name: gateway_queue_depth\n    query: sum(gateway_requests_waiting{${matchers}})\n    empty: zero\n    freshness: 3s\n",
    );
    let (adapter, keda) = KedaClient::dev_adapter(
        &[
            format!("--config={}", config.display()),
            format!("--prometheus-url={}", p.url),
            "--poll-interval=1s".into(),
        ],
        dir.path().join("adapter.log"),
    );
    let wake = so("wake", &trigger("gateway_queue_depth", "service=chat", &[]));

    let stream = keda.stream(&wake);
    let first = stream
        .next(Duration::from_secs(30))
        .expect("the state at once");
    assert_eq!(first.1["result"], false, "no traffic yet: {first:?}");
    waiting.store(3, Ordering::SeqCst);
    let flipped = Instant::now();
    let woke = loop {
        let (at, msg) = stream.next(Duration::from_secs(30)).expect("a message");
        if msg["result"] == true {
            break at;
        }
    };
    // A figure, not an assertion (docs/performance.md): poll 1 s, scrape 1 s.
    eprintln!(
        "push latency: {} ms",
        woke.duration_since(flipped).as_millis()
    );
    assert_eq!(keda.call("IsActive", &wake)["ok"]["result"], true);
    assert!(
        adapter
            .self_metrics()
            .contains("gpuscale_adapter_keda_streams 1")
    );

    let _ = p.guard.child.kill();
    let _ = p.guard.child.wait();
    let cold = so(
        "wake",
        &trigger("gateway_queue_depth", "service=other", &[]),
    );
    assert_eq!(code(&keda.call("IsActive", &cold)), "UNAVAILABLE");
    let answers = procs::eventually("the warm key to pass its freshness", || {
        let out = keda.calls(&[("IsActive", wake.clone()), ("GetMetrics", wake.clone())]);
        assert_ne!(
            out[0]["ok"]["result"], false,
            "never idle on missing data: {out:?}"
        );
        (code(&out[0]) == "UNAVAILABLE").then_some(out)
    });
    assert_eq!(code(&answers[1]), "UNAVAILABLE", "{answers:?}");
    // The stream stays open and says nothing false while unknown.
    while let Some((_, msg)) = stream.next(Duration::from_secs(2)) {
        assert_ne!(msg["result"], false, "{msg}");
    }
    drop(stream);
    procs::eventually("the closed stream to be counted out", || {
        adapter
            .self_metrics()
            .contains("gpuscale_adapter_keda_streams 0")
            .then_some(())
    });
}

fn documents(file: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    let path = gpuscale_e2e::bins::repo_root()
        .join("deploy/examples")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("example file");
    yaml_serde::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("YAML document"))
        .collect()
}

/// The fields of KEDA's ScaledObject and TriggerAuthentication CRDs that
/// the example may use (keda.sh/v1alpha1, KEDA 2.17+ documentation), which
/// kubernetes-validate cannot check without the CRDs.
fn check_keda_object(o: &Value) {
    assert_eq!(o["apiVersion"], "keda.sh/v1alpha1");
    assert!(o["metadata"]["name"].is_string() && o["metadata"]["namespace"].is_string());
    match o["kind"].as_str() {
        Some("ScaledObject") => check_scaled_object(&o["spec"]),
        Some("TriggerAuthentication") => check_trigger_authentication(&o["spec"]),
        other => panic!("unexpected kind {other:?}"),
    }
}

/// Fails on a field of `v` that `allowed` does not name.
fn only(v: &Value, allowed: &[&str], what: &str) {
    for k in v.as_object().into_iter().flat_map(|m| m.keys()) {
        assert!(
            allowed.contains(&k.as_str()),
            "{what}: field {k} is not in KEDA's schema"
        );
    }
}

fn check_scaled_object(spec: &Value) {
    only(
        spec,
        &[
            "scaleTargetRef",
            "pollingInterval",
            "cooldownPeriod",
            "initialCooldownPeriod",
            "idleReplicaCount",
            "minReplicaCount",
            "maxReplicaCount",
            "fallback",
            "advanced",
            "triggers",
        ],
        "ScaledObject.spec",
    );
    only(
        &spec["scaleTargetRef"],
        &["apiVersion", "kind", "name", "envSourceContainerName"],
        "scaleTargetRef",
    );
    assert!(spec["scaleTargetRef"]["name"].is_string());
    for k in [
        "pollingInterval",
        "cooldownPeriod",
        "minReplicaCount",
        "maxReplicaCount",
    ] {
        assert!(
            spec[k].is_null() || spec[k].is_u64(),
            "{k} must be an integer"
        );
    }
    for t in spec["triggers"].as_array().expect("triggers") {
        check_trigger(t);
    }
}

fn check_trigger(t: &Value) {
    only(
        t,
        &[
            "type",
            "name",
            "metadata",
            "authenticationRef",
            "metricType",
            "useCachedMetrics",
        ],
        "trigger",
    );
    assert!(
        matches!(t["type"].as_str(), Some("external" | "external-push")),
        "{t}"
    );
    // Trigger metadata is map[string]string in KEDA's Go types.
    for (k, v) in t["metadata"].as_object().expect("metadata") {
        assert!(v.is_string(), "trigger metadata {k} must be a string: {v}");
    }
    only(
        &t["authenticationRef"],
        &["name", "kind"],
        "authenticationRef",
    );
}

fn check_trigger_authentication(spec: &Value) {
    only(
        spec,
        &[
            "secretTargetRef",
            "env",
            "hashiCorpVault",
            "podIdentity",
            "configMapTargetRef",
        ],
        "TriggerAuthentication.spec",
    );
    for r in spec["secretTargetRef"].as_array().expect("secretTargetRef") {
        only(r, &["parameter", "name", "key"], "secretTargetRef");
        assert!(
            matches!(
                r["parameter"].as_str(),
                Some("caCert" | "tlsClientCert" | "tlsClientKey")
            ),
            "{r}"
        );
    }
}

#[test]
fn the_scale_to_zero_examples_validate_and_their_trigger_is_accepted() {
    let root = gpuscale_e2e::bins::repo_root().join("deploy/examples");
    let plain = [
        "vllm.yaml",
        "adapter-metrics.yaml",
        "vllm-hpa-scale-to-zero.yaml",
        "adapter-keda-service.yaml",
    ];
    let files: Vec<PathBuf> = plain.iter().map(|f| root.join(f)).collect();
    gpuscale_e2e::python::validate_manifests(&files).unwrap_or_else(|e| panic!("{e}"));
    let hpa = &documents("vllm-hpa-scale-to-zero.yaml")[0];
    assert_eq!(hpa["spec"]["minReplicas"], 0);

    // The adapter accepts the example's metrics config.
    let cm = &documents("adapter-metrics.yaml")[0];
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "metrics.yaml",
        cm["data"]["metrics.yaml"].as_str().expect("metrics.yaml"),
    );
    let out = std::process::Command::new(gpuscale_e2e::bins::adapter())
        .arg("check-config")
        .arg(format!("--config={}", config.display()))
        .output()
        .expect("run adapter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("chat_requests_waiting"));

    // KEDA's objects match its schema, and the trigger is served as written.
    let w = world();
    for o in documents("vllm-keda-external-push.yaml") {
        check_keda_object(&o);
        if o["kind"] == "ScaledObject" {
            let t = &o["spec"]["triggers"][0];
            let meta: Vec<(String, String)> = t["metadata"]
                .as_object()
                .expect("metadata")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let so = so(
                o["metadata"]["namespace"].as_str().expect("namespace"),
                &meta,
            );
            let out = w
                .keda
                .calls(&[("GetMetricSpec", so.clone()), ("IsActive", so)]);
            assert_eq!(
                out[0]["ok"]["metricSpecs"][0]["metricName"], "chat_requests_waiting",
                "{out:?}"
            );
            assert_eq!(
                out[1]["ok"]["result"], false,
                "no request waits in inference: {out:?}"
            );
        }
    }
}
