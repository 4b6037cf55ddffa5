//! The reader's thread: load the library, connect, then read whenever a
//! collection asks (watching what it wants first); on any failure drop the
//! values, answer the read with why and reconnect with backoff. Every call
//! is timed into the shared state, so the collection loop sees a call that
//! does not come back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tracing::{info, warn};

use gpuscale_dcgm_abi::{DCGM_ST_CONNECTION_NOT_VALID, DCGM_ST_TIMEOUT};

use super::ffi::{Dcgm, Error, Handle};
use super::link::Link;
use super::watch::Watches;
use super::{Activity, Key, Settings, Shared, Wanted, lock, reason};
use crate::backoff::Backoff;
use crate::clock::sleep_unless_stopped;

/// How often a missing library is looked for again (without a log line).
const RELOAD: Duration = Duration::from_secs(60);
/// How often a reader waiting for a collection looks at the stop switch.
const POLL: Duration = Duration::from_millis(100);

pub(super) fn set_down(shared: &Shared, why: &'static str) {
    let mut s = lock(&shared.state);
    s.down = Some(why);
    s.values.clear();
    s.ready = false;
}

pub(super) fn run(settings: &Settings, shared: &Arc<Shared>, stop: &AtomicBool) {
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
fn load(settings: &Settings, shared: &Shared, stop: &AtomicBool) -> Option<Dcgm> {
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

/// Answers each read a collection asks for until one fails (returns why)
/// or the reader is stopped.
fn read_loop(
    settings: &Settings,
    link: &Link<'_>,
    h: Handle,
    stop: &AtomicBool,
    backoff: &mut Backoff,
) -> &'static str {
    let mut watches: Option<Watches> = None;
    while let Some((read, wanted)) = next_ask(link.shared, stop) {
        match read_once(settings, link, h, &mut watches, wanted) {
            Ok(values) => {
                answer(link.shared, read, Ok(values));
                backoff.reset();
            }
            Err(e) => {
                let why = classify(&e, reason::ERROR);
                answer(link.shared, read, Err(why));
                return why;
            }
        }
    }
    reason::STARTING
}

/// Waits, connected and ready, until a collection asks for a read: its
/// number and what to read. None once stopped.
fn next_ask(shared: &Shared, stop: &AtomicBool) -> Option<(u64, Wanted)> {
    let mut s = lock(&shared.state);
    loop {
        if stop.load(Ordering::Relaxed) {
            s.ready = false;
            return None;
        }
        if s.asked > s.answered {
            return Some((s.asked, s.wanted.clone()));
        }
        s.ready = true;
        s = (shared.changed.wait_timeout(s, POLL))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// One read: the watches set again first when the wanted entities changed.
fn read_once(
    settings: &Settings,
    link: &Link<'_>,
    h: Handle,
    watches: &mut Option<Watches>,
    wanted: Wanted,
) -> Result<HashMap<Key, Activity>, Error> {
    if watches.as_ref().is_none_or(|w| w.wanted != wanted) {
        if let Some(old) = watches.take() {
            old.remove(link, h);
        }
        *watches = Some(Watches::set(link, h, wanted, settings.interval)?);
    }
    match watches {
        Some(w) => w.read(link, h),
        None => Ok(HashMap::new()),
    }
}

/// Answers read `read`: its values (ready for the next), or why it failed.
fn answer(shared: &Shared, read: u64, result: Result<HashMap<Key, Activity>, &'static str>) {
    let mut s = lock(&shared.state);
    s.answered = read;
    match result {
        Ok(values) => {
            s.values = values;
            s.down = None;
            s.ready = true;
        }
        Err(why) => {
            s.values.clear();
            s.down = Some(why);
            s.ready = false;
        }
    }
    drop(s);
    shared.changed.notify_all();
}

/// A lost connection, or `otherwise`; logged with DCGM's message.
fn classify(e: &Error, otherwise: &'static str) -> &'static str {
    let why = match e.code {
        DCGM_ST_CONNECTION_NOT_VALID if otherwise != reason::CONNECT => reason::LOST,
        DCGM_ST_TIMEOUT => reason::TIMEOUT,
        _ => otherwise,
    };
    warn!(error = %e, reason = why, "DCGM call failed");
    why
}
