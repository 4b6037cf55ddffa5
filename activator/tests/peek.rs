//! A client that sends the head of a request to a `model` route and then
//! only `{"model":` is answered 408 once `--body-read-timeout` passes,
//! counted, and no longer shown as a peek in progress; an upstream that
//! sends no response head is answered 504 at `--upstream-ttfb-timeout`.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_activator::handler::Bounds;
use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::route::Route;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn a_stalled_model_body_is_answered_408_within_the_deadline() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(support::spec(Some("m")), metrics.clone());
    let deadline = Duration::from_secs(1);
    let addr = support::proxy(
        route,
        metrics.clone(),
        Bounds {
            upstream_ttfb_timeout: Duration::from_secs(1),
            body_read_timeout: deadline,
            ..support::bounds()
        },
    )
    .await;

    let mut c = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    c.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metrics.peeks.get(), 1, "the peek shows while in progress");
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
        .await
        .expect("answered before 10 s")
        .unwrap();
    let took = start.elapsed();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(
        took >= deadline && took < deadline * 3,
        "answered after {took:?}"
    );
    let timed_out = metrics.unrouted.with_label_values(&["body_timeout"]).get();
    assert_eq!(timed_out, 1);
    assert_eq!(metrics.peeks.get(), 0);
}

#[tokio::test]
async fn a_hanging_upstream_is_answered_504_after_the_ttfb_bound() {
    let hang = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = hang.local_addr().unwrap();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((c, _)) = hang.accept().await {
            open.push(c);
        }
    });
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(support::spec(None), metrics.clone());
    route.set_ready(vec![upstream]);
    let addr = support::proxy(
        route,
        metrics.clone(),
        Bounds {
            upstream_ttfb_timeout: Duration::from_secs(1),
            ..support::bounds()
        },
    )
    .await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    c.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
        .await
        .expect("answered before 10 s")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let timeouts = metrics
        .upstream_timeouts
        .with_label_values(&["inference", "chat"]);
    assert_eq!(timeouts.get(), 1);
}
