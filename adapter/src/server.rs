//! Listeners: the HTTPS API (TLS handshake, client certificate captured per
//! connection, HTTP/1.1 and HTTP/2) and the plain-HTTP self-metrics port.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::api::Api;
use crate::prometheus::PollCache;
use crate::provider::Provider;
use crate::selfmetrics::SelfMetrics;
use gpuscale_conn::{self as conn, Activity, Limits};

/// Serve the API over TLS until the task is dropped.
pub async fn serve_api<P: Provider>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    api: Arc<Api<P>>,
    limits: Limits,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    while let Some((tcp, peer, slot)) = conn::accept(&listener, &slots).await {
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let api = api.clone();
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let certs: Arc<Vec<CertificateDer<'static>>> = Arc::new(
                stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default(),
            );
            let activity = Activity::new();
            let busy = activity.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let api = api.clone();
                let certs = certs.clone();
                let in_flight = busy.begin();
                async move {
                    let (parts, _body) = req.into_parts();
                    let resp = api
                        .handle(&parts.method, &parts.uri, &parts.headers, &certs)
                        .await;
                    drop(in_flight);
                    Ok::<_, Infallible>(resp)
                }
            });
            conn::serve(
                &conn::builder(false),
                stream,
                svc,
                activity,
                limits.idle_timeout,
            )
            .await;
            drop(slot);
        });
    }
}

/// Serve `/metrics` (and `/healthz`) over plain HTTP.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<SelfMetrics>,
    cache: Option<Arc<PollCache>>,
    limits: Limits,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    while let Some((tcp, _, slot)) = conn::accept(&listener, &slots).await {
        let metrics = metrics.clone();
        let cache = cache.clone();
        tokio::spawn(async move {
            let activity = Activity::new();
            let busy = activity.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let metrics = metrics.clone();
                let cache = cache.clone();
                let in_flight = busy.begin();
                async move {
                    let resp = match req.uri().path() {
                        "/metrics" => {
                            let report = cache.map(|c| c.report()).unwrap_or_default();
                            let mut r =
                                Response::new(Full::new(Bytes::from(metrics.render(&report))));
                            r.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static(
                                    "text/plain; version=0.0.4; charset=utf-8",
                                ),
                            );
                            r
                        }
                        "/healthz" | "/livez" | "/readyz" => {
                            crate::api::status::text(StatusCode::OK, "ok")
                        }
                        "/debug/scalers" => match metrics.debug_scalers() {
                            Some(json) => {
                                let mut r = Response::new(Full::new(Bytes::from(json)));
                                r.headers_mut().insert(
                                    http::header::CONTENT_TYPE,
                                    http::HeaderValue::from_static("application/json"),
                                );
                                r
                            }
                            None => crate::api::status::text(
                                StatusCode::NOT_FOUND,
                                "the scale-to-zero controller is off (--scale-to-zero)",
                            ),
                        },
                        _ => crate::api::status::text(StatusCode::NOT_FOUND, "not found"),
                    };
                    drop(in_flight);
                    Ok::<_, Infallible>(resp)
                }
            });
            conn::serve(
                &conn::builder(true),
                tcp,
                svc,
                activity,
                limits.idle_timeout,
            )
            .await;
            drop(slot);
        });
    }
}
