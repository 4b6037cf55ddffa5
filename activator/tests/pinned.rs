//! A client connection's requests go over one upstream connection it keeps
//! (no pool checkout per request); another client connection gets its own;
//! a pinned connection the model server closed is replaced, and the
//! request on it answered.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpuscale_activator::metrics::Metrics;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A model server that counts the connections it accepted and answers
/// `ok` to each request; with `close_after`, it closes a connection after
/// that many answers (as a server's keep-alive limit does).
async fn upstream(close_after: Option<usize>) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((c, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(c, close_after));
        }
    });
    (addr, accepted)
}

async fn serve(c: TcpStream, close_after: Option<usize>) {
    let mut c = BufReader::new(c);
    let mut answered = 0;
    loop {
        let mut line = String::new();
        // The request head (the stories send no body).
        loop {
            line.clear();
            if c.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
        }
        answered += 1;
        let last = close_after == Some(answered);
        let head = if last { "connection: close\r\n" } else { "" };
        let answer = format!("HTTP/1.1 200 OK\r\n{head}content-length: 3\r\n\r\nok\n");
        let _ = c.get_mut().write_all(answer.as_bytes()).await;
        if last {
            return;
        }
    }
}

/// `n` GETs on one client connection; each answer's status line.
async fn gets(proxy: SocketAddr, n: usize) -> Vec<String> {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        c.write_all(b"GET /v1/models HTTP/1.1\r\nhost: chat.example\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = String::new();
        while !got.ends_with("ok\n") {
            let k = c.read(&mut buf).await.unwrap();
            assert!(k > 0, "the proxy closed the connection after: {got}");
            got.push_str(&String::from_utf8_lossy(&buf[..k]));
        }
        out.push(got.lines().next().unwrap_or_default().to_string());
    }
    out
}

/// A proxy to a model server closing after `close_after` answers, and
/// five GETs through it on one client connection, all answered 200: the
/// proxy, and how many connections the server accepted.
async fn five_gets(close_after: Option<usize>) -> (SocketAddr, Arc<AtomicUsize>) {
    let (up, accepted) = upstream(close_after).await;
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = gpuscale_activator::route::Route::new(support::spec(None), metrics.clone());
    route.set_ready(vec![up]);
    let proxy = support::proxy(route, metrics, support::bounds()).await;
    let answers = gets(proxy, 5).await;
    assert!(
        answers.iter().all(|l| l == "HTTP/1.1 200 OK"),
        "{answers:?}"
    );
    (proxy, accepted)
}

#[tokio::test]
async fn a_client_connection_keeps_one_upstream_connection() {
    let (proxy, accepted) = five_gets(None).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "five requests, one connection"
    );
    gets(proxy, 2).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "another client connection has its own"
    );
}

#[tokio::test]
async fn a_pinned_connection_the_server_closed_is_replaced() {
    let (_, accepted) = five_gets(Some(2)).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "two answers per connection"
    );
}
