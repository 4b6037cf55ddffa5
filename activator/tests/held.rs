//! A held client that hangs up before its target is Ready leaves the
//! queue, is counted as abandoned, and never reaches the woken upstream,
//! although the proxy answers half-closed clients (hyper's `half_close`
//! does not end the request at the client's FIN: the socket is watched).

#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::route::Route;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};

async fn until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_client_gone_is_never_forwarded() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(support::spec(None), metrics.clone());
    let addr = support::proxy(route.clone(), metrics.clone(), support::bounds()).await;

    let body = vec![b'x'; 1 << 10];
    let mut c = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/chat HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(&body).await.unwrap();
    let pending = metrics.pending.with_label_values(&["inference", "chat"]);
    until("the request to be held", || pending.get() == 1).await;
    drop(c);
    let abandoned = metrics.abandoned.with_label_values(&["inference", "chat"]);
    until("the hang-up to be counted", || abandoned.get() == 1).await;
    assert_eq!(pending.get(), 0);

    // The target wakes: nothing is forwarded.
    let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = backend.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    tokio::spawn(async move {
        while backend.accept().await.is_ok() {
            s.fetch_add(1, Ordering::SeqCst);
        }
    });
    route.set_ready(vec![at]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the upstream saw the request"
    );
    let forwarded = metrics.forwarded.with_label_values(&["inference", "chat"]);
    assert_eq!(forwarded.get(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_client_is_answered_on_a_warm_route() {
    use tokio::io::AsyncReadExt as _;
    let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = backend.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = backend.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await;
            });
        }
    });
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(support::spec(None), metrics.clone());
    route.set_ready(vec![at]);
    let addr = support::proxy(route, metrics, support::bounds()).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "answered: {got:?}");
}
