//! One route's state: its Ready endpoints and the requests held while it
//! has none, under one lock so a request is never held after the release
//! it should have seen.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::config::RouteSpec;
use crate::metrics::Metrics;

pub struct Route {
    pub spec: RouteSpec,
    state: Mutex<State>,
    next: AtomicUsize,
    /// Woken when a request is held (the waker patches the scale).
    pub wake: Notify,
    /// Woken when the Ready endpoints change: a waker waiting to retry
    /// stops waiting once the target is Ready (or parked again).
    pub ready_changed: Notify,
    /// With `sleep:`, which endpoints sleep (`crate::sleep`).
    pub sleeper: Option<Arc<crate::sleepers::Sleeper>>,
    metrics: Arc<Metrics>,
    /// This route's series on the warm path, resolved once.
    pub series: crate::metrics::RouteSeries,
}

#[derive(Default)]
struct State {
    ready: Vec<SocketAddr>,
    waiters: VecDeque<(u64, oneshot::Sender<Release>)>,
    /// Held requests are being released one by one: newcomers queue behind
    /// them instead of overtaking.
    releasing: bool,
    next_id: u64,
    /// The first request held since the target was last Ready: starts the
    /// observed cold start and the wake signal's clock.
    cold_since: Option<Instant>,
    signal_since: Option<Instant>,
}

/// How long a release waits for one request to reach its upstream
/// connection before releasing the next anyway.
const HANDOFF: Duration = Duration::from_secs(1);

/// A held request's release: where to send it, and the signal it gives
/// once the request is on its upstream connection.
pub struct Release {
    pub addr: SocketAddr,
    pub sent: oneshot::Sender<()>,
}

/// What a request gets on arrival.
pub enum Admit {
    Ready(SocketAddr),
    Held(Held),
    QueueFull,
    /// Not Ready, and the request's body is over the bound for holding.
    TooLarge,
}

/// A held request; leaves the queue when dropped before its release (its
/// client went away) and is counted as abandoned.
pub struct Held {
    route: Arc<Route>,
    id: u64,
    rx: Option<oneshot::Receiver<Release>>,
    since: Instant,
    done: bool,
}

