//! The adapter's own metrics, served on a separate plain-HTTP port: a
//! `prometheus` registry with the standard `process_*` families, the poll
//! cache's report and the scale-to-zero controller's families.

mod cache;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use http::StatusCode;
use prometheus::proto::MetricFamily;
use prometheus::{HistogramVec, IntCounterVec, IntGauge, Registry};
use tracing::error;

pub use cache::{CacheReport, KeyValue};

use crate::exposition::{self, Family, FamilyDoc};
use crate::scale_to_zero::report::Report;
use gpuscale_keda::Counts;

const REQUESTS: Family = Family::new(
    "gpuscale_adapter_requests_total",
    "API requests by API (external, custom), metric and HTTP code.",
    &["api", "metric", "code"],
);
const REQUEST_DURATION: Family = Family::new(
    "gpuscale_adapter_request_duration_seconds",
    "API request latency.",
    &["api", "metric", "code"],
);
const QUERIES: Family = Family::new(
    "gpuscale_adapter_prometheus_queries_total",
    "Prometheus queries by metric and result (ok, error, empty, nan, timeout).",
    &["metric", "result"],
);
const QUERY_DURATION: Family = Family::new(
    "gpuscale_adapter_prometheus_query_duration_seconds",
    "Prometheus query latency.",
    &["metric"],
);
const REFUSALS: Family = Family::new(
    "gpuscale_adapter_cache_refusals_total",
    "Requests for a new key refused (503) because the poll cache was full, by metric.",
    &["metric"],
);
const KEDA_REQUESTS: Family = Family::new(
    "gpuscale_adapter_keda_requests_total",
    "KEDA external-scaler calls by method and gRPC code.",
    &["method", "code"],
);
const KEDA_STREAMS: Family = Family::new(
    "gpuscale_adapter_keda_streams",
    "Open StreamIsActive (external-push) streams.",
    &[],
);
const BUILD_INFO: Family = Family::new(
    "gpuscale_adapter_build_info",
    "Build information.",
    &["version"],
);
const UP: Family = Family::new("gpuscale_adapter_up", "1 while the adapter runs.", &[]);

/// Families whose label order differs from the name order the crate uses.
const DECLARED: &[&Family] = &[&REQUESTS, &REQUEST_DURATION, &KEDA_REQUESTS];

const REQUEST_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];
const QUERY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const NONE: &[&str] = &[];

/// The `result` label of `gpuscale_adapter_prometheus_queries_total`: how
/// one Prometheus query ended (variants in label order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryResult {
    /// No series (an error or 0, as the metric's `empty` says).
    Empty,
    Error,
    /// A NaN or infinite value, never served.
    Nan,
    Ok,
    Timeout,
}

impl QueryResult {
    pub const ALL: [Self; 5] = [Self::Empty, Self::Error, Self::Nan, Self::Ok, Self::Timeout];

    pub fn label(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Error => "error",
            Self::Nan => "nan",
            Self::Ok => "ok",
            Self::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for QueryResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Counters, histograms and gauges of the adapter, in one registry.
pub struct SelfMetrics {
    registry: Registry,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    queries: IntCounterVec,
    query_duration: HistogramVec,
    refusals: IntCounterVec,
    keda_requests: IntCounterVec,
    keda_streams: IntGauge,
    /// The scale-to-zero controller's report, when it runs.
    scale_to_zero: OnceLock<Arc<Report>>,
}

/// Registration fails only on a name registered twice, a bug of ours.
fn register<C: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: C) -> C {
    if let Err(e) = r.register(Box::new(c.clone())) {
        error!(error = %e, "self-metric not registered");
    }
    c
}

impl Default for SelfMetrics {
    fn default() -> Self {
        let r = Registry::new();
        let build = register(&r, BUILD_INFO.gauge());
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        register(&r, UP.gauge()).with_label_values(NONE).set(1);
        #[cfg(target_os = "linux")]
        if let Err(e) = r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )) {
            error!(error = %e, "process metrics not registered");
        }
        Self {
            requests: register(&r, REQUESTS.counter()),
            request_duration: register(&r, REQUEST_DURATION.histogram(REQUEST_BUCKETS)),
            queries: register(&r, QUERIES.counter()),
            query_duration: register(&r, QUERY_DURATION.histogram(QUERY_BUCKETS)),
            refusals: register(&r, REFUSALS.counter()),
            keda_requests: register(&r, KEDA_REQUESTS.counter()),
            keda_streams: register(&r, KEDA_STREAMS.gauge()).with_label_values(NONE),
            scale_to_zero: OnceLock::new(),
            registry: r,
        }
    }
}

/// Times one API request from its start; observes when dropped, once
/// [`RequestTimer::done`] gave it the response's code (a request whose
/// client went away, or a health probe, counts nowhere).
pub struct RequestTimer<'a> {
    metrics: &'a SelfMetrics,
    api: &'static str,
    metric: String,
    start: Instant,
    code: Option<StatusCode>,
}

impl RequestTimer<'_> {
    pub fn done(mut self, code: StatusCode) {
        self.code = Some(code);
    }
}

impl Drop for RequestTimer<'_> {
    fn drop(&mut self) {
        if let Some(code) = self.code {
            let took = self.start.elapsed();
            self.metrics
                .observe(self.api, &self.metric, code.as_str(), took);
        }
    }
}

