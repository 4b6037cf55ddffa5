//! The poll cache: every (metric, query) that the HPA asked for recently is
//! re-read in the background, so requests are answered from memory. A miss
//! runs one query however many requests wait for it (single-flight).
//!
//! Rules (documented in docs/adapter.md):
//! - a definitive answer (values, empty, NaN/Inf) replaces the cached state;
//! - a failed read (timeout, transport, HTTP error) keeps the last good value
//!   until it is older than the metric's freshness bound, then the error is served;
//! - an empty result is an error unless the metric's policy is `zero`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{OnceCell, Semaphore, watch};
use tokio::task::JoinSet;

use super::client::{PromClient, QueryError};
use crate::metric_def::{EmptyPolicy, MetricDef};
use crate::provider::{MetricValue, ProviderError};
use crate::selfmetrics::{QueryResult, SelfMetrics};

/// Poller settings.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// How often every recently requested key is re-read.
    pub poll_interval: Duration,
    /// A key not requested for this long is dropped.
    pub idle_expiry: Duration,
    /// Re-reads in flight at once (the client bounds queries overall too).
    pub refresh_concurrency: usize,
}

struct Good {
    items: Vec<MetricValue>,
    at: Instant,
}

#[derive(Default)]
struct State {
    good: Option<Good>,
    error: Option<String>,
}

