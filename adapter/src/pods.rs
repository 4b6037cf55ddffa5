//! Pod selector → pod names, for per-pod custom metrics. Each (namespace,
//! selector) an HPA asked for recently is re-listed every poll interval in
//! the background, so requests are answered from memory; a miss lists once
//! however many requests wait for it. A failed re-list keeps the last list.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::auth::KubeAuthApi;
use crate::auth::kube::KubeError;
use crate::limits::{MAX_POD_SELECTORS, excerpt};
use crate::provider::ProviderError;

type Names = Arc<Vec<String>>;

struct Entry {
    first: OnceCell<()>,
    state: Mutex<Option<Result<Names, ProviderError>>>,
    last_requested: Mutex<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pod-list cache; share it through an `Arc`.
pub struct PodCache {
    kube: Arc<KubeAuthApi>,
    interval: Duration,
    idle_expiry: Duration,
    entries: Mutex<HashMap<(String, String), Arc<Entry>>>,
}

impl PodCache {
    pub fn new(kube: Arc<KubeAuthApi>, interval: Duration, idle_expiry: Duration) -> Self {
        Self {
            kube,
            interval,
            idle_expiry,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Names of the live pods in `namespace` matching `selector` (canonical
    /// text, already validated).
    pub async fn names(&self, namespace: &str, selector: &str) -> Result<Names, ProviderError> {
        let key = (namespace.to_string(), selector.to_string());
        let entry = {
            let mut map = lock(&self.entries);
            if !map.contains_key(&key) && map.len() >= MAX_POD_SELECTORS {
                return Err(ProviderError::Unavailable(format!(
                    "the adapter lists pods for {MAX_POD_SELECTORS} (namespace, selector) pairs at most; \
                     a new one is refused until idle ones expire (--idle-expiry)"
                )));
            }
            map.entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Entry {
                        first: OnceCell::new(),
                        state: Mutex::new(None),
                        last_requested: Mutex::new(Instant::now()),
                    })
                })
                .clone()
        };
        *lock(&entry.last_requested) = Instant::now();
        entry.first.get_or_init(|| self.refresh(&key, &entry)).await;
        lock(&entry.state)
            .clone()
            .unwrap_or_else(|| Err(ProviderError::Unavailable("pod list not read yet".into())))
    }

    async fn refresh(&self, (ns, selector): &(String, String), e: &Entry) {
        let start = Instant::now();
        let res = self.kube.pod_names(ns, selector).await;
        tracing::debug!(namespace = %ns, selector = %selector, took_us = start.elapsed().as_micros() as u64, "pod list");
        let mut st = lock(&e.state);
        match res {
            Ok(names) => *st = Some(Ok(Arc::new(names))),
            Err(err) => {
                tracing::warn!(namespace = %ns, selector = %selector, error = %err, "pod list failed");
                let keep = matches!(&*st, Some(Ok(_))) && !is_bad_request(&err);
                if !keep {
                    *st = Some(Err(classify(ns, selector, &err)));
                }
            }
        }
    }

    /// Re-list every recently requested selector each interval; drop idle ones.
    pub async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let due: Vec<((String, String), Arc<Entry>)> = {
                let mut map = lock(&self.entries);
                map.retain(|_, e| lock(&e.last_requested).elapsed() < self.idle_expiry);
                map.iter()
                    .filter(|(_, e)| e.first.initialized())
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect()
            };
            let start = Instant::now();
            for (key, e) in &due {
                self.refresh(key, e).await;
            }
            if !due.is_empty() {
                tracing::debug!(
                    lists = due.len(),
                    took_ms = start.elapsed().as_millis() as u64,
                    "pod lists refreshed"
                );
            }
        }
    }
}

fn is_bad_request(e: &KubeError) -> bool {
    matches!(e, KubeError::Api(kube::Error::Api(r)) if r.code == 400)
}

fn classify(ns: &str, selector: &str, e: &KubeError) -> ProviderError {
    if is_bad_request(e) {
        ProviderError::BadRequest(format!("pod selector {}: {e}", excerpt(selector)))
    } else {
        ProviderError::Unavailable(format!(
            "listing pods in {ns:?} with selector {}: {e}",
            excerpt(selector)
        ))
    }
}
