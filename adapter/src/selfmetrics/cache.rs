//! What the poll cache reports at scrape time, and its families.

use std::collections::{BTreeMap, BTreeSet};

use prometheus::proto::{MetricFamily, MetricType};

use crate::exposition::Family;

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
    /// Keys counted against --max-cached-queries.
    pub keys: usize,
    pub max_keys: usize,
    /// Keys held only by push streams (their own budget).
    pub stream_keys: usize,
    /// Bytes of the polls' keys and of the streams' keys (estimated).
    pub bytes: usize,
    pub stream_bytes: usize,
    pub max_bytes: usize,
    /// The poll interval in use (stretched when the query budget needs it).
    pub poll_interval_secs: f64,
}

pub const METRIC_VALUE: Family = Family::new(
    "gpuscale_adapter_metric_value",
    "Last value read per cached key (sum of its items), by metric, the request's namespace and selector.",
    &["metric", "request_namespace", "selector"],
);
pub const METRIC_AGE: Family = Family::new(
    "gpuscale_adapter_metric_age_seconds",
    "Age of the oldest cached value per metric.",
    &["metric"],
);
pub const CACHED: Family = Family::new(
    "gpuscale_adapter_cached_queries",
    "Keys (metric, namespace, selector) in the poll cache.",
    &[],
);
pub const MAX_CACHED: Family = Family::new(
    "gpuscale_adapter_max_cached_queries",
    "Keys the poll cache holds at most (--max-cached-queries).",
    &[],
);
pub const CACHED_STREAM: Family = Family::new(
    "gpuscale_adapter_cached_stream_queries",
    "Keys in the poll cache that only KEDA push streams hold (their own budget, --keda-max-stream-keys).",
    &[],
);
pub const CACHED_BYTES: Family = Family::new(
    "gpuscale_adapter_cached_bytes",
    "Bytes the poll cache holds (keys and values, estimated), by pool: poll (HPAs and other polls) or stream (keys only push streams hold).",
    &["pool"],
);
pub const MAX_CACHED_BYTES: Family = Family::new(
    "gpuscale_adapter_max_cached_bytes",
    "Bytes the poll cache holds at most, both pools together (--max-cached-bytes).",
    &[],
);
pub const POLL_INTERVAL: Family = Family::new(
    "gpuscale_adapter_poll_interval_seconds",
    "Poll interval in use: --poll-interval, stretched to keys / --prometheus-query-budget when that is longer.",
    &[],
);

/// The poll cache's families: per-key values, ages, fill and pacing.
pub fn families(c: &CacheReport) -> Vec<MetricFamily> {
    let mut ages = METRIC_AGE.snapshot(MetricType::GAUGE);
    for (m, v) in &c.ages {
        ages.push(&[m], *v);
    }
    let mut bytes = CACHED_BYTES.snapshot(MetricType::GAUGE);
    bytes.push(&["poll"], c.bytes as f64);
    bytes.push(&["stream"], c.stream_bytes as f64);
    let mut out = vec![values(&c.values), ages.done(), bytes.done()];
    for (family, v) in [
        (CACHED, c.keys as f64),
        (MAX_CACHED, c.max_keys as f64),
        (CACHED_STREAM, c.stream_keys as f64),
        (MAX_CACHED_BYTES, c.max_bytes as f64),
        (POLL_INTERVAL, c.poll_interval_secs),
    ] {
        let mut f = family.snapshot(MetricType::GAUGE);
        f.push(&[], v);
        out.push(f.done());
    }
    out
}

fn values(keys: &[KeyValue]) -> MetricFamily {
    let mut keys: Vec<&KeyValue> = keys.iter().collect();
    keys.sort_by(|a, b| {
        (&a.metric, &a.namespace, &a.selector).cmp(&(&b.metric, &b.namespace, &b.selector))
    });
    let mut f = METRIC_VALUE.snapshot(MetricType::GAUGE);
    let mut seen = BTreeSet::new();
    for k in keys {
        // Two keys labelled alike (a shortened selector): the later one is
        // told apart by its query's hash rather than dropped.
        let fresh = seen.insert((&k.metric, &k.namespace, k.selector.as_str()));
        let hashed = (!fresh).then(|| format!("#{:016x}", crate::hash::fnv1a(k.query.as_bytes())));
        let selector = hashed.as_deref().unwrap_or(&k.selector);
        f.push(&[&k.metric, &k.namespace, selector], k.value);
    }
    f.done()
}
