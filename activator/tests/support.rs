//! What the in-process stories share: the route they hold requests for,
//! the proxy's bounds, and a proxy listener serving them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gpuscale_activator::config::{Port, Protocol, RouteSpec, ServiceRef, TargetRef};
use gpuscale_activator::handler::{App, Bounds};
use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::proxy::Upstream;
use gpuscale_activator::route::Route;
use gpuscale_activator::router::Router;
use gpuscale_activator::{conn, server};
use tokio::net::TcpListener;

/// Route `chat` for Deployment `inference/chat` over HTTP/1.1, routed by
/// `model` when one is given.
pub fn spec(model: Option<&str>) -> RouteSpec {
    RouteSpec {
        name: "chat".into(),
        host: None,
        path_prefix: "/".into(),
        model: model.map(Into::into),
        service: ServiceRef {
            namespace: "inference".into(),
            name: "chat".into(),
            port: Port::Number(8000),
        },
        target: TargetRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "chat".into(),
        },
        wake_replicas: 1,
        upstream_protocol: Protocol::Http1,
        upstream_ttfb_timeout: None,
        sleep: None,
    }
}

/// The bounds the stories start from (each overrides what it tests).
pub fn bounds() -> Bounds {
    Bounds {
        queue_length: 10,
        max_wait: Duration::from_secs(60),
        max_held_body: 1 << 20,
        max_held_bytes: 256 << 20,
        model_peek_limit: 1 << 20,
        upstream_ttfb_timeout: Duration::from_secs(5),
        body_read_timeout: Duration::from_secs(10),
        retry_after: 10,
    }
}

/// A proxy listener on a free port serving `route` within `bounds`.
pub async fn proxy(route: Arc<Route>, metrics: Arc<Metrics>, bounds: Bounds) -> SocketAddr {
    let app = Arc::new(App {
        router: Router::new(vec![route]),
        upstream: Upstream::new(Duration::from_secs(5)),
        metrics,
        bounds,
    });
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let limits = conn::Limits {
        max_connections: 100,
        idle_timeout: Duration::from_secs(90),
    };
    tokio::spawn(server::serve_proxy(l, app, limits));
    addr
}
