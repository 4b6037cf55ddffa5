//! Global simulator state: init reference count, the loaded scenario, the
//! epoch, handle encoding and monotonic accumulators.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings::*;

use crate::scenario::{self, Scenario};

/// Environment variable naming the scenario file.
pub const ENV_SCENARIO: &str = "GPUSCALE_SIM_SCENARIO";
/// Environment variable with the scenario epoch (Unix seconds, float).
pub const ENV_EPOCH: &str = "GPUSCALE_SIM_EPOCH";

/// Lock a mutex, recovering from poisoning (never panic on a poisoned lock).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Current Unix time in seconds.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The loaded scenario plus run-time state, shared by all calls while NVML is initialised.
pub(crate) struct World {
    pub scenario: Scenario,
    /// Unix seconds of scenario time 0.
    pub epoch: f64,
    /// Driver >= 580.82: field ids 251-273 use the CUDA 13.0 Update 1 numbering.
    pub field_ids_v13u1: bool,
    /// Last reported energy (mJ) per GPU, to keep the counter monotonic.
    pub energy_mj: Mutex<Vec<u64>>,
}

impl World {
    fn new(scenario: Scenario, epoch: f64) -> World {
        let mut parts = scenario.driver_version.split('.');
        let major: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let minor: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let n = scenario.gpus.len();
        World {
            scenario,
            epoch,
            field_ids_v13u1: major > 580 || (major == 580 && minor >= 82),
            energy_mj: Mutex::new(vec![0; n]),
        }
    }

    /// Scenario time now, in seconds.
    pub fn now(&self) -> f64 {
        unix_now() - self.epoch
    }

    /// Energy counter (mJ) of GPU `idx` at scenario time `t`; monotonic.
    pub fn energy_mj(&self, idx: usize, t: f64) -> u64 {
        let Some(g) = self.scenario.gpus.get(idx) else {
            return 0;
        };
        let joules = g.energy_offset_joules + g.load.power_watts.integral(0.0, t.max(0.0));
        let mj = (joules * 1000.0).max(0.0) as u64;
        let mut acc = lock(&self.energy_mj);
        match acc.get_mut(idx) {
            Some(last) => {
                *last = (*last).max(mj);
                *last
            }
            None => mj,
        }
    }
}

struct Global {
    refcount: u32,
    world: Option<Arc<World>>,
    /// Time of the first successful init in this process (the default epoch).
    first_init: Option<f64>,
    last_error: Option<String>,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    refcount: 0,
    world: None,
    first_init: None,
    last_error: None,
});

fn load_world(first_init: Option<f64>) -> Result<World, String> {
    let scenario = scenario::from_env()?;
    let epoch = match std::env::var(ENV_EPOCH) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
            Ok(e) if e.is_finite() => e,
            _ => {
                return Err(format!(
                    "{ENV_EPOCH}={v:?}: expected Unix seconds (a number)"
                ));
            }
        },
        _ => first_init.unwrap_or_else(unix_now),
    };
    Ok(World::new(scenario, epoch))
}

/// nvmlInit: count up; load the scenario on the 0 -> 1 transition.
pub(crate) fn init() -> nvmlReturn_t {
    let mut g = lock(&GLOBAL);
    if g.refcount > 0 {
        g.refcount += 1;
        return nvmlReturn_enum_NVML_SUCCESS;
    }
    match load_world(g.first_init) {
        Ok(w) => {
            if std::env::var(ENV_EPOCH)
                .map(|v| v.trim().is_empty())
                .unwrap_or(true)
                && g.first_init.is_none()
            {
                g.first_init = Some(w.epoch);
            }
            g.world = Some(Arc::new(w));
            g.refcount = 1;
            g.last_error = None;
            nvmlReturn_enum_NVML_SUCCESS
        }
        Err(msg) => {
            if g.last_error.as_deref() != Some(msg.as_str()) {
                eprintln!("gpuscale-nvml-sim: cannot load the scenario: {msg}");
            }
            g.last_error = Some(msg);
            nvmlReturn_enum_NVML_ERROR_UNKNOWN
        }
    }
}

/// nvmlShutdown: count down; drop the scenario at 0.
pub(crate) fn shutdown() -> nvmlReturn_t {
    let mut g = lock(&GLOBAL);
    if g.refcount == 0 {
        return nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
    }
    g.refcount -= 1;
    if g.refcount == 0 {
        g.world = None;
    }
    nvmlReturn_enum_NVML_SUCCESS
}

/// The current world, or NVML_ERROR_UNINITIALIZED.
pub(crate) fn world() -> Result<Arc<World>, nvmlReturn_t> {
    lock(&GLOBAL)
        .world
        .clone()
        .ok_or(nvmlReturn_enum_NVML_ERROR_UNINITIALIZED)
}

/// The last scenario load error, if the last init failed.
pub(crate) fn last_error() -> Option<String> {
    lock(&GLOBAL).last_error.clone()
}

// ---------------------------------------------------------------- handles

/// Handle values below this are physical GPUs (index + 1).
const MIG_BASE: usize = 1 << 12;

/// A decoded device handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dev {
    Gpu(usize),
    Mig(usize, usize),
}

pub(crate) fn gpu_handle(i: usize) -> nvmlDevice_t {
    (i + 1) as nvmlDevice_t
}

pub(crate) fn mig_handle(i: usize, j: usize) -> nvmlDevice_t {
    (((i + 1) << 12) | (j + 1)) as nvmlDevice_t
}

pub(crate) fn decode(h: nvmlDevice_t) -> Option<Dev> {
    let v = h as usize;
    if v == 0 {
        None
    } else if v < MIG_BASE {
        Some(Dev::Gpu(v - 1))
    } else {
        let i = (v >> 12).checked_sub(1)?;
        let j = (v & 0xfff).checked_sub(1)?;
        Some(Dev::Mig(i, j))
    }
}
