//! Helpers for the adapter tests' processes (spawned as
//! [`crate::procs::Proc`], watched because the shared Prometheus and adapter
//! live in statics, which are never dropped).

use std::time::{Duration, Instant};

pub use crate::free_port;

/// Poll `f` until it returns `Some` (a generous bound so a slow machine is
/// not a failure; no test asserts on timing).
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An HTTP agent that returns non-2xx answers instead of errors.
pub fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// GET a plain-HTTP URL: (status, body).
pub fn get(url: &str) -> Option<(u16, String)> {
    let mut r = http().get(url).call().ok()?;
    let status = r.status().as_u16();
    let body = r.body_mut().read_to_string().ok()?;
    Some((status, body))
}
