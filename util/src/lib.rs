//! Helpers every gpuscale crate shares, so each has one contract: the
//! duration grammar of flags, config keys and policy fields, RFC 3339 times
//! as Kubernetes writes them, percent-decoding of URL queries and paths, and
//! the backoff of loops that retry, label selectors, an error with its
//! causes on one line, and a daemon's resident memory.

pub mod backoff;
pub mod duration;
pub mod error;
#[cfg(feature = "log")]
pub mod log;
pub mod memory;
pub mod percent;
pub mod rfc3339;
pub mod selector;
