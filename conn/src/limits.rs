//! Bounds on what one client can hold, as flags set them: a cap on open
//! connections per listener, the TLS handshake timeout and the idle
//! timeout (the adapter's API and KEDA listeners share one set).

use std::time::Duration;

/// Set by flags.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
}
