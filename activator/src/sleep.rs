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

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;

use crate::metrics::Metrics;
use crate::route::Route;
pub use crate::sleep_spec::SleepSpec;
use crate::sleepers::Sleeper;

/// One `/is_sleeping` or `/wake_up` call's limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a waking endpoint's `/is_sleeping` is read.
const POLL: Duration = Duration::from_millis(50);

/// Reads every endpoint's `/is_sleeping`; forwards to those awake.
async fn probe(s: &Sleeper, route: &Arc<Route>) {
    let mut changed = false;
    for a in s.endpoints() {
        if let Some(sleeping) = is_sleeping(s.sleep_addr(a), route).await {
            changed |= s.mark(a, sleeping);
        }
    }
    if changed {
        route.set_ready(s.awake());
    }
}

/// Wakes every sleeping endpoint; true when one woke.
async fn wake(s: &Sleeper, route: &Arc<Route>, metrics: &Metrics) -> bool {
    let wakes = s.asleep().into_iter().map(|a| async move {
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
        }
        woke
    });
    futures::future::join_all(wakes).await.contains(&true)
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

/// An endpoint's `/is_sleeping`: `None` when it did not answer in time
/// or answered something else than vLLM's JSON (logged); a 404 (no sleep
/// mode) is awake.
async fn is_sleeping(at: SocketAddr, route: &Route) -> Option<bool> {
    let fail = |why: String| {
        tracing::debug!(route = %route.spec.name, endpoint = %at, "GET /is_sleeping: {why}");
        None
    };
    match call(at, Method::GET, "/is_sleeping", CALL_TIMEOUT).await {
        Ok((StatusCode::NOT_FOUND, _)) => Some(false),
        Ok((StatusCode::OK, body)) => {
            match serde_json::from_slice::<serde_json::Value>(&body)
                .map(|v| v["is_sleeping"].as_bool())
            {
                Ok(Some(b)) => Some(b),
                _ => fail(format!(
                    "not {{\"is_sleeping\": bool}}: {}",
                    String::from_utf8_lossy(&body)
                )),
            }
        }
        Ok((s, _)) => fail(format!("answered {s}")),
        Err(e) => fail(e),
    }
}

/// One HTTP/1.1 request with an empty body, bounded by `limit`.
async fn call(
    at: SocketAddr,
    method: Method,
    path: &str,
    limit: Duration,
) -> Result<(StatusCode, Bytes), String> {
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(at)
            .await
            .map_err(|e| e.to_string())?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, at.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, body.to_bytes()))
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
}

/// Probes the route's endpoints and wakes them for held requests, until
/// the process ends; a route without `sleep:` returns at once.
pub async fn run(route: Arc<Route>, metrics: Arc<Metrics>) {
    let Some(sleeper) = route.sleeper.clone() else {
        return;
    };
    let mut next_probe = Instant::now();
    loop {
        if Instant::now() >= next_probe {
            probe(&sleeper, &route).await;
            next_probe = Instant::now() + sleeper.spec.probe_interval;
        }
        let asleep = !sleeper.asleep().is_empty();
        if asleep && route.needs_wake() && !wake(&sleeper, &route, &metrics).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tokio::time::sleep(POLL).await;
    }
}
