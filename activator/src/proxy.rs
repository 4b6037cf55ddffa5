//! Forwarding one request to a Ready endpoint: bodies stream both ways
//! unbuffered (server-sent events arrive token by token), hop-by-hop
//! headers are dropped and `X-Forwarded-*` added, as a proxy must. Each
//! route speaks HTTP/1.1 or cleartext HTTP/2 (prior knowledge) upstream.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::config::Protocol;
use gpuscale_util::error::chain;

use crate::pinned::{Pinned, Sent};

pub use crate::body::{Body, BoxError, ReqBody};

/// Clients to the endpoints, connections pooled per endpoint: HTTP/1.1
/// keep-alive, and HTTP/2 (one multiplexed connection per endpoint).
#[derive(Clone)]
pub struct Upstream {
    http1: Client<HttpConnector, ReqBody>,
    h2c: Client<HttpConnector, ReqBody>,
    connect_timeout: Duration,
}

impl Upstream {
    pub fn new(connect_timeout: Duration) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(Duration::from_secs(60));
        let http1 = builder.build(http.clone());
        let h2c = builder.http2_only(true).build(http);
        Self {
            http1,
            h2c,
            connect_timeout,
        }
    }

    /// Sends `req` to `addr` over `proto` (HTTP/1.1 on the client
    /// connection's own upstream connection where it can); the response
    /// body streams as it arrives.
    pub async fn forward(
        &self,
        addr: SocketAddr,
        proto: Protocol,
        mut req: Request<ReqBody>,
        from: (SocketAddr, &Pinned),
    ) -> Result<Response<Incoming>, String> {
        let (peer, pinned) = from;
        prepare(&mut req, proto, peer);
        if proto == Protocol::Http1 {
            match pinned.send(addr, req, self.connect_timeout).await {
                Sent::Done(resp) => return resp.map(strip_response),
                Sent::Declined(r) => req = r,
            }
        }
        upstream_uri(&mut req, addr)?;
        let client = match proto {
            Protocol::Http1 => &self.http1,
            Protocol::H2c => &self.h2c,
        };
        let resp = client.request(req).await.map_err(|e| chain(&e))?;
        Ok(strip_response(resp))
    }
}

fn strip_response(mut resp: Response<Incoming>) -> Response<Incoming> {
    strip_hop_by_hop(resp.headers_mut());
    resp
}

/// Headers that belong to one connection, not to the message (RFC 9110
/// 7.6.1).
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Removes the hop-by-hop headers and those the `Connection` header names.
/// One pass over the (few) headers finds whether there is any: most
/// messages have none, and a lookup per name costs more than the pass.
fn strip_hop_by_hop(h: &mut HeaderMap) {
    if !h.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in &HOP_BY_HOP {
        h.remove(n);
    }
}

/// The absolute URI the pool routes by: the endpoint's address and the
/// request's path (shared, not copied and parsed again).
fn upstream_uri<B>(req: &mut Request<B>, addr: SocketAddr) -> Result<(), String> {
    let mut uri = http::uri::Parts::default();
    uri.scheme = Some(http::uri::Scheme::HTTP);
    uri.authority = Some(
        http::uri::Authority::try_from(addr.to_string())
            .map_err(|e| format!("cannot build the upstream URI: {e}"))?,
    );
    uri.path_and_query = Some(
        req.uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
    );
    *req.uri_mut() =
        Uri::from_parts(uri).map_err(|e| format!("cannot build the upstream URI: {e}"))?;
    Ok(())
}

