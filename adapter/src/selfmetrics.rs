//! The adapter's own metrics, served on a separate plain-HTTP port.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Names and kinds, as documented in docs/adapter.md.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "gpuscale_adapter_requests_total",
        "counter",
        "api,metric,code",
    ),
    (
        "gpuscale_adapter_request_duration_seconds",
        "histogram",
        "api,metric,code",
    ),
    (
        "gpuscale_adapter_prometheus_queries_total",
        "counter",
        "metric,result",
    ),
    (
        "gpuscale_adapter_prometheus_query_duration_seconds",
        "histogram",
        "metric",
    ),
    (
        "gpuscale_adapter_metric_value",
        "gauge",
        "metric,request_namespace,selector",
    ),
    ("gpuscale_adapter_metric_age_seconds", "gauge", "metric"),
    ("gpuscale_adapter_cached_queries", "gauge", ""),
    ("gpuscale_adapter_max_cached_queries", "gauge", ""),
    ("gpuscale_adapter_cache_refusals_total", "counter", "metric"),
    ("gpuscale_adapter_poll_interval_seconds", "gauge", ""),
    (
        "gpuscale_adapter_keda_requests_total",
        "counter",
        "method,code",
    ),
    ("gpuscale_adapter_keda_streams", "gauge", ""),
    ("gpuscale_adapter_build_info", "gauge", "version"),
    ("gpuscale_adapter_up", "gauge", ""),
];

const REQUEST_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];
const QUERY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (i, b) in buckets.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(&'static str, String, u16), (u64, Histogram)>,
    queries: BTreeMap<(String, QueryResult), u64>,
    query_durations: BTreeMap<String, Histogram>,
    refusals: BTreeMap<String, u64>,
    keda_requests: BTreeMap<(&'static str, &'static str), u64>,
    keda_streams: i64,
}

/// One cached key's last good value (the sum of its items).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyValue {
    pub metric: String,
    pub namespace: String,
    /// The selector as a label value (shortened when long).
    pub selector: String,
    /// The key's query, to tell apart two keys whose labels would collide.
    pub query: String,
    pub value: f64,
}

/// What the poll cache reports at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheReport {
    /// Per metric, the age in seconds of the oldest cached good value.
    pub ages: BTreeMap<String, f64>,
    pub values: Vec<KeyValue>,
    pub keys: usize,
    pub max_keys: usize,
    /// The poll interval in use (stretched when the query budget needs it).
    pub poll_interval_secs: f64,
}

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

/// Counters, histograms and gauges of the adapter.
#[derive(Default)]
pub struct SelfMetrics {
    inner: Mutex<Inner>,
    /// The scale-to-zero controller's report, when it runs.
    scale_to_zero: std::sync::OnceLock<std::sync::Arc<crate::scale_to_zero::report::Report>>,
}

impl SelfMetrics {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    /// One API request (`api` is `external` or `custom`; `metric` is "" for
    /// discovery and other paths).
    pub fn request(&self, api: &'static str, metric: &str, code: u16, took: Duration) {
        self.with(|i| {
            let e = i
                .requests
                .entry((api, metric.to_string(), code))
                .or_default();
            e.0 += 1;
            e.1.observe(REQUEST_BUCKETS, took.as_secs_f64());
        });
    }

    /// One Prometheus query and how it ended.
    pub fn query(&self, metric: &str, result: QueryResult, took: Duration) {
        self.with(|i| {
            *i.queries.entry((metric.to_string(), result)).or_default() += 1;
            i.query_durations
                .entry(metric.to_string())
                .or_default()
                .observe(QUERY_BUCKETS, took.as_secs_f64());
        });
    }

    /// Starts the refusal counter of each served metric at 0, so a rate
    /// over it (dashboard, alert) has a series before the first refusal.
    pub fn serving(&self, metrics: &[&str]) {
        self.with(|i| {
            for m in metrics {
                i.refusals.entry((*m).to_string()).or_default();
            }
        });
    }

