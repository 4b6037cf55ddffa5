//! HTTP(S) server: `/metrics` hands out the current pre-encoded snapshot; it
//! never calls NVML or the Kubernetes API.

pub mod accept;
pub mod auth;
pub mod negotiate;
pub mod slow_reader;
pub mod verify_queue;
pub mod webconfig;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::snapshot::Store;
use accept::{Accepted, Acceptor, Limits};
use auth::Verdict;
use slow_reader::{Guarded, Reads};
use webconfig::WebConfig;

const LANDING: &str = "<!doctype html><html><head><title>gpuscale exporter</title></head><body>\
<h1>gpuscale exporter</h1><p>GPU metrics from NVML, joined to Kubernetes pods.</p>\
<ul><li><a href=\"/metrics\">/metrics</a></li><li><a href=\"/healthz\">/healthz</a></li>\
<li><a href=\"/readyz\">/readyz</a> (503 until the first good collection)</li></ul></body></html>\n";

pub struct Server {
    pub store: Arc<Store>,
    pub web: WebConfig,
    pub limits: Limits,
}

impl Server {
    /// Serves until `shutdown` flips to true.
    pub async fn run(self, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
        let this = Arc::new(self);
        let tls = this.web.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let mut acceptor = Acceptor::new(listener, &this.limits);
        info!(address = %acceptor.local_addr().map(|a| a.to_string()).unwrap_or_default(),
              tls = tls.is_some(), limits = ?this.limits, "serving /metrics");
        loop {
            let accepted = tokio::select! {
                accepted = acceptor.next() => accepted,
                _ = shutdown.changed() => break,
            };
            tokio::spawn(this.clone().serve(accepted, tls.clone()));
        }
    }

    /// One connection: TLS handshake (bounded), then HTTP/1.1 with a header
    /// read timeout that also closes idle keep-alive connections and a write
    /// timeout that closes clients which do not read.
    async fn serve(self: Arc<Self>, conn: Accepted, tls: Option<tokio_rustls::TlsAcceptor>) {
        let Accepted { stream, peer, slot } = conn;
        let _ = stream.set_nodelay(true);
        let limits = self.limits;
        let reads = Arc::new(Reads::default());
        let stream = Guarded::new(stream, limits.write_timeout, reads.clone());
        let this = self.clone();
        let service = service_fn(move |req| {
            let (this, reads) = (this.clone(), reads.clone());
            async move { Ok::<_, Infallible>(this.respond(req, peer, &reads).await) }
        });
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.read_header_timeout);
        let result = match tls {
            Some(acceptor) => {
                let handshake =
                    tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream));
                match handshake.await {
                    Ok(Ok(s)) => http.serve_connection(TokioIo::new(s), service).await,
                    Ok(Err(e)) => {
                        debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                }
            }
            None => http.serve_connection(TokioIo::new(stream), service).await,
        };
        if let Err(e) = result {
            debug!(%peer, error = %e, "connection ended with an error");
        }
        drop(slot);
    }

    /// Answers one request, unless the client pipelines past its cap.
    async fn respond(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        reads: &Reads,
    ) -> Response<Full<Bytes>> {
        let pipelined = reads.request();
        if pipelined > self.limits.max_pipelined {
            debug!(%peer, pipelined, "too many pipelined requests; closing");
            return closing(
                StatusCode::TOO_MANY_REQUESTS,
                "too many pipelined requests (--max-pipelined-requests)\n",
            );
        }
        self.handle(req, peer).await
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        // Health endpoints stay open, as on Kubernetes' own components: the
        // kubelet's probes carry no credentials, and they reveal nothing.
        let health = matches!(req.uri().path(), "/healthz" | "/readyz");
        if let Some(auth) = self.web.auth.as_ref().filter(|_| !health) {
            let header = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match auth
                .check(header, peer.ip(), self.limits.auth_queue_timeout)
                .await
            {
                Verdict::Allow => {}
                Verdict::Deny => {
                    return Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .header(header::WWW_AUTHENTICATE, "Basic realm=\"gpuscale\"")
                        .body(Full::new(Bytes::from_static(b"Unauthorized\n")))
                        .unwrap_or_default();
                }
                // Closing frees the slot: a flood cannot hold connections
                // waiting for checks it will not get.
                Verdict::Busy => {
                    return closing(
                        StatusCode::TOO_MANY_REQUESTS,
                        "too many password checks waiting; retry\n",
                    );
                }
                Verdict::TimedOut => {
                    warn_throttled(peer);
                    return closing(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "password check not reached within --auth-queue-timeout; retry\n",
                    );
                }
            }
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        }
        match req.uri().path() {
            "/metrics" => self.metrics(&req),
            "/" => Response::builder()
                .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
                .body(Full::new(Bytes::from_static(LANDING.as_bytes())))
                .unwrap_or_default(),
            "/healthz" => plain(StatusCode::OK, "ok\n"),
            "/readyz" => {
                if self.store.load().ready {
                    plain(StatusCode::OK, "ready\n")
                } else {
                    plain(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: no successful GPU collection yet\n",
                    )
                }
            }
            _ => plain(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    fn metrics(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let header_str = |name| {
            req.headers()
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        let format = negotiate::format(header_str(header::ACCEPT));
        let gzip = negotiate::gzip(header_str(header::ACCEPT_ENCODING));
        let body = self.store.load().body(format, gzip);
        let mut resp = Response::builder()
            .header(header::CONTENT_TYPE, format.content_type())
            .header(header::VARY, "Accept, Accept-Encoding");
        if gzip {
            resp = resp.header(header::CONTENT_ENCODING, "gzip");
        }
        resp.body(Full::new(body)).unwrap_or_default()
    }
}

/// An error after which the connection closes; the client may retry in 1 s.
fn closing(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::CONNECTION, "close")
        .header(header::RETRY_AFTER, "1")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap_or_default()
}

/// One warning per 10 s for checks that timed out in the queue.
fn warn_throttled(peer: SocketAddr) {
    static LAST: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if last.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
        *last = Some(std::time::Instant::now());
        warn!(%peer, "password checks are waiting past --auth-queue-timeout (a flood of wrong passwords?); answering 503");
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap_or_default()
}