impl Route {
    pub fn new(spec: RouteSpec, metrics: Arc<Metrics>) -> Arc<Self> {
        metrics.init_route(&spec.service.namespace, &spec.name);
        let series = metrics.route_series(&spec.service.namespace, &spec.name);
        Arc::new(Self {
            series,
            state: Mutex::new(State::default()),
            next: AtomicUsize::new(0),
            wake: Notify::new(),
            ready_changed: Notify::new(),
            sleeper: spec
                .sleep
                .clone()
                .map(|s| Arc::new(crate::sleepers::Sleeper::new(s))),
            spec,
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pick(&self, ready: &[SocketAddr]) -> Option<SocketAddr> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        ready.get(i % ready.len().max(1)).copied()
    }

    /// Forward at once to a Ready endpoint, or hold (bounded by `max`,
    /// and only a request that may be held).
    pub fn admit(self: &Arc<Self>, max: usize, holdable: bool) -> Admit {
        let mut st = self.lock();
        if !st.releasing
            && let Some(addr) = self.pick(&st.ready)
        {
            return Admit::Ready(addr);
        }
        if !holdable {
            return Admit::TooLarge;
        }
        if st.waiters.len() >= max {
            return Admit::QueueFull;
        }
        let (tx, rx) = oneshot::channel();
        let id = st.next_id;
        st.next_id += 1;
        st.waiters.push_back((id, tx));
        let now = Instant::now();
        if st.ready.is_empty() {
            st.cold_since.get_or_insert(now);
            st.signal_since.get_or_insert(now);
        }
        self.metrics
            .pending
            .with_label_values(&[&self.spec.service.namespace, &self.spec.name])
            .set(st.waiters.len() as i64);
        drop(st);
        self.wake.notify_one();
        Admit::Held(Held {
            route: self.clone(),
            id,
            rx: Some(rx),
            since: now,
            done: false,
        })
    }

    /// New Ready endpoints: held requests are released in arrival order,
    /// each once the one before is on its upstream connection.
    pub fn set_ready(self: &Arc<Self>, ready: Vec<SocketAddr>) {
        let mut st = self.lock();
        self.metrics
            .ready_endpoints
            .with_label_values(&[&self.spec.service.namespace, &self.spec.name])
            .set(ready.len() as i64);
        st.ready = ready;
        self.ready_changed.notify_one();
        if st.ready.is_empty() || st.waiters.is_empty() || st.releasing {
            return;
        }
        st.releasing = true;
        tokio::spawn(self.clone().release());
    }

    async fn release(self: Arc<Self>) {
        loop {
            let next = {
                let mut st = self.lock();
                let next = match self.pick(&st.ready) {
                    Some(addr) => st.waiters.pop_front().map(|(_, tx)| (addr, tx)),
                    None => None,
                };
                if next.is_none() {
                    st.releasing = false;
                }
                self.metrics
                    .pending
                    .with_label_values(&[&self.spec.service.namespace, &self.spec.name])
                    .set(st.waiters.len() as i64);
                next
            };
            let Some((addr, tx)) = next else { return };
            let (sent, on_wire) = oneshot::channel();
            // A receiver gone has already left through its drop.
            if tx.send(Release { addr, sent }).is_ok() {
                let _ = tokio::time::timeout(HANDOFF, on_wire).await;
            }
        }
    }

    /// The Service's Ready endpoints: with `sleep:` those awake are
    /// forwarded to, else all.
    pub fn set_endpoints(self: &Arc<Self>, all: Vec<SocketAddr>) {
        match &self.sleeper {
            Some(s) => self.set_ready(s.set_endpoints(all)),
            None => self.set_ready(all),
        }
    }

    /// A sleeping endpoint woke: the first held request's time, taken so
    /// the cold start and the wake signal do not count this wake.
    pub fn woke_from_sleep(&self) -> Option<Instant> {
        let mut st = self.lock();
        st.signal_since = None;
        st.cold_since.take()
    }

    /// Requests are held and no endpoint is Ready: a wake is wanted.
    pub fn needs_wake(&self) -> bool {
        let st = self.lock();
        st.ready.is_empty() && !st.waiters.is_empty()
    }

    /// The wake signal's start, taken once per cold start.
    pub fn take_signal_since(&self) -> Option<Instant> {
        self.lock().signal_since.take()
    }

    /// A released request got its first response: the cold start ends.
    pub fn first_response(&self) {
        let since = self.lock().cold_since.take();
        if let Some(since) = since {
            let secs = since.elapsed().as_secs_f64();
            tracing::info!(route = %self.spec.name, cold_start_s = secs, "cold start observed");
            self.metrics
                .cold_start
                .with_label_values(&[&self.spec.service.namespace, &self.spec.name])
                .observe(secs);
        }
    }

    fn leave(&self, id: u64) -> bool {
        let mut st = self.lock();
        let before = st.waiters.len();
        st.waiters.retain(|(i, _)| *i != id);
        let left = st.waiters.len() < before;
        self.metrics
            .pending
            .with_label_values(&[&self.spec.service.namespace, &self.spec.name])
            .set(st.waiters.len() as i64);
        left
    }
}

impl Held {
    /// Waits for the release; `None` if the route dropped the sender.
    /// Cancel-safe: a release that arrives later is still received.
    pub async fn released(&mut self) -> Option<Release> {
        let release = self.rx.as_mut()?.await.ok();
        self.rx = None;
        let release = release?;
        self.done = true;
        self.route
            .metrics
            .held
            .with_label_values(&[&self.route.spec.service.namespace, &self.route.spec.name])
            .observe(self.since.elapsed().as_secs_f64());
        Some(release)
    }

    /// The wait limit passed, or the body grew past its bound: leave the
    /// queue and count a refusal for `reason`.
    pub fn refuse(mut self, reason: &str) {
        self.done = true;
        // Counted even when a release raced the refusal: the client gets it.
        self.route.leave(self.id);
        self.route
            .metrics
            .refused
            .with_label_values(&[
                &self.route.spec.service.namespace,
                &self.route.spec.name,
                reason,
            ])
            .inc();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.done && self.route.leave(self.id) {
            tracing::debug!(route = %self.route.spec.name, "a held client went away");
            self.route
                .metrics
                .abandoned
                .with_label_values(&[&self.route.spec.service.namespace, &self.route.spec.name])
                .inc();
        }
    }
}
