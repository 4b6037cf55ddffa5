//! A route with `upstreamProtocol: h2c` through the activator's own proxy
//! listener to a real HTTP/2 (prior knowledge) backend: warm and held,
//! from HTTP/1.1 and HTTP/2 clients, with a streamed request body and the
//! response trailers gRPC needs.

#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gpuscale_activator::config::{Port, Protocol, RouteSpec, ServiceRef, TargetRef};
use gpuscale_activator::handler::{App, Bounds};
use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::proxy::{Body, BoxError, Upstream};
use gpuscale_activator::route::Route;
use gpuscale_activator::router::Router;
use gpuscale_activator::{conn, server};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// An HTTP/2-only backend: answers with what it saw (version, `Host`,
/// `X-Forwarded-Host`, `TE`, the body) and a `grpc-status` trailer.
async fn h2_backend() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<Incoming>| async move {
                    let h = |n: &str| {
                        req.headers()
                            .get(n)
                            .map_or("-".to_string(), |v| v.to_str().unwrap().to_string())
                    };
                    let seen = format!(
                        "{:?} host={} xfh={} te={}",
                        req.version(),
                        h("host"),
                        h("x-forwarded-host"),
                        h("te")
                    );
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", HeaderValue::from_static("0"));
                    let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
                        Ok(Frame::data(Bytes::from(format!("{seen} body=")))),
                        Ok(Frame::data(body)),
                        Ok(Frame::trailers(trailers)),
                    ];
                    Ok::<_, Infallible>(Response::new(StreamBody::new(futures::stream::iter(
                        frames,
                    ))))
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    addr
}

fn spec() -> RouteSpec {
    RouteSpec {
        name: "grpc".into(),
        host: None,
        path_prefix: "/".into(),
        model: None,
        service: ServiceRef {
            namespace: "inference".into(),
            name: "grpc".into(),
            port: Port::Number(9000),
        },
        target: TargetRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "grpc".into(),
        },
        wake_replicas: 1,
        upstream_protocol: Protocol::H2c,
        upstream_ttfb_timeout: None,
        sleep: None,
    }
}

/// The activator's proxy listener with one h2c route (no endpoint yet).
async fn activator() -> (SocketAddr, Arc<Route>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(spec(), metrics.clone());
    let app = Arc::new(App {
        router: Router::new(vec![route.clone()]),
        upstream: Upstream::new(Duration::from_secs(5)),
        metrics: metrics.clone(),
        bounds: Bounds {
            queue_length: 10,
            max_wait: Duration::from_secs(20),
            max_held_body: 1 << 20,
            max_held_bytes: 256 << 20,
            model_peek_limit: 1 << 20,
            upstream_ttfb_timeout: Duration::from_secs(1),
            body_read_timeout: Duration::from_secs(10),
            retry_after: 10,
        },
    });
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let limits = conn::Limits {
        max_connections: 100,
        idle_timeout: Duration::from_secs(30),
    };
    tokio::spawn(server::serve_proxy(l, app, limits));
    (addr, route, metrics)
}

/// A body of unknown length (chunked over HTTP/1.1), in two pieces.
fn streamed() -> Body {
    let parts: Vec<Result<Frame<Bytes>, BoxError>> = vec![
        Ok(Frame::data(Bytes::from_static(b"hello "))),
        Ok(Frame::data(Bytes::from_static(b"h2"))),
    ];
    StreamBody::new(futures::stream::iter(parts)).boxed()
}

fn request(at: SocketAddr, body: Body) -> Request<Body> {
    Request::post(format!("http://{at}/pkg.Model/Generate"))
        .header("host", "models.test")
        .header("te", "trailers")
        .body(body)
        .unwrap()
}

/// The answer's body and its `grpc-status` trailer.
async fn answer(resp: Response<Incoming>) -> (String, Option<String>) {
    assert_eq!(resp.status(), 200);
    let collected = resp.into_body().collect().await.unwrap();
    let status = collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().unwrap().to_string());
    (
        String::from_utf8(collected.to_bytes().to_vec()).unwrap(),
        status,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_upstream_warm_and_held() {
    let backend = h2_backend().await;
    let (at, route, metrics) = activator().await;
    let h1: Client<HttpConnector, Body> = Client::builder(TokioExecutor::new()).build_http();
    let h2: Client<HttpConnector, Body> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();

    // Held: no endpoint yet; the request waits, then goes out over HTTP/2.
    let held = tokio::spawn(h1.request(request(at, streamed())));
    let end = Instant::now() + Duration::from_secs(10);
    let pending = "gpuscale_activator_pending_requests{namespace=\"inference\",route=\"grpc\"} 1";
    while !String::from_utf8(metrics.render())
        .unwrap()
        .contains(pending)
    {
        assert!(Instant::now() < end, "the request was not held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    route.set_ready(vec![backend]);
    let (body, _) = answer(held.await.unwrap().unwrap()).await;
    assert_eq!(
        body, "HTTP/2.0 host=- xfh=models.test te=trailers body=hello h2",
        "an HTTP/1.1 client's request, held, reaches the backend over HTTP/2"
    );

    // Warm, from an HTTP/2 client: `te: trailers` and the trailer pass.
    // Its host is `:authority` alone: a `host` header differing from it
    // would be refused (RFC 9113 8.3.1).
    let mut req = request(at, streamed());
    req.headers_mut().remove("host");
    let resp = h2.request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let (body, status) = answer(resp).await;
    assert_eq!(
        body,
        format!("HTTP/2.0 host=- xfh={at} te=trailers body=hello h2")
    );
    let resp = h2.request(request(at, streamed())).await.unwrap();
    assert_eq!(resp.status(), 400, "host models.test vs :authority {at}");
    assert_eq!(status.as_deref(), Some("0"), "the grpc-status trailer");
}
