//! Accepting connections without letting clients exhaust the process: a cap
//! on open connections, backoff when `accept` fails (EMFILE would otherwise
//! spin the loop at full CPU) and warnings that cannot flood the log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::backoff::Backoff;

/// How long clients may hold the server; set by flags.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; beyond it new ones wait in the listen backlog.
    pub max_connections: usize,
    /// Time to send a complete request header, from connecting or from the
    /// previous response; idle keep-alive connections close after it too.
    pub read_header_timeout: Duration,
    pub tls_handshake_timeout: Duration,
    /// Once a write blocks, time the client has to take the responses it
    /// asked for (`slow_reader`).
    pub write_timeout: Duration,
    /// Requests answered from one read of the client's bytes (pipelined).
    pub max_pipelined: u64,
    /// Time a request may wait for its turn of the bcrypt checker.
    pub auth_queue_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            read_header_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(5),
            max_pipelined: 16,
            auth_queue_timeout: Duration::from_secs(5),
        }
    }
}

/// One accepted connection; its slot frees when this is dropped.
pub struct Accepted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub slot: OwnedSemaphorePermit,
}

pub struct Acceptor {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    backoff: Backoff,
    errors: Throttled,
}

impl Acceptor {
    pub fn new(listener: TcpListener, limits: &Limits) -> Self {
        warn_if_fds_below(limits.max_connections);
        Self {
            listener,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            backoff: Backoff::new(Duration::from_millis(10), Duration::from_secs(1)),
            errors: Throttled::new(Duration::from_secs(10)),
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The next connection, once a slot is free. Cancel-safe.
    pub async fn next(&mut self) -> Accepted {
        let slot = loop {
            // The semaphore is never closed; if it were, wait as if full.
            if let Ok(slot) = self.slots.clone().acquire_owned().await {
                break slot;
            }
            std::future::pending::<()>().await;
        };
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    self.backoff.reset();
                    return Accepted { stream, peer, slot };
                }
                Err(e) => {
                    if let Some(suppressed) = self.errors.admit() {
                        warn!(error = %e, suppressed, "accept failed; backing off");
                    }
                    tokio::time::sleep(self.backoff.next_delay()).await;
                }
            }
        }
    }
}

/// Lets one event through per `every`, counting the ones held back.
struct Throttled {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(number held back since the last one)` when this event may be logged.
    fn admit(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Says at startup when the fd limit is reached before the connection cap.
fn warn_if_fds_below(max_connections: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    // Headroom for NVML, the kubelet and API clients, logs.
    let usable = usize::try_from(lim.rlim_cur)
        .unwrap_or(usize::MAX)
        .saturating_sub(64);
    if usable < max_connections {
        warn!(
            fd_limit = lim.rlim_cur,
            max_connections,
            "the open-file limit is below --max-connections; accept will fail (and back off) before the cap is reached"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_admits_one_per_period_and_counts_the_rest() {
        let mut t = Throttled::new(Duration::from_secs(3600));
        assert_eq!(t.admit(), Some(0));
        assert_eq!(t.admit(), None);
        assert_eq!(t.admit(), None);
        t.last = Instant::now().checked_sub(Duration::from_secs(7200));
        assert_eq!(t.admit(), Some(2));
    }
}
