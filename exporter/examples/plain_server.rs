//! Baseline for bench/load.sh: a bare hyper server handing out a fixed body
//! of the same size as the exporter's exposition, on the same runtime shape.
//! The ratio between the two is the cost of being a real exporter.
//!
//!   cargo run --release -p gpuscale-exporter --example plain_server -- 127.0.0.1:9500 118000 [WORKERS]

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9500".into());
    let size: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(120_000);
    let workers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let body = Bytes::from(vec![b'x'; size]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let body = body.clone();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
