//! The monitoring stack of the end-to-end test: a real Prometheus with the
//! rule files loaded, a real Alertmanager, a webhook receiver the test reads,
//! the real gpuscale-adapter in `--dev` mode, and fake scrape targets for
//! what the dashboards chart but the test cannot run (the scale-to-zero
//! controller, which does not exist yet, and kube-state-metrics).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::http::{Response, Server};
use super::procs::eventually;
use crate::procs::Proc;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

pub use crate::free_port;

fn http_ok(url: &str) -> bool {
    agent()
        .get(url)
        .call()
        .map(|r| r.status() == 200)
        .unwrap_or(false)
}

/// Spawns `cmd` (its output to `log`) and waits until `ready` answers 200.
fn spawn_ready(name: &str, cmd: Command, log: &Path, ready: &str) -> Proc {
    let proc = Proc::spawn(name, cmd, log);
    eventually(
        &format!("{name} to be ready at {ready}"),
        Duration::from_secs(60),
        || http_ok(ready).then_some(()),
        || proc.log_tail(30),
    );
    proc
}

/// A real Prometheus (Debian package `prometheus`).
pub struct Prometheus {
    pub proc: Proc,
    pub url: String,
}

impl Prometheus {
    /// Starts Prometheus on `port` with `config` (YAML) in `dir` and waits
    /// until ready.
    pub fn start(dir: &Path, config: &str, port: u16) -> Self {
        let cfg = dir.join("prometheus.yml");
        std::fs::write(&cfg, config).expect("write prometheus.yml");

        let mut cmd = crate::procs::prometheus(&cfg, dir, port);
        cmd.arg("--log.level=warn");
        let url = format!("http://127.0.0.1:{port}");
        let log = dir.join("prometheus.log");
        let proc = spawn_ready("prometheus", cmd, &log, &format!("{url}/-/ready"));
        Self { proc, url }
    }

    /// GET an API path; the `data` of a `success` answer, else the error.
    pub fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let mut req = agent().get(format!("{}{path}", self.url));
        for (k, v) in params {
            req = req.query(*k, *v);
        }
        let mut resp = req.call().map_err(|e| format!("GET {path}: {e}"))?;
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("read {path}: {e}"))?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{path}: {e}: {body}"))?;
        if v["status"] == "success" {
            Ok(v["data"].clone())
        } else {
            Err(format!(
                "{}: {}",
                v["errorType"].as_str().unwrap_or("error"),
                v["error"].as_str().unwrap_or(&body)
            ))
        }
    }

    /// Instant query: the result vector (a scalar answer becomes one element).
    pub fn query(&self, q: &str) -> Result<Vec<Value>, String> {
        let data = self.api("/api/v1/query", &[("query", q)])?;
        match data["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(data["result"].as_array().cloned().unwrap_or_default())
            }
            Some("scalar") | Some("string") => Ok(vec![data["result"].clone()]),
            other => Err(format!("unexpected result type {other:?}")),
        }
    }

    /// Label values of `label` over the series matching `selector`.
    pub fn label_values(&self, selector: &str, label: &str) -> Result<Vec<String>, String> {
        let data = self.api(
            &format!("/api/v1/label/{label}/values"),
            &[("match[]", selector)],
        )?;
        Ok(data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect())
    }
}

/// A real Alertmanager (Debian package `prometheus-alertmanager`) sending
/// every alert on its own to `webhook_url`, with the shipped inhibit rules
/// (`alerts/alertmanager-inhibit.yml`). group_wait gives an inhibiting alert
/// sent in the same evaluation time to arrive before its targets notify.
pub struct Alertmanager {
    pub proc: Proc,
    pub url: String,
    pub addr: String,
}

impl Alertmanager {
    pub fn start(dir: &Path, webhook_url: &str) -> Self {
        let cfg = dir.join("alertmanager.yml");
        std::fs::write(
            &cfg,
            format!(
                "route:\n  receiver: webhook\n  group_by: ['...']\n  group_wait: 2s\n  group_interval: 1s\n  repeat_interval: 1h\n\
                 receivers:\n  - name: webhook\n    webhook_configs:\n      - url: {webhook_url}\n        send_resolved: true\n{}",
                std::fs::read_to_string(super::repo_root().join("alerts/alertmanager-inhibit.yml"))
                    .expect("alerts/alertmanager-inhibit.yml")
            ),
        )
        .expect("write alertmanager.yml");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new("prometheus-alertmanager");
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.path={}", dir.join("am-data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn");
        let url = format!("http://{addr}");
        let log = dir.join("alertmanager.log");
        let proc = spawn_ready("alertmanager", cmd, &log, &format!("{url}/-/ready"));
        Self { proc, url, addr }
    }
}

