//! The calls on a model server's sleep endpoints (vLLM's `POST /sleep`,
//! `POST /wake_up`, `GET /is_sleeping`), each bounded, and the sleeping
//! endpoints' gauge: shared by the route's runner (`crate::sleep`) and the
//! shared-GPU room maker (`crate::gpu_share`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;

use crate::metrics::Metrics;
use crate::route::Route;
use crate::sleepers::Sleeper;

/// One `/is_sleeping` or `/wake_up` call's limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a waking or falling-asleep endpoint's `/is_sleeping` is read.
pub const POLL: Duration = Duration::from_millis(50);

/// `gpuscale_activator_sleeping_endpoints` of the route now.
pub fn publish_sleeping(route: &Route, m: &Metrics) {
    let Some(s) = &route.sleeper else { return };
    let n = i64::try_from(s.asleep().len()).unwrap_or(i64::MAX);
    m.sleeping_endpoints
        .with_label_values(&[&route.spec.service.namespace, &route.spec.name])
        .set(n);
}

/// `POST /sleep?level=N` on one endpoint, then `/is_sleeping` until true,
/// within the route's wake timeout.
///
/// # Errors
/// What went wrong, for the log.
pub async fn sleep_one(s: &Sleeper, a: SocketAddr, route: &Route) -> Result<(), String> {
    let at = s.sleep_addr(a);
    let limit = s.spec.wake_timeout;
    let path = format!("/sleep?level={}", s.spec.level);
    let done = tokio::time::timeout(limit, async {
        match call(at, Method::POST, &path, limit).await {
            Ok((st, _)) if st.is_success() => {}
            Ok((st, _)) => return Err(format!("POST {path} answered {st}")),
            Err(e) => return Err(format!("POST {path}: {e}")),
        }
        while is_sleeping(at, route).await != Some(true) {
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    })
    .await;
    done.unwrap_or_else(|_| Err(format!("not asleep within {limit:?}")))
}

/// An endpoint's `/is_sleeping`: `None` when it did not answer in time
/// or answered something else than vLLM's JSON (logged); a 404 (no sleep
/// mode) is awake.
pub async fn is_sleeping(at: SocketAddr, route: &Route) -> Option<bool> {
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
pub async fn call(
    at: SocketAddr,
    method: Method,
    path: &str,
    limit: Duration,
) -> Result<(StatusCode, Bytes), String> {
    tokio::time::timeout(limit, exchange(at, method, path))
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
}

/// One HTTP/1.1 request with an empty body on a connection of its own
/// (the caller bounds it in time): the status and the whole body.
pub async fn exchange<A>(at: A, method: Method, path: &str) -> Result<(StatusCode, Bytes), String>
where
    A: tokio::net::ToSocketAddrs + std::fmt::Display,
{
    let host = at.to_string();
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
        .header(hyper::header::HOST, host)
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
}