    /// A new poll-cache key refused because the cache is full.
    pub fn cache_refusal(&self, metric: &str) {
        self.with(|i| *i.refusals.entry(metric.to_string()).or_default() += 1);
    }

    /// One KEDA external-scaler call by method and gRPC code name.
    pub fn keda_request(&self, method: &'static str, code: &'static str) {
        self.with(|i| *i.keda_requests.entry((method, code)).or_default() += 1);
    }

    /// A push stream opened (+1) or closed (-1).
    pub fn keda_streams(&self, delta: i64) {
        self.with(|i| i.keda_streams += delta);
    }

    /// The text exposition, with what the poll cache reports.
    pub fn render(&self, cache: &CacheReport) -> String {
        let mut o = String::new();
        let _ = self.render_into(&mut o, cache);
        if let Some(r) = self.scale_to_zero.get() {
            o.push_str(&r.render());
        }
        o
    }

    /// Serve the controller's families and `/debug/scalers` from here.
    pub fn attach_scale_to_zero(
        &self,
        report: std::sync::Arc<crate::scale_to_zero::report::Report>,
    ) {
        let _ = self.scale_to_zero.set(report);
    }

    /// `/debug/scalers`: the controller's per-policy report (JSON).
    pub fn debug_scalers(&self) -> Option<String> {
        self.scale_to_zero.get().map(|r| r.debug_json())
    }

