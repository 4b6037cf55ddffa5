//! How gpuscale's HTTP servers (the adapter's listeners, the activator)
//! bound what one client can hold: the HTTP/1 header timeout, HTTP/2
//! keep-alive pings and stream limits, and an idle timeout that counts
//! requests, not bytes (an HTTP/2 peer that only answers pings is still
//! idle; a request in flight, such as one the activator holds, is not).

mod limits;

pub use limits::Limits;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpuscale_util::backoff::Backoff;
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
const PING_INTERVAL: Duration = Duration::from_secs(20);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_STREAMS: u32 = 250;
/// Time an idle connection gets to finish after GOAWAY.
const DRAIN: Duration = Duration::from_secs(5);

/// Requests in flight on one connection and when the last one ended.
#[derive(Debug)]
pub struct Activity {
    inflight: AtomicUsize,
    last: Mutex<Instant>,
}

/// Marks a request in flight until dropped.
pub struct InFlight(Arc<Activity>);

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inflight: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        })
    }

    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.inflight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    fn idle_since(&self) -> Option<Instant> {
        (self.inflight.load(Ordering::Acquire) == 0)
            .then(|| *self.last.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Resolves once no request has been in flight for `idle`.
    async fn idle(&self, idle: Duration) {
        loop {
            let wait = match self.idle_since() {
                Some(since) if since.elapsed() >= idle => return,
                Some(since) => idle - since.elapsed(),
                None => idle,
            };
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connection builder both listeners use: HTTP/1 header timeout,
/// HTTP/2 pings (a silent peer is dropped) and a stream cap.
pub fn builder(http1_only: bool) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    b.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT)
        .max_concurrent_streams(MAX_STREAMS);
    if http1_only { b.http1_only() } else { b }
}

/// Serves one connection until it ends or stays idle for `idle`; then it
/// gets a graceful close (GOAWAY for HTTP/2) and a short drain.
pub async fn serve<I, S, B>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    svc: S,
    activity: Arc<Activity>,
    idle: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<http::Request<Incoming>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => {
            if let Err(e) = res {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            return;
        }
        _ = activity.idle(idle) => tracing::debug!(?idle, "closing an idle connection"),
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(DRAIN, conn).await;
}

/// Accepts a connection once a slot is free; backs off when accept fails
/// (out of file descriptors) instead of spinning.
pub async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let slot = slots.clone().acquire_owned().await.ok()?;
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => return Some((tcp, peer, slot)),
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?delay, "accept failed");
                tokio::time::sleep(delay).await;
            }
        }
    }
}
