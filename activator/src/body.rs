//! The body types of a forwarded request and of the activator's answers.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper::body::{Frame, Incoming, SizeHint};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BoxError>;

/// A forwarded request's body: the client's, streamed as it is (the warm
/// path: no box), or one the activator read first (peeked, held).
pub enum ReqBody {
    Streamed(Incoming),
    Boxed(Body),
}

impl hyper::body::Body for ReqBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Self::Streamed(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(BoxError::from))),
            Self::Boxed(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Streamed(b) => b.is_end_stream(),
            Self::Boxed(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Streamed(b) => b.size_hint(),
            Self::Boxed(b) => b.size_hint(),
        }
    }
}

impl ReqBody {
    /// The body as one boxed type (to be read while held).
    pub fn boxed(self) -> Body {
        match self {
            Self::Streamed(b) => b.map_err(BoxError::from).boxed(),
            Self::Boxed(b) => b,
        }
    }
}
