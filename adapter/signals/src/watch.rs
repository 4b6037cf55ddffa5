//! Reads that can be watched: a push stream (KEDA's `StreamIsActive`)
//! wakes after every re-read of its key instead of polling. The poll
//! cache implements it for the adapter; the KEDA scaler depends on this
//! trait, never on the cache.

use std::sync::Arc;

use crate::metric_def::MetricDef;
use crate::provider::{Provider, ProviderError, Reading};

/// A read and the signal of the next re-read.
pub struct Watched {
    pub reading: Result<Reading, ProviderError>,
    pub changes: tokio::sync::watch::Receiver<u64>,
}

/// A [`Provider`] whose reads can be checked up front and watched.
pub trait WatchProvider: Provider {
    /// The definition a request for `metric` in `namespace` with
    /// `selector` is served by, or why it can never be served.
    fn check(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Arc<MetricDef>, ProviderError>;
    /// Like [`Provider::get`], plus a receiver that changes after every
    /// re-read of the key. `Err` for a request that can never be served
    /// (unknown metric, bad selector or namespace) and for a new key while
    /// the cache is full (`Unavailable`).
    fn watch(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Watched, ProviderError>> + Send;
}
