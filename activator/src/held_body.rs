//! The body of a held request, read into memory while it is held, up to
//! `--max-held-body` (a larger declared `Content-Length` is refused on
//! arrival, a body that grows past it while held is refused then), and
//! within `--max-held-bytes` for all held bodies together. Reading it is
//! what shows a client gone mid-body (the body fails) whatever its size;
//! once it is read, the client's FIN is next in its socket, which is
//! watched for readiness (a duplicate of the descriptor registered with
//! the runtime: no timer per held request). The part read is sent first on
//! release, then the rest as it streams.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Frame, SizeHint};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

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
    /// Held bodies already fill `--max-held-bytes`.
    BudgetFull,
    /// Reading the body failed, or the client closed its connection.
    BodyFailed(String),
}

/// Bytes of held bodies read into memory now, process-wide.
static HELD_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The bound on all held bodies together, and the gauge that shows them.
#[derive(Clone)]
pub struct Budget {
    pub limit: usize,
    pub gauge: prometheus::IntGauge,
}

impl Budget {
    fn take(&self, n: usize) -> bool {
        let ok = HELD_BYTES
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v.saturating_add(n) <= self.limit).then_some(v + n)
            })
            .is_ok();
        if ok {
            self.gauge.add(n as i64);
        }
        ok
    }

    fn give(&self, n: usize) {
        HELD_BYTES.fetch_sub(n, Ordering::SeqCst);
        self.gauge.sub(n as i64);
    }
}

/// Waits for `held`'s release, reading its body (up to `cap` bytes, within
/// `budget`) and watching its client meanwhile. Cancel-safe for `held`
/// (the wait limit drops this future).
pub async fn wait(
    held: &mut Held,
    body: Body,
    cap: usize,
    budget: &Budget,
    client: Option<Client>,
) -> Waited {
    let mut reading = !body.is_end_stream();
    let mut read = Prefix {
        frames: VecDeque::new(),
        len: 0,
        declared: body.size_hint().exact(),
        rest: Some(body),
        budget: budget.clone(),
        charged: 0,
    };
    let watch = Watch::new(client);
    loop {
        tokio::select! {
            release = held.released() => {
                return match release {
                    Some(r) => Waited::Released(r, read.boxed()),
                    None => Waited::Dropped,
                };
            }
            () = watch.closed() => return Waited::BodyFailed("the client closed its connection".into()),
            frame = next_frame(&mut read.rest), if reading => match frame {
                None => {
                    read.rest = None;
                    reading = false;
                }
                Some(Ok(f)) => {
                    let n = f.data_ref().map_or(0, Bytes::len);
                    if read.len + n > cap {
                        return Waited::TooLarge;
                    }
                    if !budget.take(n) {
                        return Waited::BudgetFull;
                    }
                    read.charged += n;
                    read.len += n;
                    read.frames.push_back(f);
                }
                Some(Err(e)) => return Waited::BodyFailed(e.to_string()),
            },
        }
    }
}

/// The client's socket, to see it close while its request is held (hyper
/// sees an end of stream only when it reads, and it does not read past
/// the body while the response is pending).
#[derive(Debug, Clone, Copy)]
pub struct Client(pub RawFd);

/// A duplicate of the client's descriptor registered for readiness, so the
/// runtime wakes the hold when something arrives on the socket (data or
/// the FIN); `None` without a client. Without a descriptor to spare for
/// the duplicate, the socket is polled every 100 ms instead.
enum Watch {
    None,
    Ready(AsyncFd<OwnedFd>),
    Poll(RawFd),
}

impl Watch {
    fn new(client: Option<Client>) -> Self {
        let Some(Client(fd)) = client else {
            return Self::None;
        };
        // SAFETY: `fd` is the request's connection's, open while the
        // request (and so this hold) lasts; dup does not touch it.
        let dup = unsafe { libc::dup(fd) };
        if dup < 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "no descriptor to watch a held client; polling it");
            return Self::Poll(fd);
        }
        // SAFETY: `dup` is a new descriptor this value owns alone.
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        // SAFETY: an OwnedFd keeps its descriptor open, the same one, until
        // the AsyncFd that owns it is dropped.
        match unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) } {
            Ok(a) => Self::Ready(a),
            Err(_) => Self::Poll(fd),
        }
    }

    /// Resolves once the client has closed (or half-closed) its connection.
    async fn closed(&self) {
        match self {
            Self::None => std::future::pending().await,
            Self::Poll(fd) => loop {
                if hung_up(*fd) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            },
            Self::Ready(a) => loop {
                let Ok(mut guard) = a.readable().await else {
                    return std::future::pending().await;
                };
                if guard.ready().is_read_closed() || hung_up(a.as_raw_fd()) {
                    return;
                }
                // Data (a body not read yet, a pipelined request): wait for the next arrival.
                guard.clear_ready();
            },
        }
    }
}

/// Whether the peer has closed its side of `fd` (FIN, reset or error).
fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd; a zero timeout never blocks.
    let n = unsafe { libc::poll(&raw mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

async fn next_frame(rest: &mut Option<Body>) -> Option<Result<Frame<Bytes>, BoxError>> {
    rest.as_mut()?.frame().await
}

/// The frames read while held, then the rest of the body; the bytes read
/// count against the budget until forwarded (or dropped).
struct Prefix {
    frames: VecDeque<Frame<Bytes>>,
    len: usize,
    /// The client's `Content-Length` (or HTTP/2 `content-length`).
    declared: Option<u64>,
    rest: Option<Body>,
    budget: Budget,
    charged: usize,
}

impl Drop for Prefix {
    fn drop(&mut self) {
        self.budget.give(self.charged);
    }
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
                let n = d.len();
                self.len -= n;
                let paid = n.min(self.charged);
                self.charged -= paid;
                self.budget.give(paid);
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

    /// The declared length, or, read to its end while held, what was read.
    fn size_hint(&self) -> SizeHint {
        if let Some(n) = self.declared {
            return SizeHint::with_exact(n);
        }
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

    fn budget() -> Budget {
        Budget {
            limit: 1 << 20,
            gauge: prometheus::IntGauge::new("g", "h").unwrap(),
        }
    }

    #[tokio::test]
    async fn the_read_part_is_sent_first_then_the_rest() {
        let mut b = Prefix {
            frames: VecDeque::from([Frame::data(Bytes::from_static(b"ab"))]),
            len: 2,
            declared: None,
            rest: Some(chunked(&["cd", "e"])),
            budget: budget(),
            charged: 0,
        };
        assert!(b.size_hint().exact().is_none());
        let all = (&mut b).collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"abcde");
        let done = Prefix {
            frames: VecDeque::from([Frame::data(Bytes::from_static(b"xyz"))]),
            len: 3,
            declared: None,
            rest: None,
            budget: budget(),
            charged: 0,
        };
        assert_eq!(done.size_hint().exact(), Some(3));
    }
}
