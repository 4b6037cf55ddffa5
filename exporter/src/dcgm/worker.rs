//! The reader's thread: load the library, connect, watch, read on the
//! interval; on any failure drop the values, say why and reconnect with
//! backoff. Every call is timed into the shared state, so the collection
//! loop sees a call that does not come back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::ffi::{Dcgm, Error, Handle, ST_CONNECTION_NOT_VALID};
use super::link::Link;
use super::watch::Watches;
use super::{Settings, State, lock, reason};
use crate::backoff::Backoff;
use crate::clock::sleep_unless_stopped;

/// How often a missing library is looked for again (without a log line).
const RELOAD: Duration = Duration::from_secs(60);

pub(super) fn set_down(shared: &Mutex<State>, why: &'static str) {
    let mut s = lock(shared);
    s.down = Some(why);
    s.values.clear();
    s.read_at = None;
}

pub(super) fn run(settings: &Settings, shared: &Arc<Mutex<State>>, stop: &AtomicBool) {
    let Some(lib) = load(settings, shared, stop) else {
        return;
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let link = Link { shared, lib: &lib };
    while let Err(e) = link.call(Dcgm::init) {
        set_down(shared, reason::INIT);
        let wait = backoff.next_delay();
        warn!(error = %e, retry_in = ?wait, "DCGM did not initialise");
        if !sleep(wait, stop) {
            return;
        }
    }
    let mut last: Option<&'static str> = None;
    while !stop.load(Ordering::Relaxed) {
        let why = connected(settings, &link, stop, &mut backoff);
        set_down(shared, why);
        let wait = backoff.next_delay();
        if last != Some(why) {
            warn!(hostengine = %settings.hostengine, reason = why, retry_in = ?wait,
                  "DCGM host engine unavailable; its profiling families are left out");
        }
        last = Some(why);
        if !sleep(wait, stop) {
            break;
        }
    }
    let _ = lib.shutdown();
}

/// Sleeps unless stopped; false when stopped.
fn sleep(d: Duration, stop: &AtomicBool) -> bool {
    sleep_unless_stopped(d, stop);
    !stop.load(Ordering::Relaxed)
}

/// Loads the library, saying once why it cannot; looks again every minute.
fn load(settings: &Settings, shared: &Mutex<State>, stop: &AtomicBool) -> Option<Dcgm> {
    let mut told = false;
    loop {
        match Dcgm::load(&settings.lib) {
            Ok(lib) => {
                info!(library = %settings.lib.display(), "DCGM library loaded");
                return Some(lib);
            }
            Err(e) if !told => {
                warn!(library = %settings.lib.display(), error = %e,
                      "cannot load the DCGM library; serving NVML only (looking again every minute)");
                told = true;
            }
            Err(_) => {}
        }
        set_down(shared, reason::NO_LIBRARY);
        if !sleep(RELOAD, stop) {
            return None;
        }
    }
}

/// One connection: watch what is wanted, read on the interval. Returns why
/// it ended.
fn connected(
    settings: &Settings,
    link: &Link<'_>,
    stop: &AtomicBool,
    backoff: &mut Backoff,
) -> &'static str {
    let timeout_ms = u32::try_from(settings.bound().as_millis()).unwrap_or(u32::MAX);
    let handle = match link.call(|l| l.connect(&settings.hostengine, timeout_ms)) {
        Ok(h) => h,
        Err(e) => return classify(&e, reason::CONNECT),
    };
    info!(hostengine = %settings.hostengine, "connected to the DCGM host engine");
    let why = read_loop(settings, link, handle, stop, backoff);
    let _ = link.call(|l| l.disconnect(handle));
    why
}

fn read_loop(
    settings: &Settings,
    link: &Link<'_>,
    h: Handle,
    stop: &AtomicBool,
    backoff: &mut Backoff,
) -> &'static str {
    let mut watches: Option<Watches> = None;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let wanted = lock(link.shared).wanted.clone();
        if watches.as_ref().is_none_or(|w| w.wanted != wanted) {
            if let Some(old) = watches.take() {
                old.remove(link, h);
            }
            match Watches::set(link, h, wanted, settings.interval) {
                Ok(w) => watches = Some(w),
                Err(e) => return classify(&e, reason::ERROR),
            }
        }
        let Some(w) = watches.as_ref() else {
            continue;
        };
        match w.read(link, h) {
            Ok(values) => {
                let mut s = lock(link.shared);
                s.values = values;
                s.read_at = Some(Instant::now());
                s.down = None;
                backoff.reset();
            }
            Err(e) => return classify(&e, reason::ERROR),
        }
        let next = settings.interval.saturating_sub(started.elapsed());
        if !sleep(next, stop) {
            break;
        }
    }
    reason::STARTING
}

/// A lost connection, or `otherwise`; logged with DCGM's message.
fn classify(e: &Error, otherwise: &'static str) -> &'static str {
    let why = match e.code {
        ST_CONNECTION_NOT_VALID if otherwise != reason::CONNECT => reason::LOST,
        -11 => reason::TIMEOUT,
        _ => otherwise,
    };
    warn!(error = %e, reason = why, "DCGM call failed");
    why
}
