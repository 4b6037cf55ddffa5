//! One request through the activator: find its route, forward it at once
//! to a Ready endpoint or hold it (bounded) until one is Ready.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Body as _;
use hyper::body::Incoming;

use crate::held_body::{self, Waited};
use crate::in_flight::Open;
use crate::metrics::Metrics;
use crate::proxy::{self, Body, ReqBody, Upstream};
use crate::route::{Admit, Held, Route};
use crate::router::{self, Miss, Router};

/// What every request shares.
pub struct App {
    pub router: Router,
    pub upstream: Upstream,
    pub metrics: Arc<Metrics>,
    pub bounds: Bounds,
}

/// Bounds on holding, from flags.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub queue_length: usize,
    pub max_wait: Duration,
    pub max_held_body: usize,
    pub max_held_bytes: usize,
    pub model_peek_limit: usize,
    pub body_read_timeout: Duration,
    pub upstream_ttfb_timeout: Duration,
    pub retry_after: u32,
}

/// Who sent a request: its address, its connection's socket (watched
/// while the request is held) and its connection's upstream connection.
#[derive(Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub client: held_body::Client,
    pub pinned: Arc<crate::pinned::Pinned>,
}

pub async fn handle(app: Arc<App>, req: Request<Incoming>, peer: Peer) -> Response<Body> {
    let (route, req) = match select(&app, req).await {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let open = Open::begin(route.series.in_flight.clone());
    match forward(&app, &route, req, &peer).await {
        Ok(resp) => open.until_answered(resp),
        Err(resp) => open.until_answered(resp),
    }
}

/// Admit `req` (forward at once or hold), then forward it: the upstream's
/// response, or the activator's own answer.
async fn forward(
    app: &App,
    route: &Arc<Route>,
    req: Request<ReqBody>,
    peer: &Peer,
) -> Result<Response<Incoming>, Response<Body>> {
    let (addr, req, was_held) = admit(app, route, req, peer.client).await?;
    let name = &route.spec.name;
    let proto = route.spec.upstream_protocol;
    let ttfb = route
        .spec
        .upstream_ttfb_timeout
        .unwrap_or(app.bounds.upstream_ttfb_timeout);
    let Ok(answered) = tokio::time::timeout(
        ttfb,
        app.upstream
            .forward(addr, proto, req, (peer.addr, &peer.pinned)),
    )
    .await
    else {
        route.series.upstream_timeouts.inc();
        tracing::warn!(route = %name, %addr, ?ttfb, "no response head in time");
        return Err(proxy::text(
            StatusCode::GATEWAY_TIMEOUT,
            &format!("route {name}: the model at {addr} sent no response within {ttfb:?}"),
        ));
    };
    match answered {
        Ok(resp) => {
            route.series.forwarded.inc();
            if was_held {
                route.first_response();
            }
            if resp.status() == StatusCode::SERVICE_UNAVAILABLE && route.sleeper.is_some() {
                // A server that rejects while asleep: leave it out now, so
                // the next request is held and wakes it (this one is answered).
                crate::sleep::answered_asleep(route, addr, &app.metrics).await;
            }
            Ok(resp)
        }
        Err(e) => {
            route.series.upstream_errors.inc();
            tracing::warn!(route = %name, %addr, error = %e, "forwarding failed");
            Err(proxy::text(
                StatusCode::BAD_GATEWAY,
                &format!("route {name}: the model at {addr} did not answer: {e}"),
            ))
        }
    }
}

/// Where to send `req` now, after holding it if its route is not Ready
/// (and whether it was held), or the refusal.
async fn admit(
    app: &App,
    route: &Arc<Route>,
    req: Request<ReqBody>,
    client: held_body::Client,
) -> Result<(SocketAddr, Request<ReqBody>, bool), Response<Body>> {
    let name = &route.spec.name;
    let refused = |reason: &str| {
        app.metrics
            .refused
            .with_label_values(&[&route.spec.service.namespace, name, reason])
            .inc()
    };
    let holdable = req
        .body()
        .size_hint()
        .exact()
        .is_none_or(|n| n <= app.bounds.max_held_body as u64);
    let held = match route.admit(app.bounds.queue_length, holdable) {
        Admit::Ready(addr) => return Ok((addr, req, false)),
        Admit::QueueFull => {
            refused("queue_full");
            return Err(proxy::unavailable(
                &format!(
                    "route {name}: {} requests already wait for the model to start; try again later",
                    app.bounds.queue_length
                ),
                app.bounds.retry_after,
            ));
        }
        Admit::TooLarge => {
            refused("body_too_large");
            return Err(too_large(name, app.bounds.max_held_body));
        }
        Admit::Held(held) => held,
    };
    // Boxed: the warm path's future stays small (it is moved per request).
    Box::pin(hold(app, name, held, req, client)).await
}

/// Holds `req` until its release (then where to send it), or the refusal.
async fn hold(
    app: &App,
    name: &str,
    mut held: Held,
    req: Request<ReqBody>,
    client: held_body::Client,
) -> Result<(SocketAddr, Request<ReqBody>, bool), Response<Body>> {
    let (parts, body) = req.into_parts();
    let budget = held_body::Budget {
        limit: app.bounds.max_held_bytes,
        gauge: app.metrics.held_body_bytes.clone(),
    };
    let cap = app.bounds.max_held_body;
    let waited = held_body::wait(&mut held, body.boxed(), cap, &budget, Some(client));
    match tokio::time::timeout(app.bounds.max_wait, waited).await {
        Ok(Waited::Released(release, body)) => {
            let body = ReqBody::Boxed(proxy::on_first_poll(body, release.sent));
            Ok((release.addr, Request::from_parts(parts, body), true))
        }
        Ok(Waited::Dropped) => Err(proxy::unavailable(
            &format!("route {name}: the request was not released"),
            app.bounds.retry_after,
        )),
        Ok(Waited::TooLarge) => {
            held.refuse("body_too_large");
            Err(too_large(name, app.bounds.max_held_body))
        }
        Ok(Waited::BudgetFull) => {
            held.refuse("held_bytes_full");
            Err(proxy::unavailable(
                &format!(
                    "route {name}: held request bodies fill --max-held-bytes ({} bytes); try again later",
                    app.bounds.max_held_bytes
                ),
                app.bounds.retry_after,
            ))
        }
        // The held request leaves the queue as abandoned (dropped here).
        Ok(Waited::BodyFailed(e)) => Err(proxy::text(
            StatusCode::BAD_REQUEST,
            &format!("route {name}: reading the request body failed while held: {e}"),
        )),
        Err(_) => {
            held.refuse("wait_limit");
            Err(proxy::unavailable(
                &format!(
                    "route {name}: the model did not become ready within {:?}",
                    app.bounds.max_wait
                ),
                app.bounds.retry_after,
            ))
        }
    }
}

fn too_large(route: &str, cap: usize) -> Response<Body> {
    proxy::text(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!(
            "route {route}: the model is not ready and a request body over {cap} bytes is not held"
        ),
    )
}

/// The request's host: HTTP/2's `:authority` when it has one (RFC 9113
/// 8.3.1), else `Host`.
fn host_of<B>(req: &Request<B>) -> Option<&str> {
    let header = || {
        req.headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
    };
    match req.uri().authority() {
        Some(a) if req.version() == http::Version::HTTP_2 => Some(a.as_str()),
        _ => header().or_else(|| req.uri().host()),
    }
}

/// An HTTP/2 request whose `host` differs from its `:authority` is
/// malformed (RFC 9113 8.3.1): it could reach another route's backend.
fn conflicting_host<B>(req: &Request<B>) -> bool {
    let Some(a) = req.uri().authority() else {
        return false;
    };
    req.version() == http::Version::HTTP_2
        && req
            .headers()
            .get_all(header::HOST)
            .iter()
            .any(|h| !h.as_bytes().eq_ignore_ascii_case(a.as_str().as_bytes()))
}

/// The route, and the request with its body (peeked when a `model` route
/// needed it), or the answer for a request no route takes.
async fn select(
    app: &App,
    req: Request<Incoming>,
) -> Result<(Arc<Route>, Request<ReqBody>), Response<Body>> {
    let miss = |reason: &str, code: StatusCode, msg: String| {
        app.metrics.unrouted.with_label_values(&[reason]).inc();
        proxy::text(code, &msg)
    };
    if conflicting_host(&req) {
        let msg = "the host header differs from :authority (RFC 9113 8.3.1)".to_string();
        return Err(miss("bad_host", StatusCode::BAD_REQUEST, msg));
    }
    let candidates = app.router.candidates(host_of(&req), req.uri().path());
    let Some(first) = candidates.first() else {
        let msg = format!(
            "no route for host {:?} and path {:?}",
            host_of(&req).unwrap_or(""),
            req.uri().path()
        );
        return Err(miss("no_route", StatusCode::NOT_FOUND, msg));
    };
    if !Router::needs_model(candidates) {
        return Ok((first.clone(), req.map(ReqBody::Streamed)));
    }
    // Boxed: the future of a request that needs no peek stays small.
    Box::pin(by_model(app, candidates, req)).await
}

/// The route among `candidates` for the `model` of `req`'s body (read
/// within the peek's bounds), with the body as read.
async fn by_model(
    app: &App,
    candidates: &[Arc<Route>],
    req: Request<Incoming>,
) -> Result<(Arc<Route>, Request<ReqBody>), Response<Body>> {
    let miss = |reason: &str, code: StatusCode, msg: String| {
        app.metrics.unrouted.with_label_values(&[reason]).inc();
        proxy::text(code, &msg)
    };
    let limit = app.bounds.model_peek_limit;
    let (parts, body) = req.into_parts();
    let peeking = Open::begin(app.metrics.peeks.clone());
    let read = tokio::time::timeout(
        app.bounds.body_read_timeout,
        Limited::new(body, limit).collect(),
    )
    .await;
    drop(peeking);
    let Ok(read) = read else {
        let msg = format!(
            "the body did not arrive within {:?}, the most waited to find its \"model\"",
            app.bounds.body_read_timeout
        );
        return Err(miss("body_timeout", StatusCode::REQUEST_TIMEOUT, msg));
    };
    let bytes: Bytes = match read {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let msg =
                format!("the body is over {limit} bytes, the most read to find its \"model\"");
            return Err(miss("body_too_large", StatusCode::PAYLOAD_TOO_LARGE, msg));
        }
        Err(e) => {
            return Err(miss(
                "bad_body",
                StatusCode::BAD_REQUEST,
                format!("reading the body failed: {e}"),
            ));
        }
    };
    let model = match router::model_of(&bytes) {
        Ok(m) => m,
        Err(e) if candidates.iter().any(|r| r.spec.model.is_none()) => {
            tracing::debug!(error = %e, "no model in the body; the route without a model takes it");
            None
        }
        Err(e) => return Err(miss("bad_body", StatusCode::BAD_REQUEST, e)),
    };
    let route = match Router::by_model(candidates, model.as_deref()) {
        Ok(r) => r,
        Err(Miss::NoModelRoute(m)) => {
            return Err(miss(
                "no_route",
                StatusCode::NOT_FOUND,
                format!("no route serves model {m:?} here"),
            ));
        }
        Err(Miss::NoRoute) => {
            return Err(miss(
                "bad_body",
                StatusCode::BAD_REQUEST,
                "the body has no \"model\" and every route here needs one".into(),
            ));
        }
    };
    let body = Full::new(bytes).map_err(|never| match never {}).boxed();
    Ok((route, Request::from_parts(parts, ReqBody::Boxed(body))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h2(host: Option<&str>) -> Request<()> {
        let mut b = Request::builder()
            .version(http::Version::HTTP_2)
            .uri("http://warm.test/v1");
        if let Some(h) = host {
            b = b.header(header::HOST, h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn authority_wins_and_a_conflicting_host_is_refused() {
        assert_eq!(host_of(&h2(Some("private.example.com"))), Some("warm.test"));
        assert!(conflicting_host(&h2(Some("private.example.com"))));
        assert!(!conflicting_host(&h2(Some("WARM.test"))));
        assert!(!conflicting_host(&h2(None)));
        let h1 = Request::builder()
            .uri("/v1")
            .header(header::HOST, "a.test")
            .body(())
            .unwrap();
        assert_eq!(host_of(&h1), Some("a.test"));
        assert!(!conflicting_host(&h1));
    }
}
