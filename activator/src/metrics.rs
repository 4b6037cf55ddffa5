//! The activator's own metrics, in a `prometheus` crate registry with the
//! standard `process_*` families.

use prometheus::{
    Encoder as _, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Seconds from a few milliseconds (warm) to a 10-minute model load.
const HOLD_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
const SIGNAL_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// Every family: (name, type, labels, help). The docs test reads it.
/// `namespace` is the route's Service's: scraped with `honorLabels`, a
/// route's series belong to its model's namespace, so the adapter reads
/// them for that namespace like any workload's series.
pub const FAMILIES: &[(&str, &str, &str, &str)] = &[
    (
        "gpuscale_activator_pending_requests",
        "gauge",
        "namespace, route",
        "Requests held now, waiting for a Ready endpoint.",
    ),
    (
        "gpuscale_activator_held_seconds",
        "histogram",
        "namespace, route",
        "How long forwarded requests were held.",
    ),
    (
        "gpuscale_activator_refused_total",
        "counter",
        "namespace, route, reason",
        "Requests answered 503 (queue_full, wait_limit, held_bytes_full) or 413 (body_too_large) instead of being held.",
    ),
    (
        "gpuscale_activator_abandoned_total",
        "counter",
        "namespace, route",
        "Held requests whose client went away before the target was Ready.",
    ),
    (
        "gpuscale_activator_cold_start_seconds",
        "histogram",
        "namespace, route",
        "Observed cold start: first held request to the first response from the woken target.",
    ),
    (
        "gpuscale_activator_wake_signal_seconds",
        "histogram",
        "namespace, route",
        "First held request to the scale patch accepted by the Kubernetes API.",
    ),
    (
        "gpuscale_activator_wakes_total",
        "counter",
        "namespace, route, result",
        "Wake attempts: patched (0 to wakeReplicas), already_up (replicas above 0), error.",
    ),
    (
        "gpuscale_activator_ready_endpoints",
        "gauge",
        "namespace, route",
        "Ready endpoints of the route's Service, from its EndpointSlices.",
    ),
    (
        "gpuscale_activator_forwarded_total",
        "counter",
        "namespace, route",
        "Requests forwarded to a Ready endpoint.",
    ),
    (
        "gpuscale_activator_upstream_errors_total",
        "counter",
        "namespace, route",
        "Forwarded requests that failed before a response (answered 502).",
    ),
    (
        "gpuscale_activator_unrouted_total",
        "counter",
        "reason",
        "Requests matching no route (no_route) or whose model could not be read (bad_body, body_too_large, body_timeout: the body did not arrive within --body-read-timeout, answered 408), or HTTP/2 requests whose host differs from :authority (bad_host, 400).",
    ),
    (
        "gpuscale_activator_in_flight_requests",
        "gauge",
        "namespace, route",
        "Requests open through the activator now: held, or forwarded and not yet answered in full.",
    ),
    (
        "gpuscale_activator_model_peeks_in_progress",
        "gauge",
        "",
        "Bodies being read now to find their model (at most --body-read-timeout each).",
    ),
    (
        "gpuscale_activator_upstream_timeouts_total",
        "counter",
        "namespace, route",
        "Forwarded requests with no response head within --upstream-ttfb-timeout or the route's upstreamTtfbTimeout (answered 504).",
    ),
    (
        "gpuscale_activator_sleep_wake_seconds",
        "histogram",
        "namespace, route",
        "Observed wake from sleep (routes with sleep:): first held request to the first endpoint whose /is_sleeping says false.",
    ),
    (
        "gpuscale_activator_held_body_bytes",
        "gauge",
        "",
        "Bytes of held requests' bodies read into memory now (at most --max-held-bytes).",
    ),
    (
        "gpuscale_activator_gpu_room_total",
        "counter",
        "namespace, route, outcome",
        "Wakes from sleep with --prometheus-url, by what the room check on the endpoint's GPU found: fits, made_room (neighbours put to sleep first), unknown (VRAM data missing: woken without evicting), wont_fit (no neighbour could free enough: woken anyway), in_flight (only neighbours with requests open could: the wake waits), limit (--gpu-neighbour-sleeps reached: the wake waits), failed (a neighbour did not sleep: the wake waits).",
    ),
    (
        "gpuscale_activator_neighbour_sleeps_total",
        "counter",
        "namespace, route, result",
        "Endpoints of this route put to sleep to make room for a neighbour's wake on their GPU: slept, failed.",
    ),
    (
        "gpuscale_activator_vram_need_bytes",
        "gauge",
        "namespace, route",
        "VRAM one endpoint of the route needs awake: its sleep.vram, else the largest gpu_pod_memory_used_bytes read while awake; absent while unknown.",
    ),
    (
        "gpuscale_activator_sleeping_endpoints",
        "gauge",
        "namespace, route",
        "Endpoints of a sleep route asleep now: they hold host RAM, not their VRAM, which neighbours on the GPU may use.",
    ),
];

/// One route's series that every forwarded request touches.
#[derive(Clone)]
pub struct RouteSeries {
    pub in_flight: prometheus::IntGauge,
    pub forwarded: prometheus::IntCounter,
    pub upstream_errors: prometheus::IntCounter,
    pub upstream_timeouts: prometheus::IntCounter,
}

pub struct Metrics {
    registry: Registry,
    pub pending: IntGaugeVec,
    pub held: HistogramVec,
    pub refused: IntCounterVec,
    pub abandoned: IntCounterVec,
    pub cold_start: HistogramVec,
    pub wake_signal: HistogramVec,
    pub wakes: IntCounterVec,
    pub ready_endpoints: IntGaugeVec,
    pub forwarded: IntCounterVec,
    pub upstream_errors: IntCounterVec,
    pub unrouted: IntCounterVec,
    pub in_flight: IntGaugeVec,
    pub peeks: prometheus::IntGauge,
    pub upstream_timeouts: IntCounterVec,
    pub sleep_wake: HistogramVec,
    pub held_body_bytes: prometheus::IntGauge,
    pub gpu_room: IntCounterVec,
    pub neighbour_sleeps: IntCounterVec,
    pub vram_need: IntGaugeVec,
    pub sleeping_endpoints: IntGaugeVec,
}

fn opts(i: usize) -> (Opts, Vec<&'static str>) {
    let (name, _, labels, help) = FAMILIES[i];
    (
        Opts::new(name, help),
        labels.split(", ").filter(|l| !l.is_empty()).collect(),
    )
}

fn gauge(r: &Registry, i: usize) -> prometheus::Result<IntGaugeVec> {
    let (o, l) = opts(i);
    let v = IntGaugeVec::new(o, &l)?;
    r.register(Box::new(v.clone()))?;
    Ok(v)
}

fn plain_gauge(r: &Registry, i: usize) -> prometheus::Result<prometheus::IntGauge> {
    let (o, _) = opts(i);
    let g = prometheus::IntGauge::with_opts(o)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn counter(r: &Registry, i: usize) -> prometheus::Result<IntCounterVec> {
    let (o, l) = opts(i);
    let v = IntCounterVec::new(o, &l)?;
    r.register(Box::new(v.clone()))?;
    Ok(v)
}

fn histogram(r: &Registry, i: usize, buckets: &[f64]) -> prometheus::Result<HistogramVec> {
    let (o, l) = opts(i);
    let v = HistogramVec::new(HistogramOpts::from(o).buckets(buckets.to_vec()), &l)?;
    r.register(Box::new(v.clone()))?;
    Ok(v)
}

impl Metrics {
    pub fn new() -> prometheus::Result<Self> {
        let r = Registry::new();
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(Self {
            pending: gauge(&r, 0)?,
            held: histogram(&r, 1, HOLD_BUCKETS)?,
            refused: counter(&r, 2)?,
            abandoned: counter(&r, 3)?,
            cold_start: histogram(&r, 4, HOLD_BUCKETS)?,
            wake_signal: histogram(&r, 5, SIGNAL_BUCKETS)?,
            wakes: counter(&r, 6)?,
            ready_endpoints: gauge(&r, 7)?,
            forwarded: counter(&r, 8)?,
            upstream_errors: counter(&r, 9)?,
            unrouted: counter(&r, 10)?,
            in_flight: gauge(&r, 11)?,
            peeks: plain_gauge(&r, 12)?,
            upstream_timeouts: counter(&r, 13)?,
            sleep_wake: histogram(&r, 14, HOLD_BUCKETS)?,
            held_body_bytes: plain_gauge(&r, 15)?,
            gpu_room: counter(&r, 16)?,
            neighbour_sleeps: counter(&r, 17)?,
            vram_need: gauge(&r, 18)?,
            sleeping_endpoints: gauge(&r, 19)?,
            registry: r,
        })
    }

    /// Starts every route's series at zero, so "no request yet" reads 0
    /// and not an absent series.
    pub fn init_route(&self, ns: &str, route: &str) {
        self.pending.with_label_values(&[ns, route]).set(0);
        self.in_flight.with_label_values(&[ns, route]).set(0);
        self.ready_endpoints.with_label_values(&[ns, route]).set(0);
        self.abandoned.with_label_values(&[ns, route]);
        self.forwarded.with_label_values(&[ns, route]);
        self.upstream_errors.with_label_values(&[ns, route]);
        self.upstream_timeouts.with_label_values(&[ns, route]);
        self.sleep_wake.with_label_values(&[ns, route]);
        for reason in [
            "queue_full",
            "wait_limit",
            "body_too_large",
            "held_bytes_full",
        ] {
            self.refused.with_label_values(&[ns, route, reason]);
        }
        for result in ["patched", "already_up", "error"] {
            self.wakes.with_label_values(&[ns, route, result]);
        }
    }

    /// `route`'s series of the warm path, looked up once: a request then
    /// counts with an atomic add, not a label hash and a lock.
    pub fn route_series(&self, ns: &str, route: &str) -> RouteSeries {
        RouteSeries {
            in_flight: self.in_flight.with_label_values(&[ns, route]),
            forwarded: self.forwarded.with_label_values(&[ns, route]),
            upstream_errors: self.upstream_errors.with_label_values(&[ns, route]),
            upstream_timeouts: self.upstream_timeouts.with_label_values(&[ns, route]),
        }
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding self-metrics failed");
        }
        out
    }
}
