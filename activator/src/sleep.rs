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

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Deserializer};

use crate::metrics::Metrics;
use crate::route::Route;

/// A route's `sleep:` key.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SleepSpec {
    /// The port of the sleep endpoints; default the endpoint's own (vLLM
    /// serves them on its API port).
    #[serde(default)]
    pub port: Option<u16>,
    /// How often each endpoint's `/is_sleeping` is read (default `1s`).
    #[serde(default = "probe", deserialize_with = "duration")]
    pub probe_interval: Duration,
    /// How long one endpoint's wake may take before it is tried again
    /// (default `2m`).
    #[serde(default = "wake_timeout", deserialize_with = "duration")]
    pub wake_timeout: Duration,
}

fn probe() -> Duration {
    Duration::from_secs(1)
}

fn wake_timeout() -> Duration {
    Duration::from_secs(120)
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    let v = gpuscale_util::duration::parse(&s).map_err(serde::de::Error::custom)?;
    if v < Duration::from_millis(10) || v > Duration::from_secs(3600) {
        return Err(serde::de::Error::custom(format!("{s:?}: from 10ms to 1h")));
    }
    Ok(v)
}

/// One `/is_sleeping` or `/wake_up` call's limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a waking endpoint's `/is_sleeping` is read.
const POLL: Duration = Duration::from_millis(50);

/// The route's endpoints and which of them sleep.
pub struct Sleeper {
    spec: SleepSpec,
    endpoints: Mutex<Vec<SocketAddr>>,
    asleep: Mutex<BTreeSet<SocketAddr>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sleeper {
    pub fn new(spec: SleepSpec) -> Self {
        Self {
            spec,
            endpoints: Mutex::new(Vec::new()),
            asleep: Mutex::new(BTreeSet::new()),
        }
    }

    /// The Service's Ready endpoints changed: forward to those awake.
    pub fn endpoints(&self, route: &Arc<Route>, all: Vec<SocketAddr>) {
        lock(&self.asleep).retain(|a| all.contains(a));
        *lock(&self.endpoints) = all;
        self.publish(route);
    }

    fn publish(&self, route: &Arc<Route>) {
        let asleep = lock(&self.asleep).clone();
        let awake: Vec<SocketAddr> = lock(&self.endpoints)
            .iter()
            .filter(|a| !asleep.contains(a))
            .copied()
            .collect();
        route.set_ready(awake);
    }

    fn sleep_addr(&self, a: SocketAddr) -> SocketAddr {
        SocketAddr::new(a.ip(), self.spec.port.unwrap_or(a.port()))
    }

    /// Reads every endpoint's `/is_sleeping`; forwards to those awake.
    async fn probe(&self, route: &Arc<Route>) {
        let all = lock(&self.endpoints).clone();
        let mut changed = false;
        for a in all {
            let Some(sleeping) = is_sleeping(self.sleep_addr(a), route).await else {
                continue;
            };
            let mut asleep = lock(&self.asleep);
            changed |= if sleeping {
                asleep.insert(a)
            } else {
                asleep.remove(&a)
            };
        }
        if changed {
            self.publish(route);
        }
    }

    /// Wakes every sleeping endpoint; true when one woke.
    async fn wake(&self, route: &Arc<Route>, metrics: &Metrics) -> bool {
        let asleep: Vec<SocketAddr> = lock(&self.asleep).iter().copied().collect();
        let wakes = asleep.into_iter().map(|a| async move {
            let woke = self.wake_one(a, route).await;
            if woke {
                lock(&self.asleep).remove(&a);
                if let Some(since) = route.woke_from_sleep() {
                    let secs = since.elapsed().as_secs_f64();
                    tracing::info!(route = %route.spec.name, endpoint = %a, wake_s = secs, "woke a sleeping endpoint");
                    let ns = &route.spec.service.namespace;
                    metrics
                        .sleep_wake
                        .with_label_values(&[ns, &route.spec.name])
                        .observe(secs);
                }
                self.publish(route);
            }
            woke
        });
        futures::future::join_all(wakes).await.contains(&true)
    }

    /// `POST /wake_up`, then `/is_sleeping` until false, within the wake
    /// timeout.
    async fn wake_one(&self, a: SocketAddr, route: &Route) -> bool {
        let at = self.sleep_addr(a);
        let name = &route.spec.name;
        let done = tokio::time::timeout(self.spec.wake_timeout, async {
            match call(at, Method::POST, "/wake_up", self.spec.wake_timeout).await {
                Ok((s, _)) if s.is_success() => {}
                Ok((s, _)) => return Err(format!("POST /wake_up answered {s}")),
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
            Err(_) => format!("not awake within {:?}", self.spec.wake_timeout),
        };
        tracing::warn!(route = %name, endpoint = %at, "wake from sleep failed: {problem}; trying again");
        false
    }
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
            sleeper.probe(&route).await;
            next_probe = Instant::now() + sleeper.spec.probe_interval;
        }
        let asleep = !lock(&sleeper.asleep).is_empty();
        if asleep && route.needs_wake() && !sleeper.wake(&route, &metrics).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tokio::time::sleep(POLL).await;
    }
}
