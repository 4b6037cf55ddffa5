//! The requests open through the activator per route: from arrival (held
//! or not) until the response body ends or the client goes away. Always
//! in the path, the activator has this count exactly: the idle signal of
//! a route, with no model-server metric needed.

use http::Response;
use http_body_util::BodyExt as _;
use prometheus::IntGauge;

use crate::proxy::Body;

/// One open request: counted while it lives.
pub struct Open(IntGauge);

impl Open {
    pub fn begin(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }

    /// The response, whose body keeps the request open until it ends (or
    /// is dropped: the client went away).
    pub fn until_answered(self, resp: Response<Body>) -> Response<Body> {
        resp.map(|inner| {
            inner
                .map_frame(move |f| {
                    let _open = &self;
                    f
                })
                .boxed()
        })
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
