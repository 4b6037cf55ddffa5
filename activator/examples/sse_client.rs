//! The clients of bench/activator-sse.sh: opens STREAMS streaming chat
//! completions (`"stream": true`) to ADDR and keeps them open, reading
//! every event. `h1`: one HTTP/1.1 connection per stream (what most SDKs
//! do); `h2`: cleartext HTTP/2, 250 streams per connection (the
//! activator's stream cap). Prints `open N` once every stream has had its
//! first event, then `events N` (all streams together) every 5 s, until
//! killed.
//!
//!   cargo run --release -p gpuscale-activator --example sse_client -- 127.0.0.1:8080 10000 h1

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const BODY: &str = r#"{"model":"chat","stream":true,"messages":[{"role":"user","content":"Tell me a long story."}]}"#;
const PER_H2_CONNECTION: usize = 250;

#[derive(Default)]
struct Counts {
    open: AtomicUsize,
    events: AtomicUsize,
    failed: AtomicUsize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:8080".into())
        .parse()?;
    let streams: usize = args.next().unwrap_or_else(|| "10000".into()).parse()?;
    let proto = args.next().unwrap_or_else(|| "h1".into());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(addr, streams, &proto))
}

async fn run(
    addr: SocketAddr,
    streams: usize,
    proto: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let counts = Arc::new(Counts::default());
    match proto {
        "h1" => {
            for _ in 0..streams {
                tokio::spawn(h1(addr, counts.clone()));
            }
        }
        "h2" => {
            for first in (0..streams).step_by(PER_H2_CONNECTION) {
                let n = PER_H2_CONNECTION.min(streams - first);
                tokio::spawn(h2(addr, n, counts.clone()));
            }
        }
        other => return Err(format!("{other:?}: h1 or h2").into()),
    }
    let mut said_open = false;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    for i in 0u64.. {
        tick.tick().await;
        let open = counts.open.load(Ordering::Relaxed);
        if !said_open && open == streams {
            println!("open {open}");
            said_open = true;
        }
        if i % 25 == 0 {
            let events = counts.events.load(Ordering::Relaxed);
            let failed = counts.failed.load(Ordering::Relaxed);
            println!("events {events} open {open} failed {failed}");
        }
    }
    Ok(())
}

/// One stream on its own HTTP/1.1 connection: each `data:` read is an event.
async fn h1(addr: SocketAddr, counts: Arc<Counts>) {
    let Ok(mut c) = TcpStream::connect(addr).await else {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: models.test\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    if c.write_all(req.as_bytes()).await.is_err() {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut buf = vec![0u8; 4096];
    let mut first = true;
    while let Ok(n) = c.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let events = buf[..n].windows(5).filter(|w| w == b"data:").count();
        if events > 0 && first {
            first = false;
            counts.open.fetch_add(1, Ordering::Relaxed);
        }
        counts.events.fetch_add(events, Ordering::Relaxed);
    }
    counts.failed.fetch_add(1, Ordering::Relaxed);
}

/// `n` streams on one HTTP/2 connection: each data frame is an event.
async fn h2(addr: SocketAddr, n: usize, counts: Arc<Counts>) {
    let Ok(tcp) = TcpStream::connect(addr).await else {
        counts.failed.fetch_add(n, Ordering::Relaxed);
        return;
    };
    let Ok((send, conn)) = hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(
        TokioExecutor::new(),
        TokioIo::new(tcp),
    )
    .await
    else {
        counts.failed.fetch_add(n, Ordering::Relaxed);
        return;
    };
    tokio::spawn(conn);
    for _ in 0..n {
        let mut send = send.clone();
        let counts = counts.clone();
        tokio::spawn(async move {
            let req = http::Request::post("http://models.test/v1/chat/completions")
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(Full::new(Bytes::from_static(BODY.as_bytes())));
            let Ok(req) = req else { return };
            let Ok(resp) = send.send_request(req).await else {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let mut body = resp.into_body();
            let mut first = true;
            while let Some(Ok(frame)) = body.frame().await {
                if frame.is_data() {
                    if first {
                        first = false;
                        counts.open.fetch_add(1, Ordering::Relaxed);
                    }
                    counts.events.fetch_add(1, Ordering::Relaxed);
                }
            }
            counts.failed.fetch_add(1, Ordering::Relaxed);
        });
    }
}
