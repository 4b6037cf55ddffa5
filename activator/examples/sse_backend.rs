//! The model server of bench/activator-sse.sh: every request is answered
//! with a server-sent event stream that never ends, one chunk in the shape
//! of an OpenAI-compatible `chat.completion.chunk` every `INTERVAL`, the
//! first at once (the token stream of a long generation). HTTP/1.1 and
//! cleartext HTTP/2 (prior knowledge) on one port, any number of streams
//! per HTTP/2 connection.
//!
//!   cargo run --release -p gpuscale-activator --example sse_backend -- 127.0.0.1:8000 1s

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::StreamBody;
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

const CHUNK: &str = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"chat\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}]}\n\n";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8000".into());
    let interval = gpuscale_util::duration::parse(&args.next().unwrap_or_else(|| "1s".into()))?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(listen, interval))
}

async fn serve(listen: String, interval: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(None);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let builder = builder.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| stream(req, interval));
            let _ = builder.serve_connection(TokioIo::new(tcp), svc).await;
        });
    }
}

type Events = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

async fn stream(_req: Request<Incoming>, every: Duration) -> Result<Response<Events>, Infallible> {
    let ticks = tokio::time::interval(every);
    let events = futures::stream::unfold(ticks, |mut ticks| async move {
        ticks.tick().await;
        Some((Ok(Frame::data(Bytes::from_static(CHUNK.as_bytes()))), ticks))
    })
    .boxed();
    let mut resp = Response::new(StreamBody::new(events));
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    Ok(resp)
}
