//! The monitoring stack of the end-to-end test: a real Prometheus with the
//! rule files loaded, a real Alertmanager, a webhook receiver the test reads,
//! and fake scrape targets for the components that the dashboards chart but
//! the test does not run (adapter, scale-to-zero controller,
//! kube-state-metrics).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::http::{Response, Server};
use super::procs::{Proc, eventually};

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn http_ok(url: &str) -> bool {
    agent()
        .get(url)
        .call()
        .map(|r| r.status() == 200)
        .unwrap_or(false)
}

/// A real Prometheus (Debian package `prometheus`).
pub struct Prometheus {
    pub proc: Proc,
    pub url: String,
}

impl Prometheus {
    /// Starts Prometheus with `config` (YAML) in `dir` and waits until ready.
    pub fn start(dir: &Path, config: &str) -> Self {
        let cfg = dir.join("prometheus.yml");
        std::fs::write(&cfg, config).expect("write prometheus.yml");
        let port = free_port();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        let proc = Proc::spawn("prometheus", cmd, &dir.join("prometheus.log"));
        let me = Self {
            proc,
            url: format!("http://127.0.0.1:{port}"),
        };
        eventually(
            "Prometheus to be ready",
            Duration::from_secs(60),
            || http_ok(&format!("{}/-/ready", me.url)).then_some(()),
            || me.proc.log_tail(30),
        );
        me
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
/// every alert on its own to `webhook_url`.
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
                "route:\n  receiver: webhook\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n\
                 receivers:\n  - name: webhook\n    webhook_configs:\n      - url: {webhook_url}\n        send_resolved: true\n"
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
        let proc = Proc::spawn("alertmanager", cmd, &dir.join("alertmanager.log"));
        let me = Self {
            proc,
            url: format!("http://{addr}"),
            addr,
        };
        eventually(
            "Alertmanager to be ready",
            Duration::from_secs(60),
            || http_ok(&format!("{}/-/ready", me.url)).then_some(()),
            || me.proc.log_tail(30),
        );
        me
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

/// Metric families of gpuscale-adapter that the rules and dashboards use
/// (checked against docs/adapter.md by `adapter_metric_names_match_the_adapter_docs`).
pub const ADAPTER_METRICS: &[&str] = &[
    "gpuscale_adapter_up",
    "gpuscale_adapter_build_info",
    "gpuscale_adapter_metric_value",
    "gpuscale_adapter_metric_age_seconds",
    "gpuscale_adapter_requests_total",
    "gpuscale_adapter_request_duration_seconds",
    "gpuscale_adapter_prometheus_queries_total",
    "gpuscale_adapter_prometheus_query_duration_seconds",
];

/// Metric families the scale-to-zero controller is to export. It does not
/// exist yet; the alert and the panels activate when it ships.
pub const SCALE_TO_ZERO_METRICS: &[&str] = &[
    "gpuscale_scale_to_zero_leader",
    "gpuscale_scale_to_zero_parks_total",
    "gpuscale_scale_to_zero_wakes_total",
];

/// kube-state-metrics families the Autoscaling dashboard uses for HPA targets and replicas.
pub const KUBE_STATE_METRICS: &[&str] = &[
    "kube_horizontalpodautoscaler_spec_target_metric",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_horizontalpodautoscaler_spec_max_replicas",
];

/// Series Prometheus makes itself.
pub const PROMETHEUS_BUILTINS: &[&str] = &["up", "ALERTS"];

/// The adapter metric the fake adapter serves.
pub const FAKE_ADAPTER_METRIC: &str = "vllm-queue-depth";

fn histogram(s: &mut String, name: &str, labels: &str, n: u64, buckets: &[(&str, u64)]) {
    s.push_str(&format!("# TYPE {name} histogram\n"));
    for (le, step) in buckets {
        s.push_str(&format!(
            "{name}_bucket{{{labels},le=\"{le}\"}} {}\n",
            step * n
        ));
    }
    let count = buckets.last().map_or(0, |b| b.1) * n;
    s.push_str(&format!("{name}_sum{{{labels}}} {}\n", count as f64 * 0.01));
    s.push_str(&format!("{name}_count{{{labels}}} {count}\n"));
}

/// What the fake targets serve at scrape `n`: `/adapter`, `/scale-to-zero`,
/// `/kube-state-metrics`. Healthy values: no alert may fire on them.
pub fn fake_exposition(path: &str, n: u64) -> Option<String> {
    let m = FAKE_ADAPTER_METRIC;
    let mut s = String::new();
    match path {
        "/adapter" => {
            s.push_str("# TYPE gpuscale_adapter_up gauge\ngpuscale_adapter_up 1\n");
            s.push_str("# TYPE gpuscale_adapter_build_info gauge\ngpuscale_adapter_build_info{version=\"0.0.0-e2e\"} 1\n");
            s.push_str(&format!("# TYPE gpuscale_adapter_metric_value gauge\ngpuscale_adapter_metric_value{{metric=\"{m}\"}} 7\n"));
            s.push_str(&format!("# TYPE gpuscale_adapter_metric_age_seconds gauge\ngpuscale_adapter_metric_age_seconds{{metric=\"{m}\"}} 2\n"));
            s.push_str("# TYPE gpuscale_adapter_requests_total counter\n");
            s.push_str(&format!(
                "gpuscale_adapter_requests_total{{metric=\"{m}\",code=\"200\"}} {}\n",
                3 * n
            ));
            histogram(
                &mut s,
                "gpuscale_adapter_request_duration_seconds",
                &format!("metric=\"{m}\",code=\"200\""),
                n,
                &[("0.005", 2), ("0.05", 3), ("+Inf", 3)],
            );
            s.push_str("# TYPE gpuscale_adapter_prometheus_queries_total counter\n");
            s.push_str(&format!(
                "gpuscale_adapter_prometheus_queries_total{{metric=\"{m}\",result=\"ok\"}} {}\n",
                2 * n
            ));
            s.push_str(&format!(
                "gpuscale_adapter_prometheus_queries_total{{metric=\"{m}\",result=\"error\"}} 0\n"
            ));
            histogram(
                &mut s,
                "gpuscale_adapter_prometheus_query_duration_seconds",
                &format!("metric=\"{m}\""),
                n,
                &[("0.01", 1), ("0.1", 2), ("+Inf", 2)],
            );
        }
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
        _ => return None,
    }
    Some(s)
}

/// Serves [`fake_exposition`] under `/<component>/metrics`.
pub fn start_fake_targets() -> Server {
    let scrapes = Arc::new(AtomicU64::new(0));
    Server::start(move |req| {
        let n = scrapes.fetch_add(1, Ordering::SeqCst) / 3 + 1;
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

/// prometheus.yml for the test: 1s scrapes and evaluations, the rule copies,
/// the Alertmanager, the exporter and the fake targets.
pub fn prometheus_config(
    rule_files: &[PathBuf],
    alertmanager: &str,
    exporter: &str,
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
         scrape_configs:\n  - job_name: gpuscale-exporter\n    static_configs:\n      - targets: ['{exporter}']\n",
        rules.concat()
    );
    for (job, path) in [
        ("gpuscale-adapter", "/adapter"),
        ("gpuscale-scale-to-zero", "/scale-to-zero"),
        ("kube-state-metrics", "/kube-state-metrics"),
    ] {
        s.push_str(&format!(
            "  - job_name: {job}\n    metrics_path: {path}/metrics\n    honor_labels: true\n    static_configs:\n      - targets: ['{fakes}']\n"
        ));
    }
    s
}