    fn render_into(&self, o: &mut String, cache: &CacheReport) -> std::fmt::Result {
        let i = self.with(|i| {
            (
                i.requests.clone(),
                i.queries.clone(),
                i.query_durations.clone(),
                i.refusals.clone(),
                i.keda_requests.clone(),
                i.keda_streams,
            )
        });
        let (requests, queries, qdur, refusals, keda, streams) = i;
        head(
            o,
            "gpuscale_adapter_requests_total",
            "counter",
            "API requests by API (external, custom), metric and HTTP code.",
        )?;
        for ((a, m, c), (n, _)) in &requests {
            writeln!(
                o,
                "gpuscale_adapter_requests_total{{api=\"{a}\",metric=\"{}\",code=\"{c}\"}} {n}",
                esc(m)
            )?;
        }
        head(
            o,
            "gpuscale_adapter_request_duration_seconds",
            "histogram",
            "API request latency.",
        )?;
        for ((a, m, c), (_, h)) in &requests {
            histo(
                o,
                "gpuscale_adapter_request_duration_seconds",
                &format!("api=\"{a}\",metric=\"{}\",code=\"{c}\"", esc(m)),
                REQUEST_BUCKETS,
                h,
            )?;
        }
        head(
            o,
            "gpuscale_adapter_prometheus_queries_total",
            "counter",
            "Prometheus queries by metric and result (ok, error, empty, nan, timeout).",
        )?;
        for ((m, r), n) in &queries {
            writeln!(
                o,
                "gpuscale_adapter_prometheus_queries_total{{metric=\"{}\",result=\"{r}\"}} {n}",
                esc(m)
            )?;
        }
        head(
            o,
            "gpuscale_adapter_prometheus_query_duration_seconds",
            "histogram",
            "Prometheus query latency.",
        )?;
        for (m, h) in &qdur {
            histo(
                o,
                "gpuscale_adapter_prometheus_query_duration_seconds",
                &format!("metric=\"{}\"", esc(m)),
                QUERY_BUCKETS,
                h,
            )?;
        }
        render_cache(o, cache, &refusals)?;
        head(
            o,
            "gpuscale_adapter_keda_requests_total",
            "counter",
            "KEDA external-scaler calls by method and gRPC code.",
        )?;
        for ((m, c), n) in &keda {
            writeln!(
                o,
                "gpuscale_adapter_keda_requests_total{{method=\"{m}\",code=\"{c}\"}} {n}"
            )?;
        }
        head(
            o,
            "gpuscale_adapter_keda_streams",
            "gauge",
            "Open StreamIsActive (external-push) streams.",
        )?;
        writeln!(o, "gpuscale_adapter_keda_streams {streams}")?;
        head(
            o,
            "gpuscale_adapter_build_info",
            "gauge",
            "Build information.",
        )?;
        writeln!(
            o,
            "gpuscale_adapter_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )?;
        head(
            o,
            "gpuscale_adapter_up",
            "gauge",
            "1 while the adapter runs.",
        )?;
        writeln!(o, "gpuscale_adapter_up 1")
    }
}

/// The poll cache's families: per-key values, ages, fill and pacing.
fn render_cache(
    o: &mut String,
    c: &CacheReport,
    refusals: &BTreeMap<String, u64>,
) -> std::fmt::Result {
    head(
        o,
        "gpuscale_adapter_metric_value",
        "gauge",
        "Last value read per cached key (sum of its items), by metric, the request's namespace and selector.",
    )?;
    let mut seen = std::collections::BTreeSet::new();
    let mut values: Vec<&KeyValue> = c.values.iter().collect();
    values.sort_by(|a, b| {
        (&a.metric, &a.namespace, &a.selector).cmp(&(&b.metric, &b.namespace, &b.selector))
    });
    for k in values {
        // Two keys labelled alike (a shortened selector): the later one is
        // told apart by its query's hash rather than dropped.
        let mut sel = k.selector.clone();
        if !seen.insert((&k.metric, &k.namespace, k.selector.clone())) {
            sel = format!("#{:016x}", crate::hash::fnv1a(k.query.as_bytes()));
        }
        writeln!(
            o,
            "gpuscale_adapter_metric_value{{metric=\"{}\",request_namespace=\"{}\",selector=\"{}\"}} {}",
            esc(&k.metric),
            esc(&k.namespace),
            esc(&sel),
            num(k.value)
        )?;
    }
    head(
        o,
        "gpuscale_adapter_metric_age_seconds",
        "gauge",
        "Age of the oldest cached value per metric.",
    )?;
    for (m, v) in &c.ages {
        writeln!(
            o,
            "gpuscale_adapter_metric_age_seconds{{metric=\"{}\"}} {}",
            esc(m),
            num(*v)
        )?;
    }
    head(
        o,
        "gpuscale_adapter_cached_queries",
        "gauge",
        "Keys (metric, namespace, selector) in the poll cache.",
    )?;
    writeln!(o, "gpuscale_adapter_cached_queries {}", c.keys)?;
    head(
        o,
        "gpuscale_adapter_max_cached_queries",
        "gauge",
        "Keys the poll cache holds at most (--max-cached-queries).",
    )?;
    writeln!(o, "gpuscale_adapter_max_cached_queries {}", c.max_keys)?;
    head(
        o,
        "gpuscale_adapter_cache_refusals_total",
        "counter",
        "Requests for a new key refused (503) because the poll cache was full, by metric.",
    )?;
    for (m, n) in refusals {
        writeln!(
            o,
            "gpuscale_adapter_cache_refusals_total{{metric=\"{}\"}} {n}",
            esc(m)
        )?;
    }
    head(
        o,
        "gpuscale_adapter_poll_interval_seconds",
        "gauge",
        "Poll interval in use: --poll-interval, stretched to keys / --prometheus-query-budget when that is longer.",
    )?;
    writeln!(
        o,
        "gpuscale_adapter_poll_interval_seconds {}",
        num(c.poll_interval_secs)
    )
}

fn head(o: &mut String, name: &str, kind: &str, help: &str) -> std::fmt::Result {
    writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}")
}

fn histo(
    o: &mut String,
    name: &str,
    labels: &str,
    buckets: &[f64],
    h: &Histogram,
) -> std::fmt::Result {
    for (i, b) in buckets.iter().enumerate() {
        writeln!(
            o,
            "{name}_bucket{{{labels},le=\"{b}\"}} {}",
            h.counts.get(i).copied().unwrap_or(0)
        )?;
    }
    writeln!(o, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count)?;
    writeln!(o, "{name}_sum{{{labels}}} {}", num(h.sum))?;
    writeln!(o, "{name}_count{{{labels}}} {}", h.count)
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
