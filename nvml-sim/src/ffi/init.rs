//! Init/shutdown, error strings, system queries.

use std::ffi::{c_char, c_int, c_uint};

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, NOT_FOUND, R, guard};
use crate::sim;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guard(|| match sim::init() {
        0 => Ok(()),
        e => Err(e),
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guard(|| match sim::shutdown() {
        0 => Ok(()),
        e => Err(e),
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static std::ffi::CStr = match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt request issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires restart",
        17 => c"The operating system has blocked the request.",
        18 => c"RM has detected an NVML/RM version mismatch.",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => {
            c"The requested vgpu operation is not available on target device because ECC is enabled"
        }
        23 => c"Ran out of critical resources, other than memory",
        24 => c"The requested frequency is not supported",
        25 => c"The provided version is invalid/unsupported",
        26 => c"The requested functionality has been deprecated",
        27 => c"The system is not ready for the request",
        28 => c"The GPU was not found",
        29 => c"The resource is in an invalid state",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        put_str!(version, length, &c.w.scenario.driver_version)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let s = &c.w.scenario;
        let v = format!("{}.{}", s.cuda_version / 1000, s.driver_version);
        put_str!(version, length, &v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(cuda: *mut c_int) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        put!(cuda, c.w.scenario.cuda_version)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(cuda: *mut c_int) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlSystemGetCudaDriverVersion_v2(cuda) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let p =
            c.w.scenario
                .gpus
                .iter()
                .flat_map(|g| g.processes.iter())
                .find(|p| p.pid == pid)
                .ok_or(NOT_FOUND)?;
        put_str!(name, length, &p.name)
    })
}

/// Simulator extension (not NVML): copy the last scenario load error (why
/// `nvmlInit` returned NVML_ERROR_UNKNOWN) into `buf`. NVML_ERROR_NOT_FOUND
/// when the last init did not fail; NVML_ERROR_INSUFFICIENT_SIZE when it
/// does not fit. Works without init.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuscale_sim_last_error(buf: *mut c_char, length: c_uint) -> nvmlReturn_t {
    guard(|| {
        let msg = sim::last_error().ok_or(NOT_FOUND)?;
        put_str!(buf, length, &msg)
    })
}
