//! A route's own `upstreamTtfbTimeout` bounds its upstream's response head
//! instead of `--upstream-ttfb-timeout`: shorter (a hanging upstream is
//! answered 504 at the route's bound, long before the flag's) and longer
//! (a slow prefill that the flag would cut is answered).

#![allow(clippy::unwrap_used)]

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_activator::handler::Bounds;
use gpuscale_activator::metrics::Metrics;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// An upstream that reads each request and answers it after `delay`
/// (`None`: never).
async fn upstream(delay: Option<Duration>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = c.read(&mut buf).await;
                let Some(delay) = delay else {
                    let _ = c.read(&mut buf).await;
                    return;
                };
                tokio::time::sleep(delay).await;
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
                let _ = c.write_all(ok).await;
                let _ = c.read(&mut buf).await;
            });
        }
    });
    addr
}

/// The status of one GET through a proxy whose route has `route_ttfb`
/// and whose flag is `flag_ttfb`, to `upstream`; and how long it took.
async fn get(
    upstream: SocketAddr,
    flag_ttfb: Duration,
    route_ttfb: Duration,
) -> (String, Duration, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new().unwrap());
    let mut spec = support::spec(None);
    spec.upstream_ttfb_timeout = Some(route_ttfb);
    let route = gpuscale_activator::route::Route::new(spec, metrics.clone());
    route.set_ready(vec![upstream]);
    let bounds = Bounds {
        upstream_ttfb_timeout: flag_ttfb,
        ..support::bounds()
    };
    let addr = support::proxy(route, metrics.clone(), bounds).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    c.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(120), c.read(&mut buf))
        .await
        .expect("answered within 120 s")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    (head, start.elapsed(), metrics)
}

#[tokio::test]
async fn a_route_bound_shorter_than_the_flag_answers_504_at_the_route_bound() {
    let hang = upstream(None).await;
    let flag = Duration::from_secs(300);
    let (head, took, metrics) = get(hang, flag, Duration::from_secs(1)).await;
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert!(head.contains("within 1s"), "{head}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(60),
        "{took:?}"
    );
    let timeouts = metrics
        .upstream_timeouts
        .with_label_values(&["inference", "chat"]);
    assert_eq!(timeouts.get(), 1);
}

#[tokio::test]
async fn a_route_bound_longer_than_the_flag_lets_a_slow_head_through() {
    let slow = upstream(Some(Duration::from_secs(2))).await;
    let flag = Duration::from_millis(500);
    let (head, took, metrics) = get(slow, flag, Duration::from_secs(600)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let route = ["inference", "chat"];
    assert_eq!(metrics.upstream_timeouts.with_label_values(&route).get(), 0);
    assert_eq!(metrics.forwarded.with_label_values(&route).get(), 1);
}
