//! The poll cache: every (metric, query) that the HPA asked for recently is
//! re-read in the background, so requests are answered from memory. A miss
//! runs one query however many requests wait for it (single-flight).
//!
//! Rules (documented in docs/adapter.md):
//! - a definitive answer (values, empty, NaN/Inf) replaces the cached state;
//! - a failed read (timeout, transport, HTTP error) keeps the last good value
//!   until it is older than the metric's freshness bound, then the error is served;
//! - an empty result is an error unless the metric's policy is `zero`;
//! - at most `max_keys` keys and `max_bytes` bytes are held (keys only push
//!   streams hold have their own budget, see [`super::budget`]): a new key
//!   beyond is refused (503), keys already held keep being served;
//! - re-reads stay within `query_budget` per second: with more keys the
//!   poll interval stretches instead of the load on Prometheus growing;
//! - the poller re-reads keys in batches of up to `batch_size` (one HTTP
//!   exchange per batch, see [`super::batch`]); a key whose query returns a
//!   scalar or fails alone is re-read alone, and a batch that fails is
//!   re-read key by key, so an error is always the key's own.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, Semaphore, watch};
use tokio::task::JoinSet;

use super::batch;
use super::budget::{self, Origin, Usage};
use super::client::{PromClient, QueryError, Series};
use crate::metric_def::{EmptyPolicy, MetricDef};
use crate::provider::{MetricValue, ProviderError};
use crate::selfmetrics::{CacheReport, KeyValue, QueryResult, SelfMetrics};

/// The smallest query budget (queries per second) other than 0 (off).
pub const MIN_BUDGET: f64 = 0.1;

/// Poller settings.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// How often every recently requested key is re-read.
    pub poll_interval: Duration,
    /// A key not requested for this long is dropped.
    pub idle_expiry: Duration,
    /// Re-reads in flight at once (the client bounds queries overall too).
    pub refresh_concurrency: usize,
    /// Keys held at most; a request for a new key beyond is refused.
    pub max_keys: usize,
    /// Bytes held at most (keys and values, estimated), all keys together.
    pub max_bytes: usize,
    /// Keys held only by push streams at most (their own budget).
    pub max_stream_keys: usize,
    /// Re-reads per second at most, over all keys (0: no budget).
    pub query_budget: f64,
    /// Keys re-read in one Prometheus request at most (1: one by one).
    pub batch_size: usize,
}

/// Whom a key serves, for its self-metric series: the request's namespace
/// and selector (the query is the key; this only labels it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub namespace: String,
    pub selector: String,
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
    /// Shared with the map's key: a long query is held once, at its size.
    query: Arc<str>,
    id: Identity,
    first: OnceCell<()>,
    state: Mutex<State>,
    last_requested: Mutex<Instant>,
    refreshing: AtomicBool,
    /// The query returned a scalar, which cannot join a batch.
    scalar: AtomicBool,
    /// The last read alone failed: kept out of batches until it succeeds,
    /// so one failing key does not fail the others' batch every round.
    failing: AtomicBool,
    /// Bumped after every read, so push streams wake when the value may have changed.
    version: watch::Sender<u64>,
    /// Only push streams asked for the key: it counts against their budget.
    /// Changed under the map's lock, as are `bytes` and `listed`.
    stream_only: AtomicBool,
    /// What the key costs its pool (strings and values, estimated).
    bytes: AtomicUsize,
    /// Still in the map (a read that ends after the key expired pays nothing).
    listed: AtomicBool,
}

