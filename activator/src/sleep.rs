//! The sleep tier: a route with `sleep:` may find its pods asleep (vLLM's
//! sleep mode: weights off the GPU, process kept), put to sleep by the
//! controller's `sleep` stage. Each Ready endpoint's `GET /is_sleeping` is
//! read every `probeInterval`; a sleeping endpoint is not forwarded to, so
//! while all sleep requests are held as for a parked target. A held request
//! then wakes them: `POST /wake_up` on every sleeping endpoint, and each is
//! forwarded to again once its `/is_sleeping` answers false. The observed
//! wake (first held request → first endpoint awake) is
//! `gpuscale_activator_sleep_wake_seconds`, beside the cold start's
//! histogram, which a wake from sleep does not enter.
//!
//! An endpoint without sleep mode answers 404 there (vLLM registers the
//! endpoints only with `VLLM_SERVER_DEV_MODE=1` and `--enable-sleep-mode`)
//! and is taken as awake; one that does not answer a probe keeps its last
//! state. Every call is bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;

use crate::gpu_share::GpuShare;
use crate::metrics::Metrics;
use crate::route::Route;
use crate::sleep_calls::{POLL, call, is_sleeping, publish_sleeping};
pub use crate::sleep_spec::SleepSpec;
use crate::sleepers::Sleeper;

/// Reads every endpoint's `/is_sleeping`; forwards to those awake. An
/// endpoint found asleep while requests forwarded to the route are open
/// is woken for them: a request that reached it before this probe waits
/// inside the server (vLLM's paused scheduler) or was answered 503.
async fn probe(s: &Sleeper, route: &Arc<Route>, metrics: &Metrics) {
    let mut changed = false;
    let mut fell_asleep = false;
    for a in s.endpoints() {
        if let Some(sleeping) = is_sleeping(s.sleep_addr(a), route).await {
            let flipped = s.mark(a, sleeping);
            changed |= flipped;
            fell_asleep |= flipped && sleeping;
        }
    }
    if fell_asleep && forwarded_open(route, metrics) {
        tracing::info!(route = %route.spec.name, "an endpoint fell asleep under open requests; waking it");
        s.want_wake(true);
    }
    if changed {
        route.set_ready(s.awake());
        publish_sleeping(route, metrics);
    }
}

/// Requests of the route open and not held: forwarded, not yet answered.
fn forwarded_open(route: &Route, m: &Metrics) -> bool {
    let l = [
        route.spec.service.namespace.as_str(),
        route.spec.name.as_str(),
    ];
    m.in_flight.with_label_values(&l).get() > m.pending.with_label_values(&l).get()
}

/// Notes a use of the route (a request forwarded or open) for the least
/// recently used choice among neighbours on a GPU.
fn saw_use(s: &Sleeper, route: &Route, m: &Metrics) {
    let l = [
        route.spec.service.namespace.as_str(),
        route.spec.name.as_str(),
    ];
    s.saw_use(
        m.forwarded.with_label_values(&l).get(),
        m.in_flight.with_label_values(&l).get() > 0,
    );
}

/// Wakes every sleeping endpoint (making room on its GPU first when
/// `share` is on); true when one woke.
async fn wake(
    s: &Sleeper,
    route: &Arc<Route>,
    metrics: &Metrics,
    share: Option<&GpuShare>,
) -> bool {
    let wakes = s.asleep().into_iter().map(|a| async move {
        if let Some(share) = share
            && !share.make_room(route, a).await
        {
            return false;
        }
        let woke = wake_one(s, a, route).await;
        if woke {
            s.mark(a, false);
            if let Some(since) = route.woke_from_sleep() {
                let secs = since.elapsed().as_secs_f64();
                tracing::info!(route = %route.spec.name, endpoint = %a, wake_s = secs, "woke a sleeping endpoint");
                let ns = &route.spec.service.namespace;
                metrics
                    .sleep_wake
                    .with_label_values(&[ns, &route.spec.name])
                    .observe(secs);
            }
            route.set_ready(s.awake());
            publish_sleeping(route, metrics);
        }
        woke
    });
    let woke = futures::future::join_all(wakes).await.contains(&true);
    if woke {
        s.want_wake(false);
    }
    woke
}

/// `POST /wake_up`, then `/is_sleeping` until false, within the wake
/// timeout.
async fn wake_one(s: &Sleeper, a: SocketAddr, route: &Route) -> bool {
    let at = s.sleep_addr(a);
    let limit = s.spec.wake_timeout;
    let done = tokio::time::timeout(limit, async {
        match call(at, Method::POST, "/wake_up", limit).await {
            Ok((st, _)) if st.is_success() => {}
            Ok((st, _)) => return Err(format!("POST /wake_up answered {st}")),
            Err(e) => return Err(format!("POST /wake_up: {e}")),
        }
        while is_sleeping(at, route).await != Some(false) {
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    })
    .await;
    let problem = match done {
        Ok(Ok(())) => return true,
        Ok(Err(e)) => e,
        Err(_) => format!("not awake within {limit:?}"),
    };
    tracing::warn!(route = %route.spec.name, endpoint = %at, "wake from sleep failed: {problem}; trying again");
    false
}

/// Probes the route's endpoints and wakes them for held requests (or for
/// requests that reached an endpoint as it fell asleep), until the process
/// ends; a route without `sleep:` returns at once. With `share`, a wake
/// first makes room on the endpoint's GPU (`crate::gpu_share`).
pub async fn run(route: Arc<Route>, metrics: Arc<Metrics>, share: Option<Arc<GpuShare>>) {
    let Some(sleeper) = route.sleeper.clone() else {
        return;
    };
    metrics
        .sleeping_endpoints
        .with_label_values(&[&route.spec.service.namespace, &route.spec.name])
        .set(0);
    let mut next_probe = Instant::now();
    loop {
        saw_use(&sleeper, &route, &metrics);
        if Instant::now() >= next_probe {
            probe(&sleeper, &route, &metrics).await;
            next_probe = Instant::now() + sleeper.spec.probe_interval;
        }
        let asleep = !sleeper.asleep().is_empty();
        if !asleep {
            sleeper.want_wake(false);
        }
        let wanted = route.needs_wake() || sleeper.wake_wanted();
        if asleep && wanted && !wake(&sleeper, &route, &metrics, share.as_deref()).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A `sleep:` route's endpoint answered `503` (a server that rejects
/// model requests while asleep, as earlier vLLM releases did): when its
/// `/is_sleeping` says true it is left out of forwarding at once, without
/// waiting for the next probe, so a request sent again is held and wakes
/// it. True when it sleeps; false for any other 503 (passed on).
pub async fn answered_asleep(route: &Arc<Route>, addr: SocketAddr, metrics: &Metrics) -> bool {
    let Some(s) = &route.sleeper else {
        return false;
    };
    if is_sleeping(s.sleep_addr(addr), route).await != Some(true) {
        return false;
    }
    if s.mark(addr, true) {
        tracing::info!(route = %route.spec.name, endpoint = %addr, "answered 503 asleep: left out until woken");
        route.set_ready(s.awake());
        publish_sleeping(route, metrics);
    }
    true
}
