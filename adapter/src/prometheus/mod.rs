//! Prometheus as the provider: an HTTP client for instant queries and a
//! poll cache that answers HPA requests from memory.

pub mod batch;
pub mod budget;
pub mod cache;
pub mod client;
pub mod join;
pub mod matchers;
mod objects;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::MetricsConfig;
use crate::metric_def::{
    DEFAULT_ACTIVATION, DEFAULT_FRESHNESS, DEFAULT_WINDOW, EmptyPolicy, MetricDef,
};
use crate::objects::ObjectKind;
use crate::pods::PodCache;
use crate::provider::{
    MetricValue, ObjectReading, ObjectRequest, Provider, ProviderError, QUERY_METRIC, Reading,
};
use crate::selector;
use crate::watch::{WatchProvider, Watched};

pub use cache::{CacheSettings, Identity, PollCache};
pub use client::{ClientSettings, PromClient, QueryError};

/// Serves the configured metrics from Prometheus through the poll cache.
pub struct PromProvider {
    config: Arc<MetricsConfig>,
    cache: Arc<PollCache>,
    pods: Option<Arc<PodCache>>,
    /// Resolved (metric, namespace, selector) → definition and query: the
    /// same few thousand keys are asked for again and again (the HPA every
    /// 15 s, the scale-to-zero controller every few seconds), and parsing
    /// and rendering each time was most of a cached read's cost.
    resolved: Mutex<Memo>,
}

/// Resolutions kept at most, and their bytes (keys and queries) at most;
/// past either the memo starts afresh (a flood of distinct selectors costs
/// a parse each, as without the memo). Only short resolutions are kept:
/// the hot keys (an HPA's selector) are short, and a long selector parses
/// in microseconds, so memory goes to the poll cache's budget instead.
const RESOLVED_MAX: usize = 10_000;
const RESOLVED_MAX_BYTES: usize = 4 * 1024 * 1024;
const RESOLVED_MAX_ENTRY: usize = 2 * 1024;

#[derive(Default)]
struct Memo {
    map: HashMap<String, (Arc<MetricDef>, String)>,
    bytes: usize,
}

impl PromProvider {
    pub fn new(config: Arc<MetricsConfig>, cache: Arc<PollCache>) -> Self {
        Self {
            config,
            cache,
            pods: None,
            resolved: Mutex::new(Memo::default()),
        }
    }

    /// Resolve `pods/*` selectors through this pod-list cache.
    pub fn with_pods(mut self, pods: Arc<PodCache>) -> Self {
        self.pods = Some(pods);
        self
    }

    /// The definition and query of (metric, namespace, selector), memoized.
    fn resolve(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<(Arc<MetricDef>, String), ProviderError> {
        let key = format!("{metric}\0{namespace}\0{selector_text}");
        let lock = || self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = lock().map.get(&key) {
            return Ok(hit.clone());
        }
        let got = self.resolve_uncached(metric, namespace, selector_text)?;
        let cost = key.len() + got.1.len();
        if cost > RESOLVED_MAX_ENTRY {
            return Ok(got);
        }
        let mut memo = lock();
        if memo.map.len() >= RESOLVED_MAX || memo.bytes + cost > RESOLVED_MAX_BYTES {
            memo.map.clear();
            memo.bytes = 0;
        }
        memo.bytes += cost;
        memo.map.insert(key, got.clone());
        Ok(got)
    }

    fn resolve_uncached(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<(Arc<MetricDef>, String), ProviderError> {
        let def = self
            .config
            .get(metric)
            .filter(|m| m.external())
            .ok_or_else(|| ProviderError::UnknownMetric(metric.to_string()))?;
        // The join on pod metadata happens here, in the template, so every
        // consumer of the provider (HPA, KEDA, custom metrics) gets it.
        let query = selector::parse(selector_text)
            .and_then(|reqs| join::render(def, namespace, &reqs))
            .map_err(|e| ProviderError::BadRequest(e.to_string()))?;
        Ok((def.clone(), query))
    }

    fn reading(def: &MetricDef, items: Vec<MetricValue>) -> Reading {
        Reading {
            metric: def.name.clone(),
            items,
            window_secs: def.window.as_secs(),
        }
    }
}

fn identity(namespace: &str, selector: &str) -> Identity {
    Identity {
        namespace: namespace.to_string(),
        selector: selector.to_string(),
    }
}

/// An ad-hoc query as a metric with the config's defaults (`empty: error`,
/// so no series is unknown, never zero). Its cache key is the rendered
/// query, so equal queries share one poll however many policies ask.
fn query_def(template: &str) -> MetricDef {
    MetricDef {
        name: QUERY_METRIC.into(),
        query: template.into(),
        empty: EmptyPolicy::Error,
        freshness: DEFAULT_FRESHNESS,
        window: DEFAULT_WINDOW,
        description: "a ScaleToZeroPolicy's query".into(),
        activation: DEFAULT_ACTIVATION,
        objects: Default::default(),
        pod_metadata: Default::default(),
        namespace_label: crate::metric_def::DEFAULT_NAMESPACE_LABEL.into(),
    }
}

/// KEDA's push streams wake on the poll cache's re-reads.
impl WatchProvider for PromProvider {
    fn check(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<Arc<MetricDef>, ProviderError> {
        self.resolve(metric, namespace, selector_text)
            .map(|(d, _)| d)
    }

    async fn watch(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<Watched, ProviderError> {
        let (def, query) = self.resolve(metric, namespace, selector_text)?;
        let id = identity(namespace, selector_text);
        let (items, changes) = self.cache.get_watched(def.clone(), query, id).await?;
        Ok(Watched {
            reading: items.map(|items| Self::reading(&def, items)),
            changes,
        })
    }
}

impl Provider for PromProvider {
    fn metric_names(&self) -> Vec<String> {
        self.config
            .metrics()
            .iter()
            .filter(|m| m.external())
            .map(|m| m.name.clone())
            .collect()
    }

    fn canonical_name(&self, metric: &str) -> Option<String> {
        self.config.get(metric).map(|m| m.name.clone())
    }

    fn object_metrics(&self) -> Vec<(ObjectKind, String)> {
        let mut out: Vec<(ObjectKind, String)> = self
            .config
            .metrics()
            .iter()
            .flat_map(|m| m.objects.keys().map(|k| (*k, m.name.clone())))
            .collect();
        out.sort();
        out
    }

    async fn get_objects(&self, req: &ObjectRequest<'_>) -> Result<ObjectReading, ProviderError> {
        objects::read(&self.config, &self.cache, self.pods.as_deref(), req).await
    }

    async fn get_query(
        &self,
        template: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<Reading, ProviderError> {
        let problems = crate::config::template_problems(template);
        if !problems.is_empty() {
            return Err(ProviderError::BadRequest(problems.join("; ")));
        }
        let def = Arc::new(query_def(template));
        let query = selector::parse(selector_text)
            .and_then(|reqs| join::render(&def, namespace, &reqs))
            .map_err(|e| ProviderError::BadRequest(e.to_string()))?;
        let id = identity(namespace, selector_text);
        let items = self.cache.get(def.clone(), query, id).await?;
        Ok(Self::reading(&def, items))
    }

    async fn get(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<Reading, ProviderError> {
        let (def, query) = self.resolve(metric, namespace, selector_text)?;
        let id = identity(namespace, selector_text);
        let items = self.cache.get(def.clone(), query, id).await?;
        Ok(Self::reading(&def, items))
    }
}
