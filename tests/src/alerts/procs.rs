//! Waiting and tool lookup for the alerts tests (their processes are
//! [`crate::procs::Proc`]).

use std::time::{Duration, Instant};

/// Polls `f` every 200 ms until it returns `Some`, or panics after `limit`
/// with `what` and the output of `context()` (process logs, state so far).
/// The limit is a safety net for a broken build, not a timing assertion.
pub fn eventually<T>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("gave up waiting for {what} after {limit:?}\n{}", context());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Is an executable on PATH?
pub fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false)
}
