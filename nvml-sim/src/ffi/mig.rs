//! MIG: mode, instance handles, instance ids.
//!
//! Like real NVML, `nvmlDeviceGetMaxMigDeviceCount` reports the maximum (7)
//! on a GPU in MIG mode, and `nvmlDeviceGetMigDeviceHandleByIndex` returns
//! NVML_ERROR_NOT_FOUND for indices without an instance.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, R, guard};
use crate::scenario::limits::MAX_MIG_PER_GPU;
use crate::sim;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, None)?;
        if !g.architecture.has_mig() {
            return Err(NOT_SUPPORTED);
        }
        super::nonnull(current)?;
        super::nonnull(pending)?;
        let m = if g.mig_enabled() {
            NVML_DEVICE_MIG_ENABLE
        } else {
            NVML_DEVICE_MIG_DISABLE
        };
        put!(current, m)?;
        put!(pending, m)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, None)?;
        if !g.architecture.has_mig() {
            return Err(NOT_SUPPORTED);
        }
        let n = if g.mig_enabled() {
            MAX_MIG_PER_GPU as c_uint
        } else {
            0
        };
        put!(count, n)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        if d.mig.is_some() {
            return Err(INVALID_ARGUMENT);
        }
        if !d.gpu.architecture.has_mig() {
            return Err(NOT_SUPPORTED);
        }
        if !d.gpu.mig_enabled() || index as usize >= MAX_MIG_PER_GPU {
            return Err(INVALID_ARGUMENT);
        }
        if index as usize >= d.gpu.mig.len() {
            return Err(NOT_FOUND);
        }
        put!(mig, sim::mig_handle(d.idx, index as usize))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        put!(is_mig, d.mig.is_some() as c_uint)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(mig)?;
        if d.mig.is_none() {
            return Err(INVALID_ARGUMENT);
        }
        put!(device, sim::gpu_handle(d.idx))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| put!(id, instance_ids(device)?.0))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| put!(id, instance_ids(device)?.1))
}

/// A MIG handle's (GPU instance id, compute instance id); NOT_SUPPORTED on
/// a whole GPU's handle.
fn instance_ids(device: nvmlDevice_t) -> Result<(c_uint, c_uint), nvmlReturn_t> {
    let c = Ctx::new()?;
    let (_, m) = c.dev(device)?.mig.ok_or(NOT_SUPPORTED)?;
    Ok((m.gpu_instance_id, m.compute_instance_id))
}
