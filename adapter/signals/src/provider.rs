//! The seam between the HTTP API and where numbers come from. The API asks a
//! [`Provider`] for (metric, namespace, selector) and renders what comes
//! back; a provider knows nothing of HTTP.

use std::collections::BTreeMap;
use std::future::Future;

use crate::objects::ObjectKind;
use crate::selector::Requirement;

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

/// Which objects a custom-metrics request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// One object by name (for namespaces: the namespace itself).
    Name(&'a str),
    /// `pods/*`: the pods matching this Kubernetes label selector.
    Selector(&'a str),
}

/// A custom-metrics request: `metric` of `kind` objects in `namespace`.
#[derive(Debug, Clone)]
pub struct ObjectRequest<'a> {
    pub kind: ObjectKind,
    pub namespace: &'a str,
    pub target: Target<'a>,
    pub metric: &'a str,
    /// `metricLabelSelector`, narrowing the series (Prometheus labels).
    pub metric_selector: &'a str,
}

/// One object's value.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectValue {
    pub name: String,
    pub value: f64,
    pub timestamp: i64,
}

/// What the provider answers for a custom-metrics request.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectReading {
    pub metric: String,
    pub items: Vec<ObjectValue>,
    pub window_secs: u64,
    /// The parsed `metricLabelSelector`, echoed in the answer (None when absent).
    pub selector: Option<Vec<Requirement>>,
}

/// The metric name under which ad-hoc queries are cached and counted.
pub const QUERY_METRIC: &str = "scale_to_zero_query";

/// Why a provider could not answer; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 404: no such metric is configured.
    #[error("the server could not find the metric {}", crate::limits::excerpt(.0))]
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
    /// Values of a PromQL template (the config's placeholders, `${matchers}`
    /// required) in `namespace` matching `selector`, through the same cache
    /// and rules as a configured metric under the name [`QUERY_METRIC`].
    fn get_query(
        &self,
        template: &str,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Reading, ProviderError>> + Send;
    /// (kind, metric) pairs served on the custom metrics API.
    fn object_metrics(&self) -> Vec<(ObjectKind, String)>;
    /// Per-object values for a custom-metrics request; objects without a
    /// series are left out, and none at all is an error.
    fn get_objects(
        &self,
        req: &ObjectRequest<'_>,
    ) -> impl Future<Output = Result<ObjectReading, ProviderError>> + Send;
}
