//! A client connection's own upstream connection. The HTTP/1.1 requests of
//! one client connection to one endpoint go over an upstream connection
//! that the client connection keeps, as nginx's worker does, instead of
//! through the shared pool: no pool lookup, lock or checkout per request
//! (about a seventh of the warm path's CPU, docs/performance.md). It is
//! closed with the client connection. A request it cannot take (the
//! connection is busy with another stream of an HTTP/2 client, or closed
//! before the request was written) goes through the pool as before.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use http::{Request, Response, Uri, header};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

use gpuscale_util::error::chain;

use crate::body::ReqBody;

/// What became of a request offered to the pinned connection.
pub enum Sent {
    /// Answered (or failed after it was written: not sent again).
    Done(Result<Response<Incoming>, String>),
    /// Not written: send it another way.
    Declined(Request<ReqBody>),
}

/// The upstream connection of one client connection (at most one).
#[derive(Default)]
pub struct Pinned(Mutex<Option<(SocketAddr, SendRequest<ReqBody>)>>);

impl Pinned {
    /// Sends `req` (its headers prepared for HTTP/1.1) on this client
    /// connection's upstream connection to `addr`, opened now if it has
    /// none to `addr`.
    pub async fn send(
        &self,
        addr: SocketAddr,
        mut req: Request<ReqBody>,
        connect: Duration,
    ) -> Sent {
        let mut sender = match self.take(addr) {
            Take::Ready(s) => s,
            Take::Busy => return Sent::Declined(req),
            Take::None => match open(addr, connect).await {
                Ok(s) => s,
                Err(e) => return Sent::Done(Err(e)),
            },
        };
        origin_form(&mut req, addr);
        let answer = sender.try_send_request(req);
        self.put(addr, sender);
        match answer.await {
            Ok(resp) => Sent::Done(Ok(resp)),
            Err(mut e) => match e.take_message() {
                Some(req) => Sent::Declined(req),
                None => Sent::Done(Err(chain(e.error()))),
            },
        }
    }

    fn take(&self, addr: SocketAddr) -> Take {
        let Ok(mut slot) = self.0.lock() else {
            return Take::Busy;
        };
        match slot.take() {
            Some((a, s)) if a == addr && s.is_ready() => Take::Ready(s),
            // Still reading the last response: this request is another
            // stream's (HTTP/2 client) or came before the body was read.
            Some((a, s)) if a == addr && !s.is_closed() => {
                *slot = Some((a, s));
                Take::Busy
            }
            // Another endpoint now, or closed: dropping it closes it.
            _ => Take::None,
        }
    }

    fn put(&self, addr: SocketAddr, sender: SendRequest<ReqBody>) {
        if let Ok(mut slot) = self.0.lock()
            && slot.is_none()
        {
            *slot = Some((addr, sender));
        }
    }
}

enum Take {
    Ready(SendRequest<ReqBody>),
    Busy,
    None,
}

/// A new HTTP/1.1 connection to `addr`, driven by its own task until the
/// sender is dropped and its last exchange is done.
async fn open(addr: SocketAddr, connect: Duration) -> Result<SendRequest<ReqBody>, String> {
    let tcp = match tokio::time::timeout(connect, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(format!("tcp connect error: {e}")),
        Err(_) => return Err(format!("tcp connect error: timed out after {connect:?}")),
    };
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| chain(&e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(%addr, error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

/// The request line of a direct connection names the path only; `Host`
/// stays the client's, or names the endpoint when the client sent none.
fn origin_form(req: &mut Request<ReqBody>, addr: SocketAddr) {
    let path = req
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    *req.uri_mut() = Uri::from(path);
    if !req.headers().contains_key(header::HOST)
        && let Ok(v) = http::HeaderValue::try_from(addr.to_string())
    {
        req.headers_mut().insert(header::HOST, v);
    }
}
