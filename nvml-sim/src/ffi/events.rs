//! Event sets: XID critical errors and ECC error events from the scenario.
//!
//! Each event (XID or ECC error entry) is delivered once per event set, as
//! soon as its `at_s` has passed, including events that happened before the
//! device was registered. Several pending events are returned one per wait,
//! oldest first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_uint;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INVALID_ARGUMENT, NOT_SUPPORTED, guard};
use crate::scenario::{EccErrorType, Gpu};
use crate::sim::{self, lock};

#[derive(Default)]
struct Set {
    /// GPU index -> registered event type mask.
    regs: HashMap<usize, u64>,
    /// (GPU index, event key) already delivered.
    delivered: HashSet<(usize, EventKey)>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum EventKey {
    Xid(usize),
    Ecc(usize),
}

struct Sets {
    next: usize,
    map: BTreeMap<usize, Set>,
}

static SETS: Mutex<Sets> = Mutex::new(Sets {
    next: 1,
    map: BTreeMap::new(),
});

const XID: u64 = nvmlEventTypeXidCriticalError as u64;
const SBE: u64 = nvmlEventTypeSingleBitEccError as u64;
const DBE: u64 = nvmlEventTypeDoubleBitEccError as u64;

fn supported(g: &Gpu) -> u64 {
    let mut m = XID | nvmlEventTypePState as u64 | nvmlEventTypeClock as u64;
    if g.ecc {
        m |= SBE | DBE;
    }
    m
}

/// Events of GPU `g` that happened by `t`: (at_s, key, type, data).
fn events(g: &Gpu, t: f64) -> Vec<(f64, EventKey, u64, u64)> {
    let mut v: Vec<_> = g
        .xids
        .iter()
        .enumerate()
        .filter(|(_, x)| x.at_s <= t)
        .map(|(k, x)| (x.at_s, EventKey::Xid(k), XID, x.xid))
        .chain(
            g.ecc_errors
                .iter()
                .enumerate()
                .filter(|(_, e)| e.at_s <= t)
                .map(|(k, e)| {
                    let ty = if e.kind == EccErrorType::Corrected {
                        SBE
                    } else {
                        DBE
                    };
                    (e.at_s, EventKey::Ecc(k), ty, e.count)
                }),
        )
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Seconds from `t` to the next scheduled XID or ECC event on any GPU, so a
/// wait can sleep until then instead of polling (real NVML blocks too).
fn next_event_in(c: &Ctx, t: f64) -> Option<f64> {
    c.w.scenario
        .gpus
        .iter()
        .flat_map(|g| {
            g.xids
                .iter()
                .map(|x| x.at_s)
                .chain(g.ecc_errors.iter().map(|e| e.at_s))
        })
        .filter(|&at| at > t)
        .min_by(f64::total_cmp)
        .map(|at| at - t)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        sim::world()?;
        super::nonnull(set)?;
        let mut s = lock(&SETS);
        let id = s.next;
        s.next += 1;
        s.map.insert(id, Set::default());
        put!(set, id as nvmlEventSet_t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| match lock(&SETS).map.remove(&(set as usize)) {
        Some(_) => Ok(()),
        None => Err(INVALID_ARGUMENT),
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, None)?;
        put!(types, supported(g))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: u64,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (idx, g) = c.gpu(device, None)?;
        if types & !supported(g) != 0 {
            return Err(NOT_SUPPORTED);
        }
        let mut s = lock(&SETS);
        let st = s.map.get_mut(&(set as usize)).ok_or(INVALID_ARGUMENT)?;
        *st.regs.entry(idx).or_insert(0) |= types;
        Ok(())
    })
}

/// Take the oldest undelivered event of `set`, if any.
fn take(c: &Ctx, set: usize) -> Result<Option<nvmlEventData_t>, nvmlReturn_t> {
    let mut s = lock(&SETS);
    let st = s.map.get_mut(&set).ok_or(INVALID_ARGUMENT)?;
    let mut best: Option<(f64, usize, EventKey, u64, u64)> = None;
    for (&idx, &mask) in &st.regs {
        let Some(g) = c.w.scenario.gpus.get(idx) else {
            continue;
        };
        for (at, key, ty, data) in events(g, c.t) {
            if mask & ty != 0 && !st.delivered.contains(&(idx, key)) {
                if best
                    .as_ref()
                    .is_none_or(|b| at < b.0 || (at == b.0 && idx < b.1))
                {
                    best = Some((at, idx, key, ty, data));
                }
                break;
            }
        }
    }
    Ok(best.map(|(_, idx, key, ty, data)| {
        st.delivered.insert((idx, key));
        nvmlEventData_t {
            device: sim::gpu_handle(idx),
            eventType: ty,
            eventData: data,
            gpuInstanceId: u32::MAX,
            computeInstanceId: u32::MAX,
        }
    }))
}

/// Waits up to `timeout_ms` for an event, sleeping until the next scheduled
/// one; NVML_ERROR_TIMEOUT when none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        super::nonnull(data)?;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms as u64);
        loop {
            let c = Ctx::new()?;
            if let Some(ev) = take(&c, set as usize)? {
                return put!(data, ev);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(nvmlReturn_enum_NVML_ERROR_TIMEOUT);
            }
            // Events of GPUs registered later land on the next pass; 1 ms past
            // the event's time so it is due when we look again.
            let next = next_event_in(&c, c.t)
                .map(|s| Duration::from_secs_f64(s) + Duration::from_millis(1));
            drop(c);
            let nap = next.map_or(deadline - now, |n| n.min(deadline - now));
            std::thread::sleep(nap);
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlEventSetWait_v2(set, data, timeout_ms) }
}
