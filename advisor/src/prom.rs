//! The one door to Prometheus: instant queries over its HTTP API.
//!
//! Answers are deserialised from the response stream straight into typed
//! series (no JSON tree, no copy of the body), so memory holds what is
//! kept, not the answer's text. A label set twice in one answer is an
//! error (`duplicate series`): summing or "last wins" would be advice from
//! a broken Prometheus. The answer's `warnings` are kept for the report.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::Error;

/// Largest answer read (bytes): a bound on what a broken or hostile
/// Prometheus can make the advisor read.
pub const ANSWER_LIMIT: u64 = 512 * 1024 * 1024;

/// One series of an instant vector; its value may be NaN or infinite
/// (the facts' checks refuse those by name).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sorted by name (a vector: a third of a small map's memory).
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// A label's value; absent labels read as "" (as in PromQL).
    pub fn label(&self, k: &str) -> &str {
        self.labels
            .binary_search_by(|(n, _)| n.as_str().cmp(k))
            .map_or("", |i| self.labels[i].1.as_str())
    }

    /// The labels as `{a="x", b="y"}`, to name the series in a note.
    pub fn name(&self) -> String {
        let l: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{{{}}}", l.join(", "))
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    value: (serde_json::Number, String),
}

/// A Prometheus (or Thanos, Mimir: anything serving `/api/v1/query`).
pub struct Prometheus {
    base: String,
    agent: ureq::Agent,
    /// Evaluation time of every query (Unix seconds).
    pub time: f64,
    /// How many queries ran.
    pub queries: std::cell::Cell<u32>,
    /// Prometheus' own warnings, with the query that drew them.
    pub warnings: RefCell<Vec<String>>,
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
            warnings: RefCell::new(Vec::new()),
        }
    }

    /// An instant query at `self.time`.
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
        let reader = resp.body_mut().with_config().limit(ANSWER_LIMIT).reader();
        let (samples, warnings) = decode_from(std::io::BufReader::new(reader))
            .map_err(|p| err(format!("HTTP {status}: {p}")))?;
        tracing::debug!(query = promql, status, elapsed = ?started.elapsed(), "query");
        for w in warnings {
            tracing::warn!(query = promql, warning = %w, "Prometheus warning");
            self.warnings
                .borrow_mut()
                .push(format!("{w} (query: {promql})"));
        }
        Ok(samples)
    }
}

/// The samples of a `/api/v1/query` answer that must be a vector, and the
/// answer's warnings.
pub fn decode(body: &str) -> Result<(Vec<Sample>, Vec<String>), String> {
    decode_from(body.as_bytes())
}

/// [`decode`] from a reader, without holding the text.
pub fn decode_from(r: impl std::io::Read) -> Result<(Vec<Sample>, Vec<String>), String> {
    let a: Answer = serde_json::from_reader(r).map_err(|e| format!("answer is not JSON: {e}"))?;
    if a.status != "success" {
        return Err(format!(
            "{} {}",
            a.error_type.unwrap_or_default(),
            a.error.unwrap_or_default()
        ));
    }
    let data = a.data.ok_or("answer has no data")?;
    if data.result_type != "vector" {
        return Err(format!(
            "result type {:?} is not a vector",
            data.result_type
        ));
    }
    let mut out = Vec::with_capacity(data.result.len());
    for s in data.result {
        let text = &s.value.1;
        let value: f64 = text
            .parse()
            .map_err(|_| format!("value {text:?} is not a number"))?;
        let sample = Sample {
            labels: s.metric.into_iter().collect(),
            value,
        };
        out.push(sample);
    }
    // Sorted indices, not a set of copies: duplicates end up adjacent.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_unstable_by(|a, b| out[*a].labels.cmp(&out[*b].labels));
    if let Some(w) = order
        .windows(2)
        .find(|w| out[w[0]].labels == out[w[1]].labels)
    {
        return Err(format!(
            "duplicate series: {} twice in one answer",
            out[w[0]].name()
        ));
    }
    Ok((out, a.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_vectors_keeps_nan_for_the_checks() {
        let body = r#"{"status":"success","warnings":["w1"],"data":{"resultType":"vector","result":[
            {"metric":{"namespace":"a"},"value":[1,"0.5"]},
            {"metric":{"namespace":"b"},"value":[1.5,"NaN"]}]}}"#;
        let (s, w) = decode(body).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(w, ["w1"]);
        assert_eq!(s[0].label("namespace"), "a");
        assert_eq!(s[0].label("absent"), "");
        assert!(s[1].value.is_nan());
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

    #[test]
    fn a_label_set_twice_is_an_error() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"namespace":"a"},"value":[1,"1"]},
            {"metric":{"namespace":"a"},"value":[1,"1"]}]}}"#;
        let e = decode(body).unwrap_err();
        assert!(
            e.contains("duplicate series") && e.contains("namespace=\"a\""),
            "{e}"
        );
    }
}
