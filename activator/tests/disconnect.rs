//! Held clients that go away, whatever they sent: HTTP/1 clients with
//! bodies of 1 KiB to 1 MiB that hang up after the body or in the middle
//! of it, HTTP/2 clients that reset their stream or close the connection.
//! Each leaves the queue counted as abandoned, and the woken upstream never
//! sees its request. Held bodies are read into memory within
//! `--max-held-bytes`; one that would pass it is answered 503.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gpuscale_activator::handler::Bounds;
use gpuscale_activator::metrics::Metrics;
use gpuscale_activator::route::Route;
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

async fn until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Held {
    metrics: Arc<Metrics>,
    route: Arc<Route>,
    addr: std::net::SocketAddr,
}

async fn held(bounds: Bounds) -> Held {
    let metrics = Arc::new(Metrics::new().unwrap());
    let route = Route::new(support::spec(None), metrics.clone());
    let addr = support::proxy(route.clone(), metrics.clone(), bounds).await;
    Held {
        metrics,
        route,
        addr,
    }
}

impl Held {
    fn pending(&self) -> i64 {
        self.metrics
            .pending
            .with_label_values(&["inference", "chat"])
            .get()
    }

    fn abandoned(&self) -> u64 {
        self.metrics
            .abandoned
            .with_label_values(&["inference", "chat"])
            .get()
    }

    /// The target wakes onto a backend that counts connections: none may come.
    async fn wake_and_see_nothing_forwarded(&self) {
        let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = backend.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        tokio::spawn(async move {
            while backend.accept().await.is_ok() {
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
        self.route.set_ready(vec![at]);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(seen.load(Ordering::SeqCst), 0, "the upstream saw a request");
        let forwarded = self
            .metrics
            .forwarded
            .with_label_values(&["inference", "chat"]);
        assert_eq!(forwarded.get(), 0);
        assert_eq!(
            self.metrics.held_body_bytes.get(),
            0,
            "held bytes given back"
        );
    }
}

fn head(len: usize) -> String {
    format!("POST /v1/chat HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_gone_after_its_body_is_never_forwarded_whatever_its_size() {
    for size in [1 << 10, 128 << 10, 1 << 20] {
        let h = held(support::bounds()).await;
        let mut c = TcpStream::connect(h.addr).await.unwrap();
        c.write_all(head(size).as_bytes()).await.unwrap();
        c.write_all(&vec![b'x'; size]).await.unwrap();
        until("the request to be held", || h.pending() == 1).await;
        until("the body to be read", || {
            h.metrics.held_body_bytes.get() == size as i64
        })
        .await;
        drop(c);
        until(
            &format!("the hang-up of a {size}-byte body to be counted"),
            || h.abandoned() == 1,
        )
        .await;
        assert_eq!(h.pending(), 0);
        h.wake_and_see_nothing_forwarded().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_gone_in_the_middle_of_its_body_is_never_forwarded() {
    let h = held(support::bounds()).await;
    let mut c = TcpStream::connect(h.addr).await.unwrap();
    c.write_all(head(1 << 20).as_bytes()).await.unwrap();
    c.write_all(&vec![b'x'; 300 << 10]).await.unwrap();
    until("the request to be held", || h.pending() == 1).await;
    drop(c);
    until("the hang-up mid-body to be counted", || h.abandoned() == 1).await;
    h.wake_and_see_nothing_forwarded().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_bodies_past_max_held_bytes_are_answered_503_and_counted() {
    let h = held(Bounds {
        max_held_bytes: 64 << 10,
        ..support::bounds()
    })
    .await;
    let mut c = TcpStream::connect(h.addr).await.unwrap();
    c.write_all(head(100 << 10).as_bytes()).await.unwrap();
    c.write_all(&vec![b'x'; 100 << 10]).await.unwrap();
    let mut got = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut got))
        .await
        .unwrap()
        .unwrap();
    let got = String::from_utf8_lossy(&got[..n]);
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains("retry-after: 10"), "{got}");
    let refused = h
        .metrics
        .refused
        .with_label_values(&["inference", "chat", "held_bytes_full"]);
    assert_eq!(refused.get(), 1);
    until("the bytes read to be given back", || {
        h.metrics.held_body_bytes.get() == 0
    })
    .await;
}

type Chunks = futures::channel::mpsc::Sender<Result<Frame<Bytes>, Infallible>>;
type H2Body = StreamBody<futures::channel::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>>;

/// An HTTP/2 request held with 16 KiB of its body sent: the client's
/// socket, the connection's task, its sender (kept to keep the
/// connection), the response's task and the body's sender.
struct H2 {
    fd: std::os::fd::RawFd,
    conn: tokio::task::JoinHandle<()>,
    _send: hyper::client::conn::http2::SendRequest<H2Body>,
    response: tokio::task::JoinHandle<()>,
    _body: Chunks,
}

async fn h2_held(h: &Held) -> H2 {
    use futures::SinkExt as _;
    let tcp = TcpStream::connect(h.addr).await.unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    let (mut body, rx) = futures::channel::mpsc::channel(4);
    let req = http::Request::post("http://x/v1/chat")
        .body(StreamBody::new(rx))
        .unwrap();
    let answer = send.send_request(req);
    let response = tokio::spawn(async move {
        let _ = answer.await;
    });
    body.send(Ok(Frame::data(Bytes::from(vec![b'x'; 16 << 10]))))
        .await
        .unwrap();
    until("the HTTP/2 request to be held", || h.pending() == 1).await;
    H2 {
        fd,
        conn,
        _send: send,
        response,
        _body: body,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_reset_while_held_is_never_forwarded() {
    let h = held(support::bounds()).await;
    let c = h2_held(&h).await;
    // Dropping the response future resets the stream (RST_STREAM CANCEL);
    // the connection stays.
    c.response.abort();
    until("the reset to be counted", || h.abandoned() == 1).await;
    assert!(!c.conn.is_finished(), "the connection stays open");
    h.wake_and_see_nothing_forwarded().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_closed_while_held_is_never_forwarded() {
    let h = held(support::bounds()).await;
    let c = h2_held(&h).await;
    // The client's side of the connection goes (as a client killed or a
    // network gone would): FIN under hyper's feet, no RST_STREAM, no GOAWAY.
    // SAFETY: `fd` is the open socket of the connection `c` keeps.
    assert_eq!(unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) }, 0);
    until("the closed connection to be counted", || h.abandoned() == 1).await;
    drop(c);
    h.wake_and_see_nothing_forwarded().await;
}
