//! The seam between the HTTP API and where numbers come from. The API asks a
//! [`Provider`] for (metric, namespace, selector) and renders what comes
//! back; a provider knows nothing of HTTP.

use std::collections::BTreeMap;
use std::future::Future;

/// One value of an external metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    /// Unix seconds of the read.
    pub timestamp: i64,
}

/// What the provider answers for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The metric's configured name (canonical spelling).
    pub metric: String,
    pub items: Vec<MetricValue>,
    pub window_secs: u64,
}

/// Why a provider could not answer; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 404: no such metric is configured.
    #[error("the server could not find the metric {0:?}")]
    UnknownMetric(String),
    /// 400: the selector or namespace cannot be translated safely.
    #[error("{0}")]
    BadRequest(String),
    /// 503: the backend failed, returned nothing, NaN, or a stale value.
    #[error("{0}")]
    Unavailable(String),
}

/// Where metric values come from.
pub trait Provider: Send + Sync + 'static {
    /// Names of the served metrics.
    fn metric_names(&self) -> Vec<String>;
    /// The configured spelling of `metric`, if it is served.
    fn canonical_name(&self, metric: &str) -> Option<String>;
    /// Values for `metric` in `namespace` matching `selector`.
    fn get(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Reading, ProviderError>> + Send;
}
