//! The one door to Prometheus: instant queries over its HTTP API.
//!
//! Answers are read from the response stream one series at a time and
//! each handed to the caller as it is read ([`Prometheus::query_each`]),
//! so memory holds what the caller keeps, not the answer's text, a tree
//! or every series at once. A label set twice in one answer is an error
//! (`duplicate series`): summing or "last wins" would be advice from a
//! broken Prometheus. The answer's `warnings` are kept for the report.

use std::cell::RefCell;
use std::time::Duration;

use crate::Error;

mod answer;

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

    /// An instant query at `self.time`: every series of its answer.
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, Error> {
        let mut out = Vec::new();
        self.query_each(promql, |s| out.push(s))?;
        Ok(out)
    }

    /// An instant query at `self.time`, each series handed to `each` as it
    /// is read. On an error, what `each` got is part of a refused answer.
    pub fn query_each(&self, promql: &str, mut each: impl FnMut(Sample)) -> Result<(), Error> {
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
        let warnings = answer::read(std::io::BufReader::new(reader), &mut each)
            .map_err(|p| err(format!("HTTP {status}: {p}")))?;
        tracing::debug!(query = promql, status, elapsed = ?started.elapsed(), "query");
        for w in warnings {
            tracing::warn!(query = promql, warning = %w, "Prometheus warning");
            self.warnings
                .borrow_mut()
                .push(format!("{w} (query: {promql})"));
        }
        Ok(())
    }
}

/// The samples of a `/api/v1/query` answer that must be a vector, and the
/// answer's warnings.
pub fn decode(body: &str) -> Result<(Vec<Sample>, Vec<String>), String> {
    decode_from(body.as_bytes())
}

/// [`decode`] from a reader, without holding the text.
pub fn decode_from(r: impl std::io::Read) -> Result<(Vec<Sample>, Vec<String>), String> {
    let mut out = Vec::new();
    let warnings = answer::read(r, &mut |s| out.push(s))?;
    Ok((out, warnings))
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
