//! Prometheus as the provider: an HTTP client for instant queries and a
//! poll cache that answers HPA requests from memory.

pub mod cache;
pub mod client;

use std::sync::Arc;

use crate::config::MetricsConfig;
use crate::provider::{Provider, ProviderError, Reading};
use crate::selector;

pub use cache::{CacheSettings, PollCache};
pub use client::{ClientSettings, PromClient, QueryError};

/// Serves the configured metrics from Prometheus through the poll cache.
pub struct PromProvider {
    config: Arc<MetricsConfig>,
    cache: Arc<PollCache>,
}

impl PromProvider {
    pub fn new(config: Arc<MetricsConfig>, cache: Arc<PollCache>) -> Self {
        Self { config, cache }
    }
}

impl Provider for PromProvider {
    fn metric_names(&self) -> Vec<String> {
        self.config
            .metrics()
            .iter()
            .map(|m| m.name.clone())
            .collect()
    }

    fn canonical_name(&self, metric: &str) -> Option<String> {
        self.config.get(metric).map(|m| m.name.clone())
    }

    async fn get(
        &self,
        metric: &str,
        namespace: &str,
        selector_text: &str,
    ) -> Result<Reading, ProviderError> {
        let def = self
            .config
            .get(metric)
            .ok_or_else(|| ProviderError::UnknownMetric(metric.to_string()))?;
        // The join on pod metadata happens here, in the template, so every
        // consumer of the provider (HPA, KEDA, custom metrics) gets it.
        let query = selector::parse(selector_text)
            .and_then(|reqs| def.render(namespace, &reqs))
            .map_err(|e| ProviderError::BadRequest(e.to_string()))?;
        let items = self.cache.get(def.clone(), query).await?;
        Ok(Reading {
            metric: def.name.clone(),
            items,
            window_secs: def.window.as_secs(),
        })
    }
}
