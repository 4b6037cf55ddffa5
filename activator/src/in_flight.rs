//! The requests open through the activator per route: from arrival (held
//! or not) until the response body ends or the client goes away. Always
//! in the path, the activator has this count exactly: the idle signal of
//! a route, with no model-server metric needed.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, SizeHint};
use prometheus::IntGauge;

use crate::proxy::{Body, BoxError};

/// One open request: counted while it lives.
pub struct Open(IntGauge);

impl Open {
    pub fn begin(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }

    /// The response, whose body keeps the request open until it ends (or
    /// is dropped: the client went away). One box: the upstream's body is
    /// wrapped as it is, not boxed twice.
    pub fn until_answered<B>(self, resp: Response<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Sync + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        resp.map(|inner| Counted { inner, _open: self }.boxed())
    }
}

/// A response body that holds its request's [`Open`].
struct Counted<B> {
    inner: B,
    _open: Open,
}

impl<B> hyper::body::Body for Counted<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map(|f| f.map(|r| r.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_until_the_body_is_read_or_dropped() {
        let g = IntGauge::new("g", "h").unwrap();
        let resp =
            Open::begin(g.clone()).until_answered(crate::proxy::text(http::StatusCode::OK, "x"));
        assert_eq!(g.get(), 1);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"x\n");
        assert_eq!(g.get(), 0);
        let open = Open::begin(g.clone());
        assert_eq!(g.get(), 1);
        drop(open);
        assert_eq!(g.get(), 0);
    }
}
