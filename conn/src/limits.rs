//! Bounds on what one client can hold: a cap on open connections per
//! listener, the TLS handshake timeout, and the bounds every gpuscale HTTP
//! server shares (`gpuscale-conn`: header and idle timeouts, HTTP/2 pings
//! and stream limits).

use std::time::Duration;

pub use gpuscale_conn::{Activity, InFlight, accept, builder, serve};

/// Set by flags.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
}
