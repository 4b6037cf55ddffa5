//! Time helpers shared by the collection loop and the XID event thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Sleeps for `d`, waking early (within 100 ms) once `stop` is set.
pub(crate) fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Seconds since the Unix epoch, as Prometheus timestamps are written.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