impl Alertmanager {
    /// Posts alerts (a JSON array of `{labels, annotations}`) to the v2 API,
    /// as Prometheus does.
    pub fn post_alerts(&self, alerts: &Value) {
        let r = agent()
            .post(&format!("{}/api/v2/alerts", self.url))
            .header("Content-Type", "application/json")
            .send(alerts.to_string())
            .expect("POST /api/v2/alerts");
        assert_eq!(r.status(), 200, "Alertmanager refused the alerts");
    }
}

/// The real gpuscale-adapter in `--dev` mode (self-signed certificate, no
/// authentication, 127.0.0.1 only), reading the test's Prometheus.
pub struct Adapter {
    pub proc: Proc,
    pub api: String,
}

impl Adapter {
    /// Builds (once) and starts the adapter; its self-metrics listen on
    /// `metrics_addr`.
    pub fn start(dir: &Path, prometheus_url: &str, metrics_addr: &str) -> Self {
        let api = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(crate::bins::adapter());
        cmd.arg("--dev")
            .arg(format!("--listen={api}"))
            .arg(format!("--metrics-listen={metrics_addr}"))
            .arg(format!("--prometheus-url={prometheus_url}"))
            .arg("--poll-interval=1s");
        let ready = format!("http://{metrics_addr}/metrics");
        let log = dir.join("adapter.log");
        let proc = spawn_ready("gpuscale-adapter", cmd, &log, &ready);
        Self {
            proc,
            api: format!("https://{api}"),
        }
    }

    /// GET an external metric as the HPA would (through `curl -k`: the dev
    /// certificate is self-signed). Returns (HTTP code, body).
    pub fn external_metric(&self, namespace: &str, metric: &str, selector: &str) -> (u16, String) {
        let url = format!(
            "{}/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}?labelSelector={selector}",
            self.api
        );
        let out = Command::new("curl")
            .args(["-sk", "-w", "\n%{http_code}", &url])
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }
}

/// One alert as the webhook received it.
#[derive(Debug, Clone)]
pub struct Notified {
    pub status: String,
    pub labels: serde_json::Map<String, Value>,
    pub annotations: serde_json::Map<String, Value>,
}

impl Notified {
    pub fn label(&self, k: &str) -> &str {
        self.labels.get(k).and_then(Value::as_str).unwrap_or("")
    }
    pub fn annotation(&self, k: &str) -> &str {
        self.annotations
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// The webhook receiver: records every alert of every notification.
pub struct Webhook {
    pub server: Server,
    pub received: Arc<Mutex<Vec<Notified>>>,
}

impl Webhook {
    pub fn start() -> Self {
        let received: Arc<Mutex<Vec<Notified>>> = Arc::default();
        let r = received.clone();
        let server = Server::start(move |req| {
            if req.method == "POST"
                && let Ok(v) = serde_json::from_slice::<Value>(&req.body)
            {
                let mut r = r.lock().expect("webhook lock");
                for a in v["alerts"].as_array().into_iter().flatten() {
                    r.push(Notified {
                        status: a["status"].as_str().unwrap_or("").to_string(),
                        labels: a["labels"].as_object().cloned().unwrap_or_default(),
                        annotations: a["annotations"].as_object().cloned().unwrap_or_default(),
                    });
                }
            }
            Response::text(String::new())
        });
        Self { server, received }
    }

    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.server.addr())
    }

    pub fn alerts(&self) -> Vec<Notified> {
        self.received.lock().expect("webhook lock").clone()
    }
}

/// Metric families gpuscale-adapter serves (`process_*` included), from
/// its registry (checked against docs/adapter.md by
/// `adapter_metric_names_match_the_adapter_docs`).
pub fn adapter_metrics() -> Vec<String> {
    served(|name| !name.starts_with("gpuscale_scale_to_zero_"))
}

/// Metric families of the scale-to-zero controller, from the adapter's
/// registry (checked against docs/scale-to-zero.md by
/// `scale_to_zero_names_match_the_guide`).
pub fn scale_to_zero_metrics() -> Vec<String> {
    served(|name| name.starts_with("gpuscale_scale_to_zero_"))
}

fn served(keep: impl Fn(&str) -> bool) -> Vec<String> {
    gpuscale_adapter::selfmetrics::describe()
        .into_iter()
        .map(|f| f.name)
        .filter(|name| keep(name))
        .collect()
}