struct Entry {
    def: Arc<MetricDef>,
    query: String,
    first: OnceCell<()>,
    state: Mutex<State>,
    last_requested: Mutex<Instant>,
    refreshing: AtomicBool,
    /// Bumped after every read, so push streams wake when the value may have changed.
    version: watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Key = (String, String);

/// The cache; share it through an `Arc`.
pub struct PollCache {
    client: Arc<PromClient>,
    metrics: Arc<SelfMetrics>,
    settings: CacheSettings,
    entries: Mutex<HashMap<Key, Arc<Entry>>>,
}

impl PollCache {
    pub fn new(
        client: Arc<PromClient>,
        metrics: Arc<SelfMetrics>,
        settings: CacheSettings,
    ) -> Self {
        Self {
            client,
            metrics,
            settings,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Values for `query`, from memory when possible.
    pub async fn get(
        &self,
        def: Arc<MetricDef>,
        query: String,
    ) -> Result<Vec<MetricValue>, ProviderError> {
        let entry = self.entry(def, query);
        entry.first.get_or_init(|| self.refresh(&entry)).await;
        answer(&entry)
    }

    /// Like [`PollCache::get`], plus a receiver that changes after each
    /// re-read of the key (for push streams).
    pub async fn get_watched(
        &self,
        def: Arc<MetricDef>,
        query: String,
    ) -> (
        Result<Vec<MetricValue>, ProviderError>,
        watch::Receiver<u64>,
    ) {
        let entry = self.entry(def, query);
        let rx = entry.version.subscribe();
        entry.first.get_or_init(|| self.refresh(&entry)).await;
        (answer(&entry), rx)
    }

    /// The entry of a key (created on first use), marked as requested now.
    fn entry(&self, def: Arc<MetricDef>, query: String) -> Arc<Entry> {
        let entry = {
            let mut map = lock(&self.entries);
            let key = (def.name.clone(), query);
            match map.get(&key) {
                Some(e) => e.clone(),
                None => {
                    let e = Arc::new(Entry {
                        def,
                        query: key.1.clone(),
                        first: OnceCell::new(),
                        state: Mutex::new(State::default()),
                        last_requested: Mutex::new(Instant::now()),
                        refreshing: AtomicBool::new(false),
                        version: watch::Sender::new(0),
                    });
                    map.insert(key, e.clone());
                    e
                }
            }
        };
        *lock(&entry.last_requested) = Instant::now();
        entry
    }

    async fn refresh(&self, e: &Entry) {
        if e.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let start = Instant::now();
        let res = self.client.query(&e.query).await;
        let took = start.elapsed();
        let name = &e.def.name;
        let now = unix_now();
        let mut st = lock(&e.state);
        let outcome = match res {
            Ok(series) if series.is_empty() => match e.def.empty {
                EmptyPolicy::Zero => {
                    st.good = Some(Good {
                        items: vec![MetricValue {
                            labels: BTreeMap::new(),
                            value: 0.0,
                            timestamp: now,
                        }],
                        at: Instant::now(),
                    });
                    st.error = None;
                    self.metrics.value(name, 0.0);
                    QueryResult::Empty
                }
                EmptyPolicy::Error => {
                    st.good = None;
                    st.error = Some(format!(
                        "metric {name}: the query returned no series (empty results are errors for this metric)"
                    ));
                    QueryResult::Empty
                }
            },
            Ok(series) if series.iter().any(|s| !s.value.is_finite()) => {
                st.good = None;
                st.error = Some(format!(
                    "metric {name}: the query returned a NaN or infinite value"
                ));
                QueryResult::Nan
            }
            Ok(series) => {
                let sum = series.iter().map(|s| s.value).sum();
                self.metrics.value(name, sum);
                st.good = Some(Good {
                    items: series
                        .into_iter()
                        .map(|s| MetricValue {
                            labels: s.labels,
                            value: s.value,
                            timestamp: now,
                        })
                        .collect(),
                    at: Instant::now(),
                });
                st.error = None;
                QueryResult::Ok
            }
            Err(err) => {
                tracing::warn!(metric = %name, error = %err, "prometheus query failed");
                st.error = Some(format!("metric {name}: {err}"));
                if matches!(err, QueryError::Timeout(_)) {
                    QueryResult::Timeout
                } else {
                    QueryResult::Error
                }
            }
        };
        drop(st);
        self.metrics.query(name, outcome, took);
        e.refreshing.store(false, Ordering::Release);
        e.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Re-read every recently requested key each `poll_interval`; drop idle keys.
    pub async fn run_poller(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.settings.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let due: Vec<Arc<Entry>> = {
                let mut map = lock(&self.entries);
                let idle = self.settings.idle_expiry;
                map.retain(|_, e| lock(&e.last_requested).elapsed() < idle);
                map.values()
                    .filter(|e| e.first.initialized())
                    .cloned()
                    .collect()
            };
            self.clone().refresh_round(due).await;
        }
    }

    /// Re-read `due`, the starts spread over most of a poll interval so the
    /// work (here and in Prometheus) does not arrive as one burst.
    async fn refresh_round(self: Arc<Self>, due: Vec<Arc<Entry>>) {
        if due.is_empty() {
            return;
        }
        let spread = self.settings.poll_interval.mul_f64(0.8);
        let spacing = (spread / due.len() as u32).max(Duration::from_micros(50));
        let mut pace = tokio::time::interval(spacing);
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let permits = Arc::new(Semaphore::new(self.settings.refresh_concurrency.max(1)));
        let mut running = JoinSet::new();
        for e in due {
            pace.tick().await;
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let this = self.clone();
            running.spawn(async move {
                this.refresh(&e).await;
                drop(permit);
            });
        }
        while running.join_next().await.is_some() {}
    }

    /// Number of cached keys.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Per metric, the age in seconds of the oldest cached good value.
    pub fn ages(&self) -> BTreeMap<String, f64> {
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for e in lock(&self.entries).values() {
            if let Some(g) = &lock(&e.state).good {
                let age = g.at.elapsed().as_secs_f64();
                let slot = out.entry(e.def.name.clone()).or_insert(0.0);
                *slot = slot.max(age);
            }
        }
        out
    }
}

fn answer(e: &Entry) -> Result<Vec<MetricValue>, ProviderError> {
    let st = lock(&e.state);
    let fresh = e.def.freshness;
    match (&st.good, &st.error) {
        (Some(g), _) if g.at.elapsed() <= fresh => Ok(g.items.clone()),
        (_, Some(err)) => Err(ProviderError::Unavailable(err.clone())),
        (Some(g), None) => Err(ProviderError::Unavailable(format!(
            "metric {}: the last value is {}s old, older than its freshness bound of {}s",
            e.def.name,
            g.at.elapsed().as_secs(),
            fresh.as_secs()
        ))),
        (None, None) => Err(ProviderError::Unavailable(format!(
            "metric {}: no value read yet",
            e.def.name
        ))),
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
