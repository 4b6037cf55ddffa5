//! The body of a held request. One of declared length was checked against
//! `--max-held-body` on arrival and waits unread in the client's
//! connection. One of undeclared length (HTTP/1.1 chunked, HTTP/2 without
//! `content-length`) is read while held, up to the same bound: past it the
//! request is refused, so no body is held without a bound either way. The
//! part read is sent first on release, then the rest as it streams.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Frame, SizeHint};

use crate::proxy::{Body, BoxError};
use crate::route::{Held, Release};

/// How a hold ended.
pub enum Waited {
    /// Released, with the body to forward.
    Released(Release, Body),
    /// The route dropped the request (it is answered 503).
    Dropped,
    /// The body grew past the bound while held.
    TooLarge,
    /// Reading the body failed (the client went away, or a bad chunk).
    BodyFailed(String),
}

/// Waits for `held`'s release, reading a body of undeclared length up to
/// `cap` bytes meanwhile. Cancel-safe for `held` (the wait limit drops
/// this future).
pub async fn wait(held: &mut Held, body: Body, cap: usize, client: Option<Client>) -> Waited {
    let mut reading = undeclared(&body);
    let mut read = Prefix {
        frames: VecDeque::new(),
        len: 0,
        rest: Some(body),
    };
    loop {
        tokio::select! {
            release = held.released() => {
                return match release {
                    Some(r) => Waited::Released(r, read.boxed()),
                    None => Waited::Dropped,
                };
            }
            () = gone(client) => return Waited::BodyFailed("the client closed its connection".into()),
            frame = next_frame(&mut read.rest), if reading => match frame {
                None => {
                    read.rest = None;
                    reading = false;
                }
                Some(Ok(f)) => {
                    read.len += f.data_ref().map_or(0, Bytes::len);
                    if read.len > cap {
                        return Waited::TooLarge;
                    }
                    read.frames.push_back(f);
                }
                Some(Err(e)) => return Waited::BodyFailed(e.to_string()),
            },
        }
    }
}

/// The client's socket, to see it close while its request is held and its
/// body unread (hyper sees an end of stream only once it reads the body).
#[derive(Debug, Clone, Copy)]
pub struct Client(pub std::os::fd::RawFd);

/// Resolves once the client has closed (or half-closed) its connection.
/// The descriptor stays open while this runs: the request's connection
/// owns it and ends this future before closing it.
async fn gone(client: Option<Client>) {
    let Some(Client(fd)) = client else {
        return std::future::pending().await;
    };
    loop {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd; a zero timeout never blocks.
        let n = unsafe { libc::poll(&raw mut p, 1, 0) };
        if n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A body whose length nobody declared and that may still carry data.
pub fn undeclared(b: &Body) -> bool {
    b.size_hint().exact().is_none() && !b.is_end_stream()
}

async fn next_frame(rest: &mut Option<Body>) -> Option<Result<Frame<Bytes>, BoxError>> {
    rest.as_mut()?.frame().await
}

/// The frames read while held, then the rest of the body.
struct Prefix {
    frames: VecDeque<Frame<Bytes>>,
    len: usize,
    rest: Option<Body>,
}

impl hyper::body::Body for Prefix {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(f) = self.frames.pop_front() {
            if let Some(d) = f.data_ref() {
                self.len -= d.len();
            }
            return Poll::Ready(Some(Ok(f)));
        }
        match self.rest.as_mut() {
            Some(b) => Pin::new(b).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && self.rest.as_ref().is_none_or(|b| b.is_end_stream())
    }

    /// Read to its end while held: its length is known now.
    fn size_hint(&self) -> SizeHint {
        match &self.rest {
            None => SizeHint::with_exact(self.len as u64),
            Some(b) => {
                let mut h = SizeHint::new();
                h.set_lower(self.len as u64 + b.size_hint().lower());
                h
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;

    fn chunked(chunks: &[&'static str]) -> Body {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
            .collect();
        StreamBody::new(futures::stream::iter(frames)).boxed()
    }

    #[tokio::test]
    async fn the_read_part_is_sent_first_then_the_rest() {
        let mut b = Prefix {
            frames: VecDeque::from([Frame::data(Bytes::from_static(b"ab"))]),
            len: 2,
            rest: Some(chunked(&["cd", "e"])),
        };
        assert!(b.size_hint().exact().is_none());
        let all = (&mut b).collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"abcde");
        let done = Prefix {
            frames: VecDeque::from([Frame::data(Bytes::from_static(b"xyz"))]),
            len: 3,
            rest: None,
        };
        assert_eq!(done.size_hint().exact(), Some(3));
    }

    #[test]
    fn only_bodies_of_undeclared_length_are_read() {
        assert!(undeclared(&chunked(&["a"])));
        let full = http_body_util::Full::new(Bytes::from_static(b"abc"))
            .map_err(|never| match never {})
            .boxed();
        assert!(!undeclared(&full));
        let empty = http_body_util::Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed();
        assert!(!undeclared(&empty));
    }
}