impl SelfMetrics {
    /// Starts timing one API request (`api` is `external` or `custom`;
    /// `metric` is "" for discovery and other paths).
    pub fn request_timer(&self, api: &'static str, metric: String) -> RequestTimer<'_> {
        RequestTimer {
            metrics: self,
            api,
            metric,
            start: Instant::now(),
            code: None,
        }
    }

    /// One API request that took `took`.
    pub fn request(&self, api: &'static str, metric: &str, code: u16, took: Duration) {
        match StatusCode::from_u16(code) {
            Ok(c) => self.observe(api, metric, c.as_str(), took),
            Err(_) => self.observe(api, metric, &code.to_string(), took),
        }
    }

    fn observe(&self, api: &str, metric: &str, code: &str, took: Duration) {
        let labels = [api, metric, code];
        self.requests.with_label_values(&labels).inc();
        let h = self.request_duration.with_label_values(&labels);
        h.observe(took.as_secs_f64());
    }

    /// One Prometheus query and how it ended.
    pub fn query(&self, metric: &str, result: QueryResult, took: Duration) {
        self.queries
            .with_label_values(&[metric, result.label()])
            .inc();
        let h = self.query_duration.with_label_values(&[metric]);
        h.observe(took.as_secs_f64());
    }

    /// Starts the refusal counter of each served metric at 0, so a rate
    /// over it (dashboard, alert) has a series before the first refusal.
    pub fn serving(&self, metrics: &[&str]) {
        for m in metrics {
            self.refusals.with_label_values(&[m]);
        }
    }

    /// A new poll-cache key refused because the cache is full.
    pub fn cache_refusal(&self, metric: &str) {
        self.refusals.with_label_values(&[metric]).inc();
    }

    /// Serve the controller's families and `/debug/scalers` from here.
    pub fn attach_scale_to_zero(&self, report: Arc<Report>) {
        if self.scale_to_zero.set(report.clone()).is_ok() {
            register(&self.registry, Report::collector(report));
        }
    }

    /// `/debug/scalers`: the controller's per-policy report (JSON).
    pub fn debug_scalers(&self) -> Option<String> {
        self.scale_to_zero.get().map(|r| r.debug_json())
    }

    /// Every family with what the poll cache reports.
    pub fn families(&self, cache: &CacheReport) -> Vec<MetricFamily> {
        let mut families = self.registry.gather();
        exposition::in_declared_order(&mut families, DECLARED);
        families.extend(cache::families(cache));
        families
    }

    /// The text exposition, with what the poll cache reports.
    pub fn render(&self, cache: &CacheReport) -> String {
        exposition::encode(self.families(cache))
    }
}

/// Every family `/metrics` serves (`process_*` and the controller's
/// included), read from a registry where each one has a series.
pub fn describe() -> Vec<FamilyDoc> {
    let m = SelfMetrics::default();
    m.request("external", "m", 200, Duration::ZERO);
    m.query("m", QueryResult::Ok, Duration::ZERO);
    m.serving(&["m"]);
    m.keda_request("IsActive", "OK");
    m.attach_scale_to_zero(Arc::new(Report::described()));
    let cache = CacheReport {
        ages: [("m".to_string(), 1.0)].into(),
        values: vec![KeyValue::default()],
        ..CacheReport::default()
    };
    let mut families = m.families(&cache);
    families.sort_by(|a, b| a.name().cmp(b.name()));
    families.iter().map(FamilyDoc::from).collect()
}

/// The KEDA scaler's calls and push streams, counted here.
impl Counts for SelfMetrics {
    fn keda_request(&self, method: &'static str, code: &'static str) {
        self.keda_requests.with_label_values(&[method, code]).inc();
    }

    fn keda_streams(&self, delta: i64) {
        self.keda_streams.add(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_described_once_with_its_series() {
        let docs = describe();
        let mut names: Vec<&str> = docs.iter().map(|d| d.name.as_str()).collect();
        names.dedup();
        assert_eq!(names.len(), docs.len(), "{names:?}");
        for name in [
            "gpuscale_adapter_requests_total",
            "gpuscale_scale_to_zero_waking_since_seconds",
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(names.contains(&name), "{name}: {names:?}");
        }
    }

    #[test]
    fn labels_keep_their_declared_order_and_codes_their_number() {
        let m = SelfMetrics::default();
        m.request_timer("custom", "q\"ueue".into())
            .done(StatusCode::SERVICE_UNAVAILABLE);
        m.request("external", "", 1000, Duration::from_millis(3));
        m.keda_request("GetMetrics", "UNAVAILABLE");
        let text = m.render(&CacheReport::default());
        for line in [
            r#"gpuscale_adapter_requests_total{api="custom",metric="q\"ueue",code="503"} 1"#,
            r#"gpuscale_adapter_requests_total{api="external",metric="",code="1000"} 1"#,
            r#"gpuscale_adapter_request_duration_seconds_bucket{api="external",metric="",code="1000",le="0.002"} 0"#,
            r#"gpuscale_adapter_request_duration_seconds_bucket{api="external",metric="",code="1000",le="0.005"} 1"#,
            r#"gpuscale_adapter_keda_requests_total{method="GetMetrics",code="UNAVAILABLE"} 1"#,
            "gpuscale_adapter_keda_streams 0",
            "gpuscale_adapter_up 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    #[test]
    fn keys_labelled_alike_are_told_apart_by_their_query() {
        let key = |query: &str, value| KeyValue {
            metric: "m".into(),
            namespace: "ns".into(),
            selector: "app=a…0123".into(),
            query: query.into(),
            value,
        };
        let cache = CacheReport {
            values: vec![key("q1", 1.0), key("q2", 2.0)],
            ..CacheReport::default()
        };
        let text = SelfMetrics::default().render(&cache);
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("gpuscale_adapter_metric_value{"))
            .collect();
        assert_eq!(series.len(), 2, "{text}");
        assert!(series.iter().any(|l| l.contains("selector=\"#")), "{text}");
    }
}
