//! VRAM facts from Prometheus, as `gpuscale-exporter` serves them
//! (docs/metrics.md): each pod's memory per GPU
//! (`gpu_pod_memory_used_bytes{namespace, pod, uuid}`) and each GPU's free
//! memory (`gpu_memory_free_bytes{uuid}`). A series that is absent is
//! absent here too, never a zero.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::sleep_calls::exchange;

/// One series of an answer: its labels and value.
type Sample = (BTreeMap<String, String>, f64);

/// One query's limit.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// A pod's memory on one GPU (a whole GPU: MIG instances are not shared
/// here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVram {
    pub uuid: String,
    pub bytes: u64,
}

/// One reading of the fleet.
#[derive(Debug, Default, Clone)]
pub struct Reading {
    /// (namespace, pod) → its memory, per GPU it uses.
    pub pods: BTreeMap<(String, String), Vec<PodVram>>,
    /// GPU uuid → free bytes.
    pub free: BTreeMap<String, u64>,
}

impl Reading {
    /// The pod's one GPU and its memory there; `None` when the pod has no
    /// series, or spans several GPUs or a MIG instance.
    pub fn single(&self, ns: &str, pod: &str) -> Option<&PodVram> {
        match self
            .pods
            .get(&(ns.to_string(), pod.to_string()))?
            .as_slice()
        {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// Where Prometheus answers: `http://host:port` with an optional path
/// prefix.
#[derive(Debug, Clone)]
pub struct Prometheus {
    authority: String,
    prefix: String,
}

impl Prometheus {
    /// # Errors
    /// A URL that is not `http://host[:port][/prefix]`.
    pub fn new(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("--prometheus-url {url:?}: only http:// is supported"))?;
        let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if host.is_empty() {
            return Err(format!("--prometheus-url {url:?}: no host"));
        }
        let authority = if host.contains(':') && !host.ends_with(']') {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        let prefix = prefix.trim_end_matches('/');
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("/{prefix}")
        };
        Ok(Self { authority, prefix })
    }

    /// Both families now.
    ///
    /// # Errors
    /// Prometheus did not answer, or not with a vector.
    pub async fn read(&self) -> Result<Reading, String> {
        let mut r = Reading::default();
        for (labels, v) in self.query("gpu_pod_memory_used_bytes").await? {
            let (Some(ns), Some(pod), Some(uuid)) = (
                labels.get("namespace"),
                labels.get("pod"),
                labels.get("uuid"),
            ) else {
                continue;
            };
            let entry = r.pods.entry((ns.clone(), pod.clone())).or_default();
            // A MIG instance's memory is not the GPU's to share: no single.
            if labels.contains_key("mig_uuid") {
                entry.push(PodVram {
                    uuid: String::new(),
                    bytes: 0,
                });
            }
            entry.push(PodVram {
                uuid: uuid.clone(),
                bytes: v as u64,
            });
        }
        for (labels, v) in self.query("gpu_memory_free_bytes").await? {
            if let Some(uuid) = labels.get("uuid") {
                r.free.insert(uuid.clone(), v as u64);
            }
        }
        Ok(r)
    }

    /// An instant query of one metric name: (labels, value) per series.
    async fn query(&self, name: &str) -> Result<Vec<Sample>, String> {
        let path = format!("{}/api/v1/query?query={name}", self.prefix);
        let (status, body) = tokio::time::timeout(QUERY_TIMEOUT, get(&self.authority, &path))
            .await
            .map_err(|_| format!("Prometheus: no answer to {name} within {QUERY_TIMEOUT:?}"))??;
        if status != StatusCode::OK {
            return Err(format!("Prometheus answered {status} to {name}"));
        }
        parse(&body).map_err(|e| format!("Prometheus's answer to {name}: {e}"))
    }
}

async fn get(authority: &str, path: &str) -> Result<(StatusCode, Bytes), String> {
    exchange(authority, Method::GET, path)
        .await
        .map_err(|e| format!("Prometheus at {authority}: {e}"))
}

/// The vector of an instant query's JSON answer; a value that does not
/// parse is left out (never read as 0).
fn parse(body: &[u8]) -> Result<Vec<Sample>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if v["status"] != "success" || v["data"]["resultType"] != "vector" {
        return Err(format!("not a vector: {}", String::from_utf8_lossy(body)));
    }
    let series = v["data"]["result"].as_array().cloned().unwrap_or_default();
    Ok(series
        .iter()
        .filter_map(|s| {
            let value: f64 = s["value"][1].as_str()?.parse().ok()?;
            let labels = s["metric"]
                .as_object()?
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
            value.is_finite().then_some((labels, value))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers_are_read_and_junk_is_left_out() {
        let p = Prometheus::new("http://prom.monitoring:9090/prom/").unwrap();
        assert_eq!(
            (p.authority.as_str(), p.prefix.as_str()),
            ("prom.monitoring:9090", "/prom")
        );
        assert_eq!(Prometheus::new("http://prom").unwrap().authority, "prom:80");
        assert!(Prometheus::new("https://prom").is_err());
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"uuid":"GPU-1","pod":"a"},"value":[1,"1024"]},
            {"metric":{"uuid":"GPU-2"},"value":[1,"NaN"]},
            {"metric":{"uuid":"GPU-3"},"value":[1,"x"]}]}}"#;
        let got = parse(body).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, 1024.0);
        assert!(parse(br#"{"status":"error"}"#).is_err());
    }
}
