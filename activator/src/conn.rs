//! Bounds on what one client can hold, as on the adapter's listeners: a cap
//! on open connections, and the bounds every gpuscale HTTP server shares
//! (`gpuscale-conn`: header and idle timeouts, HTTP/2 pings and a stream
//! cap; a held request is in flight, not idle).

use std::time::Duration;

pub use gpuscale_conn::{Activity, InFlight, accept, builder, serve};

/// Set by flags.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
}