/// The keys and what they cost.
#[derive(Default)]
struct Keys {
    map: HashMap<Key, Arc<Entry>>,
    usage: Usage,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Key = (String, Arc<str>);

/// The cache; share it through an `Arc`.
pub struct PollCache {
    client: Arc<PromClient>,
    metrics: Arc<SelfMetrics>,
    settings: CacheSettings,
    entries: Mutex<Keys>,
    /// The poll interval in use (stretched by the budget), f64 bits of seconds.
    interval: AtomicU64,
    /// Keys per batch now: `batch_size`, halved after a batch failed whose
    /// keys all read well alone (a batch too heavy for the backend).
    batch_limit: AtomicUsize,
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
            interval: AtomicU64::new(settings.poll_interval.as_secs_f64().to_bits()),
            batch_limit: AtomicUsize::new(settings.batch_size.max(1)),
            settings,
            entries: Mutex::new(Keys::default()),
        }
    }

    /// Values for `query`, from memory when possible; `Unavailable` when the
    /// key is new and the cache is full.
    pub async fn get(
        &self,
        def: Arc<MetricDef>,
        query: String,
        id: Identity,
    ) -> Result<Vec<MetricValue>, ProviderError> {
        let entry = self.entry(def, query, id, Origin::Poll)?;
        entry
            .first
            .get_or_init(|| async {
                self.refresh(&entry).await;
            })
            .await;
        answer(&entry)
    }

    /// Like [`PollCache::get`], plus a receiver that changes after each
    /// re-read of the key (for push streams: a key that only streams ask
    /// for counts against their own budget).
    pub async fn get_watched(
        &self,
        def: Arc<MetricDef>,
        query: String,
        id: Identity,
    ) -> Result<
        (
            Result<Vec<MetricValue>, ProviderError>,
            watch::Receiver<u64>,
        ),
        ProviderError,
    > {
        let entry = self.entry(def, query, id, Origin::Stream)?;
        let rx = entry.version.subscribe();
        entry
            .first
            .get_or_init(|| async {
                self.refresh(&entry).await;
            })
            .await;
        Ok((answer(&entry), rx))
    }

    /// The entry of a key (created on first use unless its budget is
    /// spent), marked as requested now.
    fn entry(
        &self,
        def: Arc<MetricDef>,
        query: String,
        id: Identity,
        origin: Origin,
    ) -> Result<Arc<Entry>, ProviderError> {
        let entry = {
            let mut keys = lock(&self.entries);
            let key: Key = (def.name.clone(), Arc::from(query));
            match keys.map.get(&key).cloned() {
                Some(e) => {
                    if origin == Origin::Poll {
                        self.promote(&mut keys.usage, &e);
                    }
                    e
                }
                None => {
                    let cost = budget::key_cost(&def.name, &key.1, &id.namespace, &id.selector);
                    if let Err(why) = keys.usage.admit(origin, cost, &self.limits()) {
                        drop(keys);
                        return Err(self.refuse(&def.name, why));
                    }
                    let stream = origin == Origin::Stream;
                    let pool = keys.usage.pool(stream);
                    pool.keys += 1;
                    pool.bytes += cost;
                    let e = Arc::new(Entry {
                        def,
                        query: key.1.clone(),
                        id,
                        first: OnceCell::new(),
                        state: Mutex::new(State::default()),
                        last_requested: Mutex::new(Instant::now()),
                        refreshing: AtomicBool::new(false),
                        scalar: AtomicBool::new(false),
                        failing: AtomicBool::new(false),
                        version: watch::Sender::new(0),
                        stream_only: AtomicBool::new(stream),
                        bytes: AtomicUsize::new(cost),
                        listed: AtomicBool::new(true),
                    });
                    keys.map.insert(key, e.clone());
                    e
                }
            }
        };
        *lock(&entry.last_requested) = Instant::now();
        Ok(entry)
    }

    /// A stream's key that a poll asks for moves to the polls' budget when
    /// a key slot is free there (else it stays where it is, still served).
    fn promote(&self, usage: &mut Usage, e: &Entry) {
        if !e.stream_only.load(Ordering::Relaxed) || usage.poll.keys >= self.settings.max_keys {
            return;
        }
        let bytes = e.bytes.load(Ordering::Relaxed);
        usage.stream.keys -= 1;
        usage.stream.bytes -= bytes;
        usage.poll.keys += 1;
        usage.poll.bytes += bytes;
        e.stream_only.store(false, Ordering::Relaxed);
    }

    fn limits(&self) -> budget::Limits {
        budget::Limits {
            max_keys: self.settings.max_keys,
            max_bytes: self.settings.max_bytes,
            max_stream_keys: self.settings.max_stream_keys,
        }
    }

    /// A new key over its budget: counted, logged at debug (a flood must
    /// not flood the log; the counter and its alert say it), and a 503 for
    /// the caller, so an HPA keeps its replicas and KEDA sees an error, never 0.
    fn refuse(&self, metric: &str, why: budget::Refusal) -> ProviderError {
        self.metrics.cache_refusal(metric);
        tracing::debug!(metric, reason = ?why, "poll cache budget spent, new key refused");
        ProviderError::Unavailable(why.message(metric, &self.limits()))
    }

    /// A key's values changed size: its pool pays the difference.
    fn account(&self, e: &Entry, values: usize) {
        let fixed = budget::key_cost(&e.def.name, &e.query, &e.id.namespace, &e.id.selector);
        let mut keys = lock(&self.entries);
        if !e.listed.load(Ordering::Relaxed) {
            return;
        }
        let old = e.bytes.swap(fixed + values, Ordering::Relaxed);
        let pool = keys.usage.pool(e.stream_only.load(Ordering::Relaxed));
        pool.bytes = pool.bytes - old + fixed + values;
    }

    /// Re-read one key alone.
    async fn refresh(&self, e: &Entry) -> bool {
        if e.refreshing.swap(true, Ordering::AcqRel) {
            return true;
        }
        let start = Instant::now();
        let res = self.client.answer(&e.query).await;
        if let Ok(a) = &res {
            e.scalar.store(a.scalar, Ordering::Relaxed);
        }
        let ok = res.is_ok();
        e.failing.store(!ok, Ordering::Relaxed);
        self.settle(e, res.map(|a| a.series), start.elapsed());
        ok
    }

    /// Re-read `entries` in one request; if it fails, each alone.
    async fn refresh_batch(&self, entries: &[Arc<Entry>]) {
        let mine: Vec<&Arc<Entry>> = entries
            .iter()
            .filter(|e| !e.refreshing.swap(true, Ordering::AcqRel))
            .collect();
        if let [one] = mine.as_slice() {
            one.refreshing.store(false, Ordering::Release);
            self.refresh(one).await;
            return;
        }
        if mine.is_empty() {
            return;
        }
        let queries: Vec<&str> = mine.iter().map(|e| &*e.query).collect();
        let start = Instant::now();
        let res = self.client.answer_post(&batch::union(&queries)).await;
        let took = start.elapsed();
        match res.and_then(|a| batch::split(a.series, mine.len())) {
            Ok(parts) => {
                for (e, series) in mine.into_iter().zip(parts) {
                    self.settle(e, Ok(series), took);
                }
            }
            Err(err) => {
                for e in &mine {
                    e.refreshing.store(false, Ordering::Release);
                }
                self.retry_alone(&mine, &err).await;
            }
        }
    }

    /// A failed batch, read key by key so each error is its key's own. If
    /// every key reads well alone, the batch itself was the problem (too
    /// heavy for the backend's limits): later batches are half as large.
    async fn retry_alone(&self, entries: &[&Arc<Entry>], err: &QueryError) {
        let mut all_ok = true;
        for e in entries {
            all_ok &= self.refresh(e).await;
        }
        if all_ok {
            let limit = self.batch_limit.load(Ordering::Relaxed);
            let half = (entries.len() / 2).min(limit).max(1);
            self.batch_limit.store(half, Ordering::Relaxed);
            tracing::info!(error = %err, keys = entries.len(), batch_size = half, "batched read failed where each key reads well alone; smaller batches");
        } else {
            tracing::debug!(error = %err, "batched read failed; keys read alone");
        }
    }

    /// Store a read's outcome in the key's state.
    fn settle(&self, e: &Entry, res: Result<Vec<Series>, QueryError>, took: Duration) {
        let name = &e.def.name;
        let now = gpuscale_util::rfc3339::unix_now();
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
        let values = st
            .good
            .as_ref()
            .map_or(0, |g| budget::values_cost(&g.items));
        drop(st);
        self.account(e, values);
        self.metrics.query(name, outcome, took);
        e.refreshing.store(false, Ordering::Release);
        e.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Re-read every recently requested key each poll interval (stretched
    /// to stay within the query budget); drop idle keys.
    pub async fn run_poller(self: Arc<Self>) {
        loop {
            let start = tokio::time::Instant::now();
            let due = self.sweep();
            let units = self.units(due);
            let keys = units.iter().map(Vec::len).sum();
            let (period, spacing) = self.pace(keys, units.len());
            self.interval
                .store(period.as_secs_f64().to_bits(), Ordering::Relaxed);
            self.clone().refresh_round(units, spacing).await;
            tokio::time::sleep_until(start + period).await;
        }
    }

    /// Drop idle keys; the rest that have been read once are due.
    fn sweep(&self) -> Vec<Arc<Entry>> {
        let mut keys = lock(&self.entries);
        let Keys { map, usage } = &mut *keys;
        let idle = self.settings.idle_expiry;
        map.retain(|_, e| {
            let keep = lock(&e.last_requested).elapsed() < idle;
            if !keep {
                e.listed.store(false, Ordering::Relaxed);
                let pool = usage.pool(e.stream_only.load(Ordering::Relaxed));
                pool.keys -= 1;
                pool.bytes -= e.bytes.load(Ordering::Relaxed);
            }
            keep
        });
        map.values()
            .filter(|e| e.first.initialized())
            .cloned()
            .collect()
    }

    /// The round's requests: batches of keys that can share one, and the
    /// keys read alone (scalars, keys failing alone).
    fn units(&self, due: Vec<Arc<Entry>>) -> Vec<Vec<Arc<Entry>>> {
        let limit = self.batch_limit.load(Ordering::Relaxed);
        let (alone, mut shared): (Vec<_>, Vec<_>) = due.into_iter().partition(|e| {
            limit <= 1 || e.scalar.load(Ordering::Relaxed) || e.failing.load(Ordering::Relaxed)
        });
        // Keys of one metric side by side: their batches look alike to
        // Prometheus's query log and to whoever reads it.
        shared.sort_by(|a, b| (&a.def.name, &a.query).cmp(&(&b.def.name, &b.query)));
        let lens: Vec<usize> = shared.iter().map(|e| e.query.len()).collect();
        let mut units: Vec<Vec<Arc<Entry>>> = alone.into_iter().map(|e| vec![e]).collect();
        for r in batch::plan(&lens, limit) {
            units.push(shared[r].to_vec());
        }
        units
    }

    /// The round's period and the spacing of its requests: the requests
    /// spread over most of a poll interval so the work (here and in
    /// Prometheus) does not arrive as one burst; with more keys than the
    /// budget allows in one interval the period stretches to
    /// `keys / budget` (the budget counts keys, batched or not: Prometheus
    /// evaluates each one).
    fn pace(&self, keys: usize, requests: usize) -> (Duration, Duration) {
        let poll = self.settings.poll_interval;
        let spread = |period: Duration| {
            period
                .mul_f64(0.8)
                .div_f64(requests.max(1) as f64)
                .max(Duration::from_micros(50))
        };
        let budget = self.settings.query_budget;
        if budget <= 0.0 || !budget.is_finite() {
            return (poll, spread(poll));
        }
        // The CLI asks for at least MIN_BUDGET; clamped here too so the
        // period cannot overflow.
        let floor = Duration::from_secs_f64(1.0 / budget.max(MIN_BUDGET));
        let period = poll.max(floor.mul_f64(keys.max(1) as f64));
        (period, spread(period))
    }

    /// Send the round's requests, one start every `spacing`, at most
    /// `refresh_concurrency` in flight.
    async fn refresh_round(self: Arc<Self>, units: Vec<Vec<Arc<Entry>>>, spacing: Duration) {
        if units.is_empty() {
            return;
        }
        let mut pace = tokio::time::interval(spacing);
        // Under a budget a late start never makes up for lost time (that
        // would exceed the budget); without one the round catches up.
        pace.set_missed_tick_behavior(if self.settings.query_budget > 0.0 {
            tokio::time::MissedTickBehavior::Delay
        } else {
            tokio::time::MissedTickBehavior::Burst
        });
        let permits = Arc::new(Semaphore::new(self.settings.refresh_concurrency.max(1)));
        let mut running = JoinSet::new();
        for unit in units {
            pace.tick().await;
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            let this = self.clone();
            running.spawn(async move {
                match unit.as_slice() {
                    [one] => {
                        this.refresh(one).await;
                    }
                    many => this.refresh_batch(many).await,
                }
                drop(permit);
            });
        }
        while running.join_next().await.is_some() {}
    }

    /// Number of cached keys (both pools).
    pub fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }

    /// Keys and bytes held: the polls' pool and the streams' pool.
    pub fn usage(&self) -> Usage {
        lock(&self.entries).usage
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the self-metrics report of the cache: per metric the age of the
    /// oldest good value, per key its value, the key count and the pacing.
    pub fn report(&self) -> CacheReport {
        let mut r = CacheReport {
            keys: 0,
            max_keys: self.settings.max_keys,
            max_bytes: self.settings.max_bytes,
            poll_interval_secs: f64::from_bits(self.interval.load(Ordering::Relaxed)),
            ..CacheReport::default()
        };
        let keys = lock(&self.entries);
        r.keys = keys.usage.poll.keys;
        r.stream_keys = keys.usage.stream.keys;
        r.bytes = keys.usage.poll.bytes;
        r.stream_bytes = keys.usage.stream.bytes;
        for e in keys.map.values() {
            let st = lock(&e.state);
            let Some(g) = &st.good else { continue };
            let age = g.at.elapsed().as_secs_f64();
            let slot = r.ages.entry(e.def.name.clone()).or_insert(0.0);
            *slot = slot.max(age);
            r.values.push(KeyValue {
                metric: e.def.name.clone(),
                namespace: e.id.namespace.clone(),
                selector: selector_label(&e.id.selector),
                query: e.query.to_string(),
                value: g.items.iter().map(|i| i.value).sum(),
            });
        }
        r
    }
}

/// The selector as a label value: itself when short, else its start and a
/// stable hash of the whole, so the series stays readable and bounded.
pub fn selector_label(s: &str) -> String {
    const SHORT: usize = 48;
    if s.len() <= SHORT {
        return s.to_string();
    }
    let mut cut = 32;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}…{:012x}",
        &s[..cut],
        crate::hash::fnv1a(s.as_bytes()) >> 16
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_selectors_are_their_own_label_and_long_ones_shorten_stably() {
        assert_eq!(selector_label("workload=chat"), "workload=chat");
        let long = "workload in (chat, embed, rerank, tts),model_name=llama-3-8b-instruct";
        let label = selector_label(long);
        assert_eq!(label, selector_label(long));
        assert!(
            label.starts_with("workload in (chat, embed, rerank"),
            "{label}"
        );
        assert_eq!(label.chars().count(), 32 + 1 + 12, "{label}");
        assert_ne!(label, selector_label(&long.replace("tts", "asr")));
    }
}