/// kube-state-metrics families the Autoscaling dashboard uses for HPA targets and replicas.
pub const KUBE_STATE_METRICS: &[&str] = &[
    "kube_horizontalpodautoscaler_spec_target_metric",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_horizontalpodautoscaler_spec_max_replicas",
    "kube_node_status_capacity",
    "kube_node_status_allocatable",
];

/// The controller's refusals, parked gauge, wake latency, policies by
/// phase, and one target waking for a minute (well inside its bound).
fn scale_to_zero_more(n: u64) -> String {
    let wakes = n / 5;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = "namespace=\"ml-serve\",target=\"vllm\"";
    let h = "gpuscale_scale_to_zero_wake_latency_seconds";
    format!(
        "# TYPE gpuscale_scale_to_zero_refusals_total counter\n\
         gpuscale_scale_to_zero_refusals_total{{reason=\"MinUpDuration\"}} {wakes}\n\
         # TYPE gpuscale_scale_to_zero_parked gauge\n\
         gpuscale_scale_to_zero_parked{{{t}}} {parked}\n\
         # TYPE {h} histogram\n\
         {h}_bucket{{le=\"1\"}} {wakes}\n{h}_bucket{{le=\"2\"}} {wakes}\n\
         {h}_bucket{{le=\"+Inf\"}} {wakes}\n{h}_sum {sum}\n{h}_count {wakes}\n\
         # TYPE gpuscale_scale_to_zero_policies gauge\n\
         gpuscale_scale_to_zero_policies{{phase=\"Active\"}} 1\n\
         gpuscale_scale_to_zero_policies{{phase=\"Parked\"}} 1\n\
         gpuscale_scale_to_zero_policies{{phase=\"Waking\"}} 1\n\
         gpuscale_scale_to_zero_policies{{phase=\"Error\"}} 0\n\
         # TYPE gpuscale_scale_to_zero_waking_since_seconds gauge\n\
         gpuscale_scale_to_zero_waking_since_seconds{{namespace=\"ml-serve\",target=\"chat\"}} {since}\n",
        parked = n % 2,
        sum = wakes as f64 * 0.8,
        since = now.saturating_sub(60),
    )
}

/// Token and request counters of the serving frameworks (vLLM, TGI, Triton
/// with the TensorRT-LLM backend) the right-sizing rules read, as they
/// emit them (docs/right-sizing.md).
pub const SERVING_METRICS: &[&str] = &[
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "tgi_request_input_length_sum",
    "tgi_request_generated_tokens_sum",
    "tgi_request_success",
    "nv_llm_input_token_len_sum",
    "nv_llm_output_token_len_sum",
    "nv_inference_request_success",
];

/// vLLM's token and request counters for the scenario's `ml-serve/vllm`
/// pods (the right-sizing rules' cost per million tokens joins them to the
/// pods through `gpu_pod_info`), growing with each scrape.
fn vllm_counters(n: u64) -> String {
    let mut s = String::new();
    for (name, per_scrape) in [
        ("vllm:prompt_tokens_total", 900),
        ("vllm:generation_tokens_total", 300),
        ("vllm:request_success_total", 2),
    ] {
        s.push_str(&format!("# TYPE {name} counter\n"));
        for pod in ["vllm-0", "vllm-1"] {
            s.push_str(&format!(
                "{name}{{namespace=\"ml-serve\",pod=\"{pod}\",model_name=\"llama\"}} {}\n",
                n * per_scrape
            ));
        }
    }
    s
}

/// Series Prometheus makes itself.
pub const PROMETHEUS_BUILTINS: &[&str] = &["up", "ALERTS"];

/// The adapter preset the test requests from the real adapter (it reads the
/// exporter's series of the scenario's `ml-serve/vllm` pods).
pub const ADAPTER_METRIC: &str = "gpu_pressure";

