//! XID errors. NVML delivers them as events, so a dedicated thread waits on
//! an event set and records them in an [`XidLog`]; this collector reads it.

use crate::backoff::Backoff;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use tracing::{info, warn};

use super::{Collector, Ctx, Spec};
use crate::clock::{sleep_unless_stopped, unix_now};
use crate::metrics::{Collected, Desc, DeviceRef, Family, Subject};
use crate::nvml::library::LibSource;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct XidSeen {
    pub count: u64,
    pub last_seen_unix: f64,
}

/// XIDs seen per GPU UUID and XID code.
#[derive(Clone, Default)]
pub struct XidLog(Arc<Mutex<HashMap<String, BTreeMap<u64, XidSeen>>>>);

impl XidLog {
    pub fn record(&self, uuid: &str, xid: u64, at_unix: f64) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let seen = map
            .entry(uuid.to_string())
            .or_default()
            .entry(xid)
            .or_default();
        seen.count += 1;
        seen.last_seen_unix = at_unix;
    }

    pub fn of(&self, uuid: &str) -> BTreeMap<u64, XidSeen> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(uuid).cloned().unwrap_or_default()
    }
}

/// The code of the XID seen last among `seen` (the higher code on a tie).
fn last_code(seen: &BTreeMap<u64, XidSeen>) -> Option<u64> {
    let latest = seen
        .iter()
        .max_by(|a, b| a.1.last_seen_unix.total_cmp(&b.1.last_seen_unix));
    latest.map(|(code, _)| *code)
}

pub struct Xid {
    log: XidLog,
}

pub const SPEC: Spec = Spec {
    name: "xid",
    families: &[&COUNT, &LAST_SEEN],
    build: |_, setup| {
        Box::new(Xid {
            log: setup.xids.clone(),
        })
    },
};

const COUNT: Desc = Desc::counter(
    "gpu_xid_errors_total",
    "XID errors reported by the driver, by XID code.",
    "",
    &["xid"],
);
const LAST_SEEN: Desc = Desc::gauge(
    "gpu_xid_last_seen_timestamp_seconds",
    "Unix time an XID code was last reported (alert on this: a first XID has no increase()).",
    "seconds",
    &["xid"],
);

impl<'n> Collector<'n> for Xid {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        // One read of the log per GPU: the families and the last codes agree.
        let seen: Vec<_> = cx
            .gpus
            .iter()
            .map(|g| (g.id.clone(), self.log.of(&g.id.uuid)))
            .collect();
        let codes = seen
            .iter()
            .filter_map(|(gpu, xids)| Some((gpu.uuid.clone(), last_code(xids)?)))
            .collect();
        out.last_xids = Some(codes);
        out.families.extend(families_of(seen));
    }
}

/// The XID families of `gpus`. Also called for GPUs that no longer answer
/// (lost, error): the XID that took a GPU down (79) must outlive its other
/// series, or its alert and the dashboard's XID table lose it at once.
pub fn families(log: &XidLog, gpus: impl Iterator<Item = Arc<DeviceRef>>) -> [Family; 2] {
    families_of(gpus.map(|g| {
        let seen = log.of(&g.uuid);
        (g, seen)
    }))
}

fn families_of(
    gpus: impl IntoIterator<Item = (Arc<DeviceRef>, BTreeMap<u64, XidSeen>)>,
) -> [Family; 2] {
    let mut count = Family::of(&COUNT);
    let mut last = Family::of(&LAST_SEEN);
    for (gpu, xids) in gpus {
        for (xid, seen) in xids {
            let labels = vec![("xid", xid.to_string())];
            count.push(
                Subject::Device(gpu.clone()),
                labels.clone(),
                seen.count as f64,
            );
            last.push(Subject::Device(gpu.clone()), labels, seen.last_seen_unix);
        }
    }
    [count, last]
}

/// Waits for XID events until `stop`; re-initialises NVML after failures.
pub fn run_event_thread(lib: LibSource, log: XidLog, stop: Arc<AtomicBool>) {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    while !stop.load(Ordering::Relaxed) {
        match wait_events(&lib, &log, &stop) {
            Ok(()) => return,
            Err(e) => {
                let wait = backoff.next_delay();
                warn!(error = %e, "XID event listener stopped; retrying in {:?}", wait);
                sleep_unless_stopped(wait, &stop);
            }
        }
    }
}

fn wait_events(lib: &LibSource, log: &XidLog, stop: &AtomicBool) -> Result<(), NvmlError> {
    let nvml = lib.init()?;
    let mut set = nvml.create_event_set()?;
    let mut registered = 0;
    // A GPU that falls off the bus no longer answers nvmlDeviceGetUUID, yet
    // its XID 79 must be recorded under its UUID: remember them by handle.
    let mut uuids: HashMap<usize, String> = HashMap::new();
    for i in 0..nvml.device_count()? {
        let Ok(device) = nvml.device_by_index(i) else {
            continue;
        };
        if let Ok(uuid) = device.uuid() {
            // SAFETY: the handle is only used as a map key, never dereferenced.
            uuids.insert(unsafe { device.handle() } as usize, uuid);
        }
        let supported = device
            .supported_event_types()
            .unwrap_or(EventTypes::empty());
        if !supported.contains(EventTypes::CRITICAL_XID_ERROR) {
            continue;
        }
        set = match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => s,
            Err(e) => return Err(e.error),
        };
        registered += 1;
    }
    info!(gpus = registered, "listening for XID events");
    while !stop.load(Ordering::Relaxed) {
        match set.wait(500) {
            Ok(event) => {
                if !event.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                    let uuid = event.device.uuid().unwrap_or_default();
                    warn!(uuid = %uuid, event = ?event.event_type, "ECC error event");
                    continue;
                }
                let xid = match event.event_data {
                    Some(XidError::Value(v)) => v,
                    _ => continue,
                };
                let uuid = event.device.uuid().ok().or_else(|| {
                    // SAFETY: as above, the handle is a map key only.
                    uuids
                        .get(&(unsafe { event.device.handle() } as usize))
                        .cloned()
                });
                let Some(uuid) = uuid else {
                    warn!(xid, "XID error on a GPU whose UUID is unknown");
                    continue;
                };
                warn!(uuid = %uuid, xid, "XID error");
                log.record(&uuid, xid, unix_now());
            }
            Err(NvmlError::Timeout) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
