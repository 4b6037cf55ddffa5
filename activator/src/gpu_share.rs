//! Sleeping models sharing one GPU: before a sleeping endpoint is woken,
//! its VRAM need is set against its GPU's free memory (the exporter's
//! series, through Prometheus: `crate::vram`). When it does not fit, the
//! least recently used awake neighbours on that GPU (endpoints of other
//! `sleep:` routes) are put to sleep first — never one whose route has a
//! request open, and at most `--gpu-neighbour-sleeps` per GPU in any
//! minute; otherwise the wake waits and is tried again. VRAM facts that
//! are missing are said so in the log and the endpoint is woken without
//! evicting anyone: an absent series is never read as zero.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::route::Route;
use crate::vram::{Prometheus, Reading};

/// The window of the per-GPU limit.
const WINDOW: Duration = Duration::from_secs(60);
/// A neighbour that did not sleep is not asked again for this long.
const REFUSED_FOR: Duration = Duration::from_secs(300);

/// What a pod was seen holding: the largest reading while awake (its
/// need), the last while asleep.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    awake: Option<u64>,
    asleep: Option<u64>,
}

/// An awake endpoint on the waking endpoint's GPU.
struct Neighbour {
    route: Arc<Route>,
    addr: SocketAddr,
    pod: String,
    /// Its reading.
    bytes: u64,
    /// What it holds awake: its reading, or its need when the reading is
    /// from before a wake.
    holds: u64,
    /// What it would free asleep (what it holds less what it keeps asleep).
    frees: u64,
}

