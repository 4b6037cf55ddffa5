//! The listeners: the proxy (HTTP/1.1 and HTTP/2 cleartext) and the
//! self-metrics port, each with a connection cap and an `accept` that backs
//! off when it fails (out of file descriptors) instead of spinning.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::conn::{self, Activity, Limits};
use crate::handler::{self, App};
use crate::proxy;

/// Serves the proxy until the task is dropped.
pub async fn serve_proxy(listener: TcpListener, app: Arc<App>, limits: Limits) {
    let _beat = Heartbeat::start();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let builder = Arc::new(proxy_builder());
    while let Some((tcp, peer, slot)) = conn::accept(&listener, &slots).await {
        let _ = tcp.set_nodelay(true);
        let peer = handler::Peer {
            addr: peer,
            client: crate::held_body::Client(std::os::fd::AsRawFd::as_raw_fd(&tcp)),
            pinned: Arc::default(),
        };
        let app = app.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let activity = Activity::new();
            let busy = activity.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let app = app.clone();
                let in_flight = busy.begin();
                let peer = peer.clone();
                async move {
                    let resp = handler::handle(app, req, peer).await;
                    drop(in_flight);
                    Ok::<_, Infallible>(resp)
                }
            });
            conn::serve(&builder, tcp, svc, activity, limits.idle_timeout).await;
            drop(slot);
        });
    }
}

/// A timer that is always due within 10 s. Each HTTP/1 request arms a
/// fresh 30 s header-read timer (hyper's, the slowloris bound) once its
/// response is written; the runtime's time driver is woken (an eventfd
/// write and one more `epoll_wait` per request) when a new timer is due
/// before every timer it knew of when it parked, as that one is between
/// requests unless a nearer timer exists.
struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    fn start() -> Self {
        Self(tokio::spawn(async {
            let mut beat = tokio::time::interval(std::time::Duration::from_secs(10));
            loop {
                beat.tick().await;
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Most bytes an HTTP/2 client may send on one stream, and on one
/// connection, before the activator reads them: what hyper buffers beyond
/// the held bodies read (and counted against `--max-held-bytes`).
pub const H2_STREAM_WINDOW: u32 = 64 << 10;
pub const H2_CONN_WINDOW: u32 = 256 << 10;

/// The shared builder, plus: a client that half-closes after its request
/// is still answered; small HTTP/2 windows, so what arrives unread is small.
fn proxy_builder() -> hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor> {
    let mut b = conn::builder(false);
    b.http1().half_close(true);
    b.http2()
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONN_WINDOW);
    b
}

/// Serves `/metrics`, `/healthz` and `/readyz` over plain HTTP/1.1.
pub async fn serve_metrics(listener: TcpListener, app: Arc<App>, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.clamp(1, 64)));
    let builder = Arc::new(conn::builder(true));
    while let Some((tcp, _, slot)) = conn::accept(&listener, &slots).await {
        let app = app.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let activity = Activity::new();
            let busy = activity.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let app = app.clone();
                let in_flight = busy.begin();
                async move {
                    let resp = match req.uri().path() {
                        "/metrics" => {
                            let mut r = proxy::text(StatusCode::OK, "");
                            *r.body_mut() = Full::new(Bytes::from(app.metrics.render()))
                                .map_err(|never| match never {})
                                .boxed();
                            r.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static(
                                    "text/plain; version=0.0.4; charset=utf-8",
                                ),
                            );
                            r
                        }
                        "/healthz" | "/livez" | "/readyz" => proxy::text(StatusCode::OK, "ok"),
                        _ => proxy::text(StatusCode::NOT_FOUND, "not found"),
                    };
                    drop(in_flight);
                    Ok::<_, Infallible>(resp)
                }
            });
            conn::serve(&builder, tcp, svc, activity, limits.idle_timeout).await;
            drop(slot);
        });
    }
}
