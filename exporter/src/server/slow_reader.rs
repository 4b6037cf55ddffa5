//! Clients that send requests but do not read the answers.
//!
//! The header read timeout only covers reading: a client that pipelines
//! requests and never reads keeps its connection slot while the server waits
//! for the socket to drain. [`Guarded`] wraps a connection's stream so that
//! once a write blocks, everything the server has to send must be taken
//! within the write timeout (the window closes only when the client sends
//! new bytes after the server has written all it had, not at each byte
//! taken, so neither a pipeline nor reading a trickle keeps it open), and counts the reads that bring new bytes so the service can
//! tell requests answered from bytes already received (pipelined ones).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// What the service learns about its connection's reads.
#[derive(Debug, Default)]
pub struct Reads {
    /// Reads that returned data.
    reads: AtomicU64,
    /// `reads` when the service last looked.
    seen: AtomicU64,
    /// Requests answered since the last read that returned data.
    since_read: AtomicU64,
}

impl Reads {
    /// Counts one request; how many were answered from the same read,
    /// this one included. Requests of one connection come one at a time.
    pub fn request(&self) -> u64 {
        let now = self.reads.load(Ordering::Relaxed);
        if self.seen.swap(now, Ordering::Relaxed) == now {
            self.since_read.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.since_read.store(1, Ordering::Relaxed);
            1
        }
    }
}

/// A stream with a write timeout that counts its reads into [`Reads`].
pub struct Guarded<S> {
    inner: S,
    timeout: Duration,
    reads: Arc<Reads>,
    /// Armed when a write first blocks; `None` while the client keeps up.
    deadline: Option<Pin<Box<Sleep>>>,
    /// The last write call completed (did not block).
    wrote: bool,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, timeout: Duration, reads: Arc<Reads>) -> Self {
        Self {
            inner,
            timeout,
            reads,
            deadline: None,
            wrote: true,
        }
    }

    /// After a write call: arm the deadline on `Pending` and fail once it passed.
    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.wrote = true;
            return r;
        }
        self.wrote = false;
        let timeout = self.timeout;
        let sleep = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + timeout)));
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no response for {timeout:?} (--write-timeout)"),
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            this.reads.reads.fetch_add(1, Ordering::Relaxed);
            // A new request after everything was written: the client kept
            // up, its next response gets a fresh window.
            if this.wrote {
                this.deadline = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.after_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.after_write(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[test]
    fn requests_from_one_read_are_counted_together() {
        let r = Reads::default();
        r.reads.store(1, Ordering::Relaxed);
        assert_eq!((r.request(), r.request(), r.request()), (1, 2, 3));
        r.reads.store(2, Ordering::Relaxed);
        assert_eq!(r.request(), 1);
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_times_out_and_one_that_reads_does_not() {
        let (client, server) = tokio::io::duplex(64);
        let reads = Arc::new(Reads::default());
        let mut g = Guarded::new(server, Duration::from_millis(200), reads.clone());
        let err = g.write_all(&[0u8; 4096]).await.err().map(|e| e.kind());
        assert_eq!(err, Some(io::ErrorKind::TimedOut));

        let (mut client2, server) = tokio::io::duplex(64);
        let mut g = Guarded::new(server, Duration::from_millis(200), reads);
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            client2.read_to_end(&mut sink).await.map(|_| sink.len())
        });
        g.write_all(&[0u8; 4096])
            .await
            .expect("a reading client is served");
        g.shutdown().await.expect("shutdown");
        drop(g);
        assert_eq!(reader.await.ok().and_then(Result::ok), Some(4096));
        drop(client);
    }
}
