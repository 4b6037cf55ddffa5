//! The one door to Prometheus: instant queries over its HTTP API.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::Error;

/// One series of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// A label's value; absent labels read as "" (as in PromQL).
    pub fn label(&self, k: &str) -> &str {
        self.labels.get(k).map_or("", String::as_str)
    }
}

/// A Prometheus (or Thanos, Mimir: anything serving `/api/v1/query`).
pub struct Prometheus {
    base: String,
    agent: ureq::Agent,
    /// Evaluation time of every query (Unix seconds).
    pub time: f64,
    /// How many queries ran.
    pub queries: std::cell::Cell<u32>,
}

impl Prometheus {
    pub fn new(url: &str, time: f64, timeout: Duration) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        Self {
            base: url.trim_end_matches('/').to_string(),
            agent,
            time,
            queries: std::cell::Cell::new(0),
        }
    }

    /// An instant query at `self.time`; NaN and infinite values are left
    /// out (logged), never turned into numbers.
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, Error> {
        self.queries.set(self.queries.get() + 1);
        let err = |problem: String| Error::Prometheus {
            url: self.base.clone(),
            query: promql.to_string(),
            problem,
        };
        let started = std::time::Instant::now();
        let mut resp = self
            .agent
            .post(&format!("{}/api/v1/query", self.base))
            .send_form([("query", promql), ("time", &format!("{:.3}", self.time))])
            .map_err(|e| err(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(512 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| err(format!("reading the answer: {e}")))?;
        tracing::debug!(query = promql, status, elapsed = ?started.elapsed(), "query");
        decode(&body).map_err(|p| err(format!("HTTP {status}: {p}")))
    }
}

/// The samples of a `/api/v1/query` answer that must be a vector.
pub fn decode(body: &str) -> Result<Vec<Sample>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(format!("{} {}", v["errorType"], v["error"]));
    }
    if v["data"]["resultType"] != "vector" {
        return Err(format!(
            "result type {} is not a vector",
            v["data"]["resultType"]
        ));
    }
    let result = v["data"]["result"]
        .as_array()
        .ok_or("answer has no data.result")?;
    let mut out = Vec::with_capacity(result.len());
    for s in result {
        let labels: BTreeMap<String, String> = s["metric"]
            .as_object()
            .ok_or("a series without `metric`")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let text = s["value"][1].as_str().ok_or("a series without a value")?;
        let value: f64 = text
            .parse()
            .map_err(|_| format!("value {text:?} is not a number"))?;
        if value.is_finite() {
            out.push(Sample { labels, value });
        } else {
            tracing::debug!(?labels, value = text, "non-finite value left out");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_vectors_and_drops_nan() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"namespace":"a"},"value":[1,"0.5"]},
            {"metric":{"namespace":"b"},"value":[1,"NaN"]}]}}"#;
        let s = decode(body).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label("namespace"), "a");
        assert_eq!(s[0].label("absent"), "");
        assert!(
            decode(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#)
                .unwrap_err()
                .contains("parse error")
        );
        assert!(decode("<html>").is_err());
        assert!(
            decode(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#).is_err()
        );
    }
}