/// What the fake targets serve at scrape `n`: `/scale-to-zero` (the
/// controller's families, as a leader with one policy per phase would
/// export them; the controller itself needs a Kubernetes API) and
/// `/kube-state-metrics` (HPA target and replicas) and `/vllm` (token and
/// request counters). Healthy values: no alert may fire on them.
pub fn fake_exposition(path: &str, n: u64) -> Option<String> {
    let m = ADAPTER_METRIC;
    let mut s = String::new();
    match path {
        "/scale-to-zero" => {
            s.push_str(
                "# TYPE gpuscale_scale_to_zero_leader gauge\ngpuscale_scale_to_zero_leader 1\n",
            );
            s.push_str("# TYPE gpuscale_scale_to_zero_parks_total counter\n");
            s.push_str(&format!(
                "gpuscale_scale_to_zero_parks_total{{namespace=\"ml-serve\",target=\"vllm\"}} {}\n",
                n / 5
            ));
            s.push_str("# TYPE gpuscale_scale_to_zero_wakes_total counter\n");
            s.push_str(&format!(
                "gpuscale_scale_to_zero_wakes_total{{namespace=\"ml-serve\",target=\"vllm\"}} {}\n",
                n / 5
            ));
            s.push_str(&scale_to_zero_more(n));
        }
        "/kube-state-metrics" => {
            let hpa = "namespace=\"ml-serve\",horizontalpodautoscaler=\"vllm\"";
            s.push_str(&format!(
                "kube_horizontalpodautoscaler_spec_target_metric{{{hpa},metric_name=\"{m}\",metric_target_type=\"average\"}} 5\n"
            ));
            s.push_str(&format!(
                "kube_horizontalpodautoscaler_status_current_replicas{{{hpa}}} 2\n"
            ));
            s.push_str(&format!(
                "kube_horizontalpodautoscaler_status_desired_replicas{{{hpa}}} 2\n"
            ));
            s.push_str(&format!(
                "kube_horizontalpodautoscaler_spec_max_replicas{{{hpa}}} 8\n"
            ));
        }
        "/vllm" => s.push_str(&vllm_counters(n)),
        _ => return None,
    }
    Some(s)
}

/// Serves [`fake_exposition`] under `/<component>/metrics`.
pub fn start_fake_targets() -> Server {
    let scrapes = Arc::new(AtomicU64::new(0));
    Server::start(move |req| {
        let n = scrapes.fetch_add(1, Ordering::SeqCst) / 2 + 1;
        match req
            .path
            .strip_suffix("/metrics")
            .and_then(|p| fake_exposition(p, n))
        {
            Some(body) => Response::text(body),
            None => Response::not_found(),
        }
    })
}

/// The target labels the Prometheus Operator gives the exporter pod found
/// by its ServiceMonitor: the exporter pod's own identity.
pub const OPERATOR_TARGET_LABELS: &[(&str, &str)] = &[
    ("namespace", "gpuscale"),
    ("pod", "gpuscale-exporter-x7k2p"),
    ("container", "exporter"),
    ("service", "gpuscale-exporter"),
    ("endpoint", "metrics"),
];

/// The relabelings of an operator resource's endpoint, as Prometheus
/// `relabel_configs` (one flow mapping a line).
pub fn relabel_configs(relabelings: &yaml_serde::Value) -> Vec<String> {
    let key = |k: &str| match k {
        "sourceLabels" => "source_labels".to_string(),
        "targetLabel" => "target_label".to_string(),
        k => k.to_string(),
    };
    relabelings
        .as_sequence()
        .expect("relabelings")
        .iter()
        .map(|r| {
            let m: serde_json::Map<String, Value> = r
                .as_mapping()
                .expect("relabeling")
                .iter()
                .map(|(k, v)| {
                    let v: Value = yaml_serde::from_value(v.clone()).expect("relabeling value");
                    (key(k.as_str().expect("key")), v)
                })
                .collect();
            Value::Object(m).to_string()
        })
        .collect()
}

/// The shipped ServiceMonitor's relabelings (`deploy/exporter/servicemonitor.yaml`).
pub fn servicemonitor_relabelings() -> yaml_serde::Value {
    let path = super::repo_root().join("deploy/exporter/servicemonitor.yaml");
    let doc: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(path).expect("servicemonitor.yaml"))
            .expect("servicemonitor YAML");
    doc["spec"]["endpoints"][0]["relabelings"].clone()
}