pub struct GpuShare {
    prom: Prometheus,
    routes: Vec<Arc<Route>>,
    metrics: Arc<Metrics>,
    limit: usize,
    seen: Mutex<BTreeMap<(String, String), Seen>>,
    sleeps: Mutex<BTreeMap<String, VecDeque<Instant>>>,
    /// Neighbours whose sleep failed, and when.
    refused: Mutex<BTreeMap<SocketAddr, Instant>>,
    /// One room-making at a time, so two wakes do not count the same room.
    busy: tokio::sync::Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn in_flight(r: &Route, m: &Metrics) -> i64 {
    m.in_flight
        .with_label_values(&[&r.spec.service.namespace, &r.spec.name])
        .get()
}

impl GpuShare {
    /// Over the `sleep:` routes of `routes`.
    pub fn new(
        prom: Prometheus,
        routes: &[Arc<Route>],
        metrics: Arc<Metrics>,
        limit: usize,
    ) -> Self {
        Self {
            prom,
            routes: routes
                .iter()
                .filter(|r| r.sleeper.is_some())
                .cloned()
                .collect(),
            metrics,
            limit,
            seen: Mutex::new(BTreeMap::new()),
            sleeps: Mutex::new(BTreeMap::new()),
            refused: Mutex::new(BTreeMap::new()),
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// Reads the VRAM facts every `every`, remembering each pod's need.
    pub async fn run(self: Arc<Self>, every: Duration) {
        loop {
            match self.prom.read().await {
                Ok(r) => self.remember(&r),
                Err(e) => tracing::warn!("VRAM readings not refreshed: {e}"),
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Records each sleep route's pods' readings by their state now, and
    /// publishes each route's need.
    fn remember(&self, r: &Reading) {
        let mut seen = lock(&self.seen);
        for route in &self.routes {
            let Some(s) = &route.sleeper else { continue };
            let ns = &route.spec.service.namespace;
            let asleep = s.asleep();
            for a in s.endpoints() {
                let Some(pod) = s.pod_of(a) else { continue };
                let Some(v) = r.single(ns, &pod) else {
                    continue;
                };
                let e = seen.entry((ns.clone(), pod)).or_default();
                if asleep.contains(&a) {
                    // A reading at the awake figure is from before the sleep.
                    if e.awake.is_none_or(|w| v.bytes < w) {
                        e.asleep = Some(v.bytes);
                    }
                } else {
                    e.awake = Some(e.awake.map_or(v.bytes, |b| b.max(v.bytes)));
                }
            }
            let need = s
                .endpoints()
                .into_iter()
                .filter_map(|a| need(route, &seen, &s.pod_of(a)?))
                .max();
            let g = self
                .metrics
                .vram_need
                .with_label_values(&[ns, &route.spec.name]);
            match need {
                Some(n) => g.set(i64::try_from(n).unwrap_or(i64::MAX)),
                None => {
                    let _ = self
                        .metrics
                        .vram_need
                        .remove_label_values(&[ns, &route.spec.name]);
                }
            }
        }
    }

    /// Whether `addr` of `route` may be woken now, after putting
    /// neighbours to sleep if its need does not fit; false: try again.
    pub async fn make_room(&self, route: &Arc<Route>, addr: SocketAddr) -> bool {
        let _one = self.busy.lock().await;
        let (outcome, go) = self.plan_and_evict(route, addr).await;
        self.metrics
            .gpu_room
            .with_label_values(&[&route.spec.service.namespace, &route.spec.name, outcome])
            .inc();
        go
    }

    async fn plan_and_evict(&self, route: &Arc<Route>, addr: SocketAddr) -> (&'static str, bool) {
        let name = &route.spec.name;
        let ns = &route.spec.service.namespace;
        let unknown = |why: String| {
            tracing::warn!(route = %name, endpoint = %addr, "VRAM data missing, waking without putting a neighbour to sleep: {why}");
            ("unknown", true)
        };
        let Some(pod) = route.sleeper.as_ref().and_then(|s| s.pod_of(addr)) else {
            return unknown("its EndpointSlice names no pod (targetRef)".into());
        };
        let reading = match self.prom.read().await {
            Ok(r) => r,
            Err(e) => return unknown(e),
        };
        self.remember(&reading);
        let Some(own) = reading.single(ns, &pod).cloned() else {
            return unknown(format!(
                "no single-GPU gpu_pod_memory_used_bytes for pod {ns}/{pod}"
            ));
        };
        let Some(need) = need(route, &lock(&self.seen), &pod) else {
            return unknown(format!(
                "pod {ns}/{pod} was never read awake and its route sets no sleep.vram"
            ));
        };
        let Some(&free) = reading.free.get(&own.uuid) else {
            return unknown(format!("no gpu_memory_free_bytes for GPU {}", own.uuid));
        };
        let neighbours = self.neighbours(route, &own.uuid, own.bytes, &reading);
        // Neighbours woken since their last reading hold their need.
        let taken: u64 = neighbours.iter().map(|n| n.holds - n.bytes).sum();
        let free = free.saturating_sub(taken);
        let extra = need.saturating_sub(own.bytes);
        if extra <= free {
            return ("fits", true);
        }
        let short = extra - free;
        let (busy, idle): (Vec<Neighbour>, Vec<Neighbour>) = neighbours
            .into_iter()
            .partition(|n| in_flight(&n.route, &self.metrics) > 0);
        let mut plan = Vec::new();
        let mut freed = 0;
        for n in idle {
            if freed >= short {
                break;
            }
            freed += n.frees;
            plan.push(n);
        }
        let gpu = &own.uuid;
        if freed < short {
            if freed + busy.iter().map(|n| n.frees).sum::<u64>() >= short {
                tracing::info!(route = %name, %gpu, short_bytes = short, "the wake waits: only neighbours with requests in flight could make room");
                return ("in_flight", false);
            }
            tracing::warn!(route = %name, %gpu, short_bytes = short, "no neighbour can make room; waking anyway");
            return ("wont_fit", true);
        }
        if self.budget(gpu) < plan.len() {
            tracing::info!(route = %name, %gpu, limit = self.limit, "the wake waits: --gpu-neighbour-sleeps reached on this GPU");
            return ("limit", false);
        }
        for n in &plan {
            if !self.put_to_sleep(n, gpu, name).await {
                return ("failed", false);
            }
        }
        ("made_room", true)
    }

    /// The awake endpoints of other sleep routes on `uuid`, least recently
    /// used first. `own_asleep` (what the waking pod keeps asleep) stands
    /// for what a neighbour keeps asleep when it was never seen asleep.
    fn neighbours(
        &self,
        waking: &Route,
        uuid: &str,
        own_asleep: u64,
        r: &Reading,
    ) -> Vec<Neighbour> {
        let seen = lock(&self.seen);
        let mut out: Vec<(std::time::Instant, Neighbour)> = Vec::new();
        for route in self
            .routes
            .iter()
            .filter(|o| o.spec.name != waking.spec.name)
        {
            let Some(s) = &route.sleeper else { continue };
            let ns = &route.spec.service.namespace;
            for addr in s.awake() {
                if self.refused_lately(addr) {
                    continue;
                }
                let Some(pod) = s.pod_of(addr) else { continue };
                let Some(v) = r.single(ns, &pod).filter(|v| v.uuid == uuid) else {
                    continue;
                };
                let keeps = seen
                    .get(&(ns.clone(), pod.clone()))
                    .and_then(|e| e.asleep)
                    .unwrap_or(own_asleep);
                let holds = need(route, &seen, &pod).map_or(v.bytes, |n| n.max(v.bytes));
                let n = Neighbour {
                    route: route.clone(),
                    addr,
                    bytes: v.bytes,
                    holds,
                    frees: holds.saturating_sub(keeps),
                    pod,
                };
                out.push((s.last_used(), n));
            }
        }
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, n)| n).collect()
    }

    fn refused_lately(&self, a: SocketAddr) -> bool {
        let mut r = lock(&self.refused);
        r.retain(|_, at| at.elapsed() < REFUSED_FOR);
        r.contains_key(&a)
    }

    /// Neighbour sleeps left on `gpu` in the window.
    fn budget(&self, gpu: &str) -> usize {
        let mut all = lock(&self.sleeps);
        let q = all.entry(gpu.to_string()).or_default();
        while q.front().is_some_and(|t| t.elapsed() > WINDOW) {
            q.pop_front();
        }
        self.limit.saturating_sub(q.len())
    }

    /// Leaves `n` out of forwarding, then (no request open) puts it to
    /// sleep, confirmed by `/is_sleeping`; restored on failure.
    async fn put_to_sleep(&self, n: &Neighbour, gpu: &str, for_route: &str) -> bool {
        let Some(s) = &n.route.sleeper else {
            return false;
        };
        let ns = &n.route.spec.service.namespace;
        let name = &n.route.spec.name;
        s.mark(n.addr, true);
        n.route.set_ready(s.awake());
        let result = if in_flight(&n.route, &self.metrics) > 0 {
            Err("a request arrived meanwhile".to_string())
        } else {
            crate::sleep_calls::sleep_one(s, n.addr, &n.route).await
        };
        let label = match &result {
            Ok(()) => {
                lock(&self.sleeps)
                    .entry(gpu.to_string())
                    .or_default()
                    .push_back(Instant::now());
                tracing::info!(route = %name, endpoint = %n.addr, pod = %n.pod, %gpu, waking = %for_route, "put a neighbour to sleep to make room");
                "slept"
            }
            Err(e) => {
                lock(&self.refused).insert(n.addr, Instant::now());
                s.mark(n.addr, false);
                n.route.set_ready(s.awake());
                tracing::warn!(route = %name, endpoint = %n.addr, %gpu, "neighbour not put to sleep: {e}");
                "failed"
            }
        };
        crate::sleep_calls::publish_sleeping(&n.route, &self.metrics);
        self.metrics
            .neighbour_sleeps
            .with_label_values(&[ns, name, label])
            .inc();
        result.is_ok()
    }
}

/// A pod's VRAM need: the route's `sleep.vram`, else the largest reading
/// while awake.
fn need(route: &Route, seen: &BTreeMap<(String, String), Seen>, pod: &str) -> Option<u64> {
    let spec = route.spec.sleep.as_ref()?;
    spec.vram.or_else(|| {
        seen.get(&(route.spec.service.namespace.clone(), pod.to_string()))
            .and_then(|e| e.awake)
    })
}
