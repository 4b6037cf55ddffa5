//! Label selectors as the Kubernetes API evaluates them on `list` and
//! `watch` (the parser is gpuscale-util's, shared with the adapter).

use gpuscale_util::selector::{Limits, ParseError, Requirement, matches_all, validate_kube_key};
use serde_json::Value;

/// A parsed selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parse `labelSelector`; the error is the message a real server gives.
    pub fn parse(s: &str) -> Result<Self, String> {
        gpuscale_util::selector::parse::<ParseError>(s, Limits::NONE, validate_kube_key)
            .map(Self)
            .map_err(|e| format!("unable to parse requirement: {e}"))
    }

    /// Whether an object's `metadata.labels` match.
    pub fn matches(&self, labels: &Value) -> bool {
        matches_all(&self.0, |k| labels.get(k).and_then(Value::as_str))
    }
}
