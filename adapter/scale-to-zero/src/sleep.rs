//! The `sleep` stage before zero (vLLM's sleep mode): after `sleep.after`
//! of idle the target's Ready pods are put to sleep (`POST
//! /sleep?level=N`, confirmed by `GET /is_sleeping`), and woken (`POST
//! /wake_up`, confirmed) once the target is no longer idle or its
//! activation rule reads active; `idleFor`
//! parks it at zero as before. Each round reads every Ready pod's
//! `/is_sleeping`, so the status says what the pods say: a pod restarted
//! while asleep is seen awake. A pod that cannot sleep (no sleep mode: the
//! endpoints answer 404; unreachable; too slow; not confirmed) is reported
//! with a named reason and left awake, never counted as asleep. Every
//! call is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, ListParams};

use super::bounded::bounded;
use super::context::Context;
use super::crd::{Phase, PodSleep, ScaleToZeroPolicy, SleepStage};
use super::decide::{Decision, ReadState};
use super::events::event;

/// A pod's sleep endpoints could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    reason: &'static str,
    message: String,
}

fn problem(reason: &'static str, message: impl Into<String>) -> Problem {
    Problem {
        reason,
        message: message.into(),
    }
}

/// One `/is_sleeping` or `/wake_up` call's limit.
const CALL: Duration = Duration::from_secs(5);
/// `POST /sleep` copies the weights out first (5.7 s in vLLM's tutorial).
const SLEEP_CALL: Duration = Duration::from_secs(30);

/// The stage's round: what each Ready pod of the target is now, after
/// putting it to sleep or waking it as the idle window says. Empty when
/// the policy has no `sleep` or the target is not up.
pub(super) async fn stage<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    d: &Decision,
    now: i64,
) -> Vec<PodSleep> {
    let Some(spec) = &policy.spec.sleep else {
        return Vec::new();
    };
    if d.phase != Phase::Active {
        return Vec::new();
    }
    let after = match gpuscale_util::duration::parse(&spec.after) {
        Ok(a) => a.as_secs() as i64,
        Err(e) => {
            tracing::warn!(policy = %policy.name_any(), "spec.sleep.after: {e}; the sleep stage is off");
            return Vec::new();
        }
    };
    // Idle long enough, and no activation (a gateway's pending requests)
    // asking for the model.
    let asleep_wanted = d.memory.idle_since.is_some_and(|s| now - s >= after)
        && d.activation_state != ReadState::Active;
    let pods = match ready_pods(policy, ctx).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(policy = %policy.name_any(), "sleep stage: {e}");
            return previous(policy);
        }
    };
    let mut out = Vec::new();
    for pod in pods {
        out.push(one_pod(policy, ctx, spec, &pod, asleep_wanted).await);
    }
    out
}

fn previous(policy: &ScaleToZeroPolicy) -> Vec<PodSleep> {
    policy
        .status
        .as_ref()
        .map(|s| s.sleep.clone())
        .unwrap_or_default()
}

/// The target's Ready pods, by the selector of its `scale` subresource.
async fn ready_pods<P>(policy: &ScaleToZeroPolicy, ctx: &Context<P>) -> Result<Vec<Pod>, String> {
    let ns = policy.namespace().unwrap_or_default();
    let target = &policy.spec.target;
    let ar = ctx
        .kinds
        .resolve(&ctx.client, target)
        .await
        .map_err(|e| e.to_string())?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ar);
    let scale = super::target::scale_of(&api, target)
        .await
        .map_err(|e| e.to_string())?;
    let Some(selector) = scale.selector else {
        return Err("the target's scale gives no status.selector: its pods cannot be found".into());
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let list = bounded(
        "listing the target's pods",
        pods.list(&ListParams::default().labels(&selector)),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(list.items.into_iter().filter(is_ready).collect())
}

fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Where the pod serves its sleep endpoints.
fn address(pod: &Pod, port: &IntOrString) -> Result<SocketAddr, Problem> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .ok_or_else(|| problem("NoPodIP", "the pod has no IP yet"))?;
    let ip = ip
        .parse()
        .map_err(|_| problem("NoPodIP", format!("pod IP {ip:?} is not an address")))?;
    let port = match port {
        IntOrString::Int(n) => u16::try_from(*n)
            .map_err(|_| problem("NoSuchPort", format!("port {n} is not a port number")))?,
        IntOrString::String(name) => named_port(pod, name)
            .ok_or_else(|| problem("NoSuchPort", format!("no container port named {name:?}")))?,
    };
    Ok(SocketAddr::new(ip, port))
}

fn named_port(pod: &Pod, name: &str) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| u16::try_from(p.container_port).ok())
}

async fn one_pod<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    spec: &SleepStage,
    pod: &Pod,
    asleep_wanted: bool,
) -> PodSleep {
    let name = pod.name_any();
    let result = match address(pod, &spec.port) {
        Ok(at) => converge(at, spec.level, asleep_wanted).await,
        Err(p) => Err(p),
    };
    let was = previous(policy).into_iter().find(|p| p.pod == name);
    let now = match &result {
        Ok(true) => PodSleep {
            pod: name.clone(),
            phase: "Sleeping".into(),
            reason: None,
            message: None,
        },
        Ok(false) => awake(&name, None),
        Err(p) if asleep_wanted => awake(&name, Some(p)),
        Err(_) => awake(&name, None),
    };
    say(policy, ctx, was.as_ref(), &now).await;
    now
}

