//! Baseline for bench/activator.sh: a bare hyper reverse proxy on the same
//! runtime shape as the activator (multi-threaded tokio, HTTP/1.1 and
//! HTTP/2 accepted, pooled keep-alive HTTP/1.1 upstream connections,
//! bodies streamed both ways) and nothing else: no routing, no metrics, no
//! holding. The ratio between the two is the cost of being the activator.
//!
//!   cargo run --release -p gpuscale-activator --example bare_proxy -- 127.0.0.1:8081 127.0.0.1:8000

use std::convert::Infallible;

use http::Uri;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8081".into());
    let upstream = args.next().unwrap_or_else(|| "127.0.0.1:8000".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(listen, upstream))
}

async fn serve(listen: String, upstream: String) -> Result<(), Box<dyn std::error::Error>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build(connector);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                forward(client.clone(), upstream.clone(), req)
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}

async fn forward(
    client: Client<HttpConnector, Incoming>,
    upstream: String,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri: Uri = match format!("http://{upstream}{path}").parse() {
        Ok(u) => u,
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    *req.uri_mut() = uri;
    *req.version_mut() = http::Version::HTTP_11;
    match client.request(req).await {
        Ok(resp) => Ok(resp.map(|b| b.boxed())),
        Err(_) => Ok(status(StatusCode::BAD_GATEWAY)),
    }
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(
        Full::new(bytes::Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r
}
