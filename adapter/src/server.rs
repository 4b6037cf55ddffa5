//! Listeners: the HTTPS API (TLS handshake, client certificate captured per
//! connection, HTTP/1.1 and HTTP/2) and the plain-HTTP self-metrics port.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::api::Api;
use crate::prometheus::PollCache;
use crate::provider::Provider;
use crate::selfmetrics::SelfMetrics;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve the API over TLS until the task is dropped.
pub async fn serve_api<P: Provider>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    api: Arc<Api<P>>,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let api = api.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
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
            let svc = service_fn(move |req: Request<Incoming>| {
                let api = api.clone();
                let certs = certs.clone();
                async move {
                    let (parts, _body) = req.into_parts();
                    Ok::<_, Infallible>(
                        api.handle(&parts.method, &parts.uri, &parts.headers, &certs)
                            .await,
                    )
                }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // A client that never finishes its request headers is dropped.
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

/// Serve `/metrics` (and `/healthz`) over plain HTTP.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<SelfMetrics>,
    cache: Option<Arc<PollCache>>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let metrics = metrics.clone();
        let cache = cache.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let metrics = metrics.clone();
                let cache = cache.clone();
                async move {
                    let resp = match req.uri().path() {
                        "/metrics" => {
                            let ages = cache.map(|c| c.ages()).unwrap_or_default();
                            let mut r =
                                Response::new(Full::new(Bytes::from(metrics.render(&ages))));
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
                        _ => crate::api::status::text(StatusCode::NOT_FOUND, "not found"),
                    };
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}