fn awake(pod: &str, p: Option<&Problem>) -> PodSleep {
    PodSleep {
        pod: pod.to_owned(),
        phase: "Awake".into(),
        reason: p.map(|p| p.reason.to_owned()),
        message: p.map(|p| p.message.clone()),
    }
}

/// An Event when a pod's phase or reason changed.
async fn say<P>(
    policy: &ScaleToZeroPolicy,
    ctx: &Context<P>,
    was: Option<&PodSleep>,
    now: &PodSleep,
) {
    let same = was.is_some_and(|w| w.phase == now.phase && w.reason == now.reason);
    // Serving is no failure: said in the status, not as a Warning.
    if now.reason.as_deref() == Some("RequestsInFlight") {
        return;
    }
    if same || (was.is_none() && now.phase == "Awake" && now.reason.is_none()) {
        return;
    }
    let (warning, reason, message) = match (now.phase.as_str(), &now.reason) {
        ("Sleeping", _) => (false, "Slept", format!("pod {} put to sleep", now.pod)),
        (_, Some(r)) => (
            true,
            "CannotSleep",
            format!(
                "pod {} left awake: {r}: {}",
                now.pod,
                now.message.clone().unwrap_or_default()
            ),
        ),
        _ => (false, "WokenFromSleep", format!("pod {} awake", now.pod)),
    };
    event(ctx, policy, warning, reason, message).await;
}

/// Puts the pod to sleep or wakes it as wanted; whether it sleeps now.
async fn converge(at: SocketAddr, level: u8, asleep_wanted: bool) -> Result<bool, Problem> {
    let sleeping = is_sleeping(at).await?;
    if sleeping == asleep_wanted {
        return Ok(sleeping);
    }
    if asleep_wanted {
        // vLLM's sleep aborts what it is running: never while serving.
        let busy = in_flight(at).await?;
        if busy > 0.0 {
            return Err(problem(
                "RequestsInFlight",
                format!(
                    "{busy} requests running or waiting (vllm:num_requests_running + vllm:num_requests_waiting)"
                ),
            ));
        }
    }
    let (path, limit) = if asleep_wanted {
        (format!("/sleep?level={level}"), SLEEP_CALL)
    } else {
        ("/wake_up".to_owned(), SLEEP_CALL)
    };
    let (status, _) = call(at, Method::POST, &path, limit).await?;
    if !status.is_success() {
        return Err(problem(
            "BadAnswer",
            format!("POST {path} answered {status}"),
        ));
    }
    let now = is_sleeping(at).await?;
    if now != asleep_wanted {
        return Err(problem(
            "NotConfirmed",
            format!("POST {path} answered {status} but /is_sleeping says {now}"),
        ));
    }
    Ok(now)
}

/// Requests the server runs or queues now, from its `/metrics`
/// (`vllm:num_requests_running` + `vllm:num_requests_waiting`, summed
/// over engines); a server that serves neither is an error, not 0.
async fn in_flight(at: SocketAddr) -> Result<f64, Problem> {
    let (status, body) = call(at, Method::GET, "/metrics", CALL).await?;
    if !status.is_success() {
        return Err(problem(
            "BadAnswer",
            format!("GET /metrics answered {status}"),
        ));
    }
    let text = String::from_utf8_lossy(&body);
    let mut seen = false;
    let mut sum = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        if name == "vllm:num_requests_running" || name == "vllm:num_requests_waiting" {
            let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
            match value {
                Some(v) if v.is_finite() => {
                    seen = true;
                    sum += v;
                }
                _ => return Err(problem("BadAnswer", format!("GET /metrics: {line:?}"))),
            }
        }
    }
    if !seen {
        return Err(problem(
            "BadAnswer",
            "GET /metrics serves no vllm:num_requests_running: cannot tell whether it is serving",
        ));
    }
    Ok(sum)
}

/// `GET /is_sleeping`: vLLM's `{"is_sleeping": bool}`; 404 means the
/// server runs without sleep mode.
async fn is_sleeping(at: SocketAddr) -> Result<bool, Problem> {
    let (status, body) = call(at, Method::GET, "/is_sleeping", CALL).await?;
    if status == StatusCode::NOT_FOUND {
        return Err(problem(
            "SleepModeNotEnabled",
            "GET /is_sleeping answered 404: start vLLM with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1",
        ));
    }
    let v: Option<bool> = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["is_sleeping"].as_bool());
    match (status, v) {
        (StatusCode::OK, Some(b)) => Ok(b),
        _ => Err(problem(
            "BadAnswer",
            format!(
                "GET /is_sleeping answered {status}: {}",
                String::from_utf8_lossy(&body)
            ),
        )),
    }
}

/// One HTTP/1.1 request with an empty body, bounded by `limit`.
async fn call(
    at: SocketAddr,
    method: Method,
    path: &str,
    limit: Duration,
) -> Result<(StatusCode, Bytes), Problem> {
    let unreachable = |e: String| problem("Unreachable", format!("{at}: {e}"));
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(at)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, at.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| unreachable(e.to_string()))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok((status, body.to_bytes()))
    };
    tokio::time::timeout(limit, exchange).await.map_err(|_| {
        problem(
            "Timeout",
            format!("{at}: {path} did not answer within {limit:?}"),
        )
    })?
}
