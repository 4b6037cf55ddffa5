//! Where the samples come from: one exporter's `/metrics`, or a Prometheus
//! (or VictoriaMetrics) answering instant queries for the same families.

use std::time::Duration;

use base64::Engine;

use crate::expo::{self, Sample};
use crate::tls;

/// The device families the views read, from an exporter or a Prometheus.
pub const FAMILIES: &[&str] = &[
    "gpu_info",
    "gpu_utilization_ratio",
    "gpu_sm_active_ratio",
    "gpu_tensor_active_ratio",
    "gpu_dram_active_ratio",
    "gpu_memory_used_bytes",
    "gpu_memory_total_bytes",
    "gpu_power_usage_watts",
    "gpu_power_limit_watts",
    "gpu_temperature_celsius",
    "gpu_clock_event_active",
    "gpu_ecc_errors_total",
    "gpu_xid_errors_total",
    "gpu_mig_info",
    "gpu_mig_memory_used_bytes",
    "gpu_mig_memory_total_bytes",
    "gpu_mig_sm_active_ratio",
    "gpu_pod_allocation",
    "gpu_pod_memory_used_bytes",
    "gpu_pod_sm_utilization_ratio",
    "gpu_price_usd_per_hour",
    "gpu_node_info",
    "gpu_activity_source_info",
];

/// The workload families only a Prometheus has: the recording rules of
/// `alerts/` (bottleneck class, cost per hour and per million tokens) and
/// the scale-to-zero controller's state, scraped from the adapter. Queried
/// without the `node` matcher (they have no `node` label).
pub const WORKLOAD_FAMILIES: &[&str] = &[
    "namespace_workload:gpu_bottleneck:sum",
    "namespace_workload:gpu_cost_usd_per_hour:sum",
    "namespace_workload:gpu_cost_usd_per_million_tokens:ratio",
    "gpuscale_scale_to_zero_parked",
    "gpuscale_scale_to_zero_waking_since_seconds",
    "gpuscale_scale_to_zero_sleeping_pods",
];

/// A source that could not be read, naming it.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {problem}")]
pub struct Error {
    pub source_name: String,
    pub problem: String,
}

/// What to read and how.
pub struct Source {
    kind: Kind,
    url: String,
    agent: ureq::Agent,
    auth: Option<String>,
    /// `node` matcher of the Prometheus queries.
    node: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Exporter,
    Prometheus,
}

impl Source {
    /// An exporter's `/metrics` (a base URL gets `/metrics` appended).
    pub fn exporter(url: &str, timeout: Duration, tls: &tls::Options) -> Result<Self, Error> {
        let url = url.trim_end_matches('/');
        let url = if url.ends_with("/metrics") {
            url.to_string()
        } else {
            format!("{url}/metrics")
        };
        Self::new(Kind::Exporter, url, timeout, tls)
    }

    /// A Prometheus base URL; `node` restricts the queries to one node.
    pub fn prometheus(
        url: &str,
        node: Option<String>,
        timeout: Duration,
        tls: &tls::Options,
    ) -> Result<Self, Error> {
        let url = url.trim_end_matches('/').into();
        let mut s = Self::new(Kind::Prometheus, url, timeout, tls)?;
        s.node = node;
        Ok(s)
    }

    fn new(kind: Kind, url: String, timeout: Duration, tls: &tls::Options) -> Result<Self, Error> {
        let err = |problem: String| Error {
            source_name: describe(kind, &url),
            problem,
        };
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(err("the URL must start with http:// or https://".into()));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .tls_config(tls::config(tls).map_err(err)?)
            .build()
            .into();
        Ok(Self {
            kind,
            url,
            agent,
            auth: None,
            node: None,
        })
    }

    /// Sends basic-auth credentials with every request.
    pub fn with_basic_auth(mut self, user: &str, password: &str) -> Self {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.auth = Some(format!("Basic {token}"));
        self
    }

    /// The families this source can serve (what `missing` is told against).
    pub fn families(&self) -> Vec<&'static str> {
        match self.kind {
            Kind::Exporter => FAMILIES.to_vec(),
            Kind::Prometheus => [FAMILIES, WORKLOAD_FAMILIES].concat(),
        }
    }

    /// What this source is, for the screen and error messages.
    pub fn name(&self) -> String {
        describe(self.kind, &self.url)
    }

    /// Every sample of the families the views read.
    pub fn fetch(&self) -> Result<Vec<Sample>, Error> {
        let err = |problem: String| Error {
            source_name: self.name(),
            problem,
        };
        let (status, body) = match self.kind {
            Kind::Exporter => self.get().map_err(err)?,
            Kind::Prometheus => self.query().map_err(err)?,
        };
        if status != 200 {
            let head: String = body.chars().take(200).collect();
            return Err(err(format!("HTTP {status}: {}", head.trim())));
        }
        match self.kind {
            Kind::Exporter => expo::parse(&body).map_err(|e| err(e.to_string())),
            Kind::Prometheus => decode(&body).map_err(err),
        }
    }

    fn get(&self) -> Result<(u16, String), String> {
        let mut req = self.agent.get(&self.url);
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        let resp = req.call().map_err(|e| e.to_string())?;
        read(resp)
    }

    fn query(&self) -> Result<(u16, String), String> {
        let node = self
            .node
            .as_ref()
            .map(|n| format!(",node=\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\"")))
            .unwrap_or_default();
        let promql = format!(
            "{{__name__=~\"{}\"{node}}} or {{__name__=~\"{}\"}}",
            FAMILIES.join("|"),
            WORKLOAD_FAMILIES.join("|")
        );
        let mut req = self.agent.post(&format!("{}/api/v1/query", self.url));
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        let resp = req
            .send_form([("query", promql.as_str())])
            .map_err(|e| e.to_string())?;
        read(resp)
    }
}

fn describe(kind: Kind, url: &str) -> String {
    match kind {
        Kind::Exporter => format!("exporter {url}"),
        Kind::Prometheus => format!("prometheus {url}"),
    }
}

fn read(mut resp: ureq::http::Response<ureq::Body>) -> Result<(u16, String), String> {
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(256 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| format!("reading the answer: {e}"))?;
    Ok((status, body))
}

/// The samples of a `/api/v1/query` vector answer.
fn decode(body: &str) -> Result<Vec<Sample>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(format!("{} {}", v["errorType"], v["error"]));
    }
    let result = v["data"]["result"]
        .as_array()
        .ok_or("answer has no data.result vector")?;
    let mut out = Vec::with_capacity(result.len());
    for s in result {
        let mut labels: std::collections::BTreeMap<String, String> = s["metric"]
            .as_object()
            .ok_or("a series without `metric`")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let name = labels.remove("__name__").unwrap_or_default();
        let text = s["value"][1].as_str().ok_or("a series without a value")?;
        let value: f64 = text
            .parse()
            .map_err(|_| format!("value {text:?} is not a number"))?;
        if value.is_finite() {
            out.push(Sample {
                name,
                labels,
                value,
            });
        }
    }
    Ok(out)
}