/// The headers and version of `req` as the endpoint gets them over
/// `proto`, from `peer`; its URI is left as the client sent it.
fn prepare<B>(req: &mut Request<B>, proto: Protocol, peer: SocketAddr) {
    // HTTP/2 carries the host in the URI (`:authority`), HTTP/1 in `Host`.
    let host = req.headers().get(header::HOST).cloned().or_else(|| {
        req.uri()
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    let h = req.headers_mut();
    // gRPC needs `te: trailers`, the one TE an HTTP/2 request may carry.
    let trailers = h
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("trailers"));
    strip_hop_by_hop(h);
    if let Some(host) = &host
        && !h.contains_key(X_FORWARDED_HOST)
    {
        h.insert(X_FORWARDED_HOST, host.clone());
    }
    match proto {
        Protocol::Http1 => {
            *req.version_mut() = Version::HTTP_11;
            if let Some(host) = host {
                req.headers_mut().insert(header::HOST, host);
            }
        }
        // `:authority` names the endpoint; a `Host` that differs from it
        // makes the request malformed (RFC 9113 8.3.1), so the client's
        // host travels in `X-Forwarded-Host` only.
        Protocol::H2c => {
            *req.version_mut() = Version::HTTP_2;
            req.headers_mut().remove(header::HOST);
            if trailers {
                req.headers_mut()
                    .insert(header::TE, HeaderValue::from_static("trailers"));
            }
        }
    }
    let h = req.headers_mut();
    let xff = match h.get(X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(prior) => format!("{prior}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    if let Ok(v) = HeaderValue::try_from(xff) {
        h.insert(X_FORWARDED_FOR, v);
    }
    if !h.contains_key(X_FORWARDED_PROTO) {
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
}

/// `body`, which says so on `signal` when the upstream connection first
/// asks for it (the request's head is written) or drops it (no body to
/// send, or the request failed): held requests are released in order.
pub fn on_first_poll(body: Body, signal: tokio::sync::oneshot::Sender<()>) -> Body {
    Signalled {
        inner: body,
        signal: Some(signal),
    }
    .boxed()
}

struct Signalled {
    inner: Body,
    signal: Option<tokio::sync::oneshot::Sender<()>>,
}

impl hyper::body::Body for Signalled {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(s) = self.signal.take() {
            let _ = s.send(());
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Signalled {
    fn drop(&mut self) {
        if let Some(s) = self.signal.take() {
            let _ = s.send(());
        }
    }
}

/// A plain-text answer of the activator's own.
pub fn text(code: StatusCode, msg: &str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("{msg}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// 503 with `Retry-After`.
pub fn unavailable(msg: &str, retry_after: u32) -> Response<Body> {
    let mut r = text(StatusCode::SERVICE_UNAVAILABLE, msg);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request from 192.0.2.7 as prepared for the endpoint `addr`.
    fn prepared(uri: &str, headers: &[(&str, &str)], addr: &str, proto: Protocol) -> Request<Body> {
        let mut req = Request::builder().uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(text(StatusCode::OK, "").into_body()).unwrap();
        let peer: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        prepare(&mut req, proto, peer);
        upstream_uri(&mut req, addr.parse().unwrap()).unwrap();
        req
    }

    #[test]
    fn hop_by_hop_go_and_forwarded_headers_come() {
        let headers = [
            ("host", "chat.example"),
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("x-forwarded-for", "10.0.0.1"),
            ("authorization", "Bearer t"),
        ];
        let req = prepared("/v1/chat?x=1", &headers, "10.1.2.3:8000", Protocol::Http1);
        let h = req.headers();
        assert_eq!(req.uri().to_string(), "http://10.1.2.3:8000/v1/chat?x=1");
        assert!(
            h.get("connection").is_none() && h.get("x-secret").is_none() && h.get("te").is_none()
        );
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
        assert_eq!(h["x-forwarded-host"], "chat.example");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["host"], "chat.example");
        assert_eq!(h["authorization"], "Bearer t");
    }

    #[test]
    fn h2c_names_the_endpoint_and_keeps_te_trailers() {
        let headers = [
            ("host", "grpc.example"),
            ("te", "trailers"),
            ("connection", "keep-alive"),
        ];
        let req = prepared("/pkg.Svc/Call", &headers, "10.1.2.3:9000", Protocol::H2c);
        assert_eq!(req.version(), Version::HTTP_2);
        assert_eq!(req.uri().to_string(), "http://10.1.2.3:9000/pkg.Svc/Call");
        let h = req.headers();
        assert!(h.get("host").is_none() && h.get("connection").is_none());
        assert_eq!(h["te"], "trailers");
        assert_eq!(h["x-forwarded-host"], "grpc.example");
    }
}