/// prometheus.yml for the test: 1s scrapes and evaluations, the rule copies,
/// the Alertmanager, the exporter, the adapter's self-metrics and the fake
/// targets. The exporter is scraped as the Prometheus Operator does it
/// with the shipped ServiceMonitor: its pod's identity as target labels,
/// `honor_labels`, and the ServiceMonitor's relabelings.
pub fn prometheus_config(
    rule_files: &[PathBuf],
    alertmanager: &str,
    exporter: &str,
    adapter_metrics: &str,
    fakes: &str,
) -> String {
    let rules: Vec<String> = rule_files
        .iter()
        .map(|p| format!("  - {}\n", p.display()))
        .collect();
    let mut s = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n{}\
         alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{alertmanager}']\n\
         scrape_configs:\n  - job_name: gpuscale-exporter\n    honor_labels: true\n    static_configs:\n      - targets: ['{exporter}']\n        labels: {}\n    relabel_configs:\n{}\
         \x20 - job_name: gpuscale-adapter\n    static_configs:\n      - targets: ['{adapter_metrics}']\n",
        rules.concat(),
        serde_json::to_string(
            &OPERATOR_TARGET_LABELS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        )
        .expect("labels"),
        relabel_configs(&servicemonitor_relabelings())
            .iter()
            .map(|r| format!("      - {r}\n"))
            .collect::<String>(),
    );
    for (job, path) in [
        ("gpuscale-scale-to-zero", "/scale-to-zero"),
        ("kube-state-metrics", "/kube-state-metrics"),
        ("vllm", "/vllm"),
    ] {
        s.push_str(&format!(
            "  - job_name: {job}\n    metrics_path: {path}/metrics\n    honor_labels: true\n    static_configs:\n      - targets: ['{fakes}']\n"
        ));
    }
    s
}

/// The two jobs a ServiceMonitor and a PodMonitor selecting the same
/// exporter pods make.
pub const MONITOR_JOBS: &[&str] = &["gpuscale-exporter", "gpuscale-exporter-podmonitor"];

/// The alerting stack of an incident story: Prometheus scraping one
/// exporter under [`MONITOR_JOBS`] with the time-scaled rules, sending to
/// Alertmanager with the shipped inhibit rules, which posts to a webhook.
/// `gpuscale.rules.yml` is left out: scaled, GPUExporterDown's `for: 5m` is
/// half a second and rightly fires on the gaps these stories make. So is
/// `nodes.rules.yml`: a node is judged reclaimable only once its facts were
/// known at every minute of the last 15, and a one-second gap is ten minutes
/// once scaled, so GPUNodeReclaimable rightly starts over after one
/// (the node economics story runs those rules on an exporter without gaps). Fields drop
/// in order: Prometheus stops first.
pub struct Alerting {
    pub prom: Prometheus,
    pub am: Alertmanager,
    pub webhook: Webhook,
}

impl Alerting {
    pub fn start(dir: &Path, exporter: &str) -> Self {
        let rule_files: Vec<_> = super::rules::write_time_scaled(&dir.join("rules"))
            .into_iter()
            .filter(|p| !p.ends_with("gpuscale.rules.yml") && !p.ends_with("nodes.rules.yml"))
            .collect();
        let webhook = Webhook::start();
        let am = Alertmanager::start(dir, &webhook.url());
        let config = exporter_jobs_config(&rule_files, &am.addr, exporter, MONITOR_JOBS);
        let prom = Prometheus::start(dir, &config, free_port());
        Self { prom, am, webhook }
    }
}

/// Prometheus configuration scraping one exporter under each of `jobs` (as
/// a ServiceMonitor and a PodMonitor both selecting it would), with the
/// ServiceMonitor's target labels and relabelings, the rules loaded and
/// alerts sent to `alertmanager` (none when empty).
pub fn exporter_jobs_config(
    rule_files: &[PathBuf],
    alertmanager: &str,
    exporter: &str,
    jobs: &[&str],
) -> String {
    exporters_jobs_config(rule_files, alertmanager, &[exporter], jobs)
}

/// As [`exporter_jobs_config`], for several exporters (one a node).
pub fn exporters_jobs_config(
    rule_files: &[PathBuf],
    alertmanager: &str,
    exporters: &[&str],
    jobs: &[&str],
) -> String {
    let targets = exporters
        .iter()
        .map(|e| format!("'{e}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n",
    );
    for p in rule_files {
        s.push_str(&format!("  - {}\n", p.display()));
    }
    if !alertmanager.is_empty() {
        s.push_str(&format!(
            "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{alertmanager}']\n"
        ));
    }
    let labels = serde_json::to_string(
        &OPERATOR_TARGET_LABELS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>(),
    )
    .expect("labels");
    let relabel: String = relabel_configs(&servicemonitor_relabelings())
        .iter()
        .map(|r| format!("      - {r}\n"))
        .collect();
    s.push_str("scrape_configs:\n");
    for job in jobs {
        s.push_str(&format!(
            "  - job_name: {job}\n    honor_labels: true\n    static_configs:\n      - targets: [{targets}]\n        labels: {labels}\n    relabel_configs:\n{relabel}"
        ));
    }
    s
}
