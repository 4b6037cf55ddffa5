//! ECC, row remapping, retired pages.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_SUPPORTED, R, guard};
use crate::scenario::{EccErrorType, Feature, Gpu};

fn ecc_gpu(c: &Ctx, device: nvmlDevice_t) -> Result<&Gpu, nvmlReturn_t> {
    let (_, g) = c.gpu(device, Some(Feature::Ecc))?;
    if !g.ecc {
        return Err(NOT_SUPPORTED);
    }
    Ok(g)
}

fn error_type(t: nvmlMemoryErrorType_t) -> Result<EccErrorType, nvmlReturn_t> {
    match t {
        nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => Ok(EccErrorType::Corrected),
        nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => {
            Ok(EccErrorType::Uncorrected)
        }
        _ => Err(INVALID_ARGUMENT),
    }
}

fn counter_type(t: nvmlEccCounterType_t) -> R {
    if t < nvmlEccCounterType_enum_NVML_ECC_COUNTER_TYPE_COUNT {
        Ok(())
    } else {
        Err(INVALID_ARGUMENT)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Ecc))?;
        super::nonnull(current)?;
        super::nonnull(pending)?;
        let state = |on: bool| {
            if on {
                nvmlEnableState_enum_NVML_FEATURE_ENABLED
            } else {
                nvmlEnableState_enum_NVML_FEATURE_DISABLED
            }
        };
        put!(current, state(g.ecc))?;
        put!(pending, state(g.ecc_pending.unwrap_or(g.ecc)))
    })
}

/// The scenario's `error` errors on `device` since the epoch, once the
/// arguments are checked.
fn ecc_errors(
    device: nvmlDevice_t,
    error: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
) -> Result<u64, nvmlReturn_t> {
    let c = Ctx::new()?;
    let g = ecc_gpu(&c, device)?;
    let kind = error_type(error)?;
    counter_type(counter)?;
    Ok(g.ecc_count(kind, c.t))
}

/// Volatile and aggregate counters both count the scenario's errors since the epoch.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    count: *mut u64,
) -> nvmlReturn_t {
    guard(|| put!(count, ecc_errors(device, error, counter)?))
}

/// All errors are in device memory (DRAM); other locations count 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryErrorCounter(
    device: nvmlDevice_t,
    error: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    location: nvmlMemoryLocation_t,
    count: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let all = ecc_errors(device, error, counter)?;
        let v = match location {
            nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_DEVICE_MEMORY => all,
            l if l < nvmlMemoryLocation_enum_NVML_MEMORY_LOCATION_COUNT => 0,
            _ => return Err(INVALID_ARGUMENT),
        };
        put!(count, v)
    })
}

fn remap_gpu(c: &Ctx, device: nvmlDevice_t) -> Result<&Gpu, nvmlReturn_t> {
    let (_, g) = c.gpu(device, Some(Feature::RemappedRows))?;
    if !g.architecture.has_row_remapping() {
        return Err(NOT_SUPPORTED);
    }
    Ok(g)
}

pub(crate) fn remapped(c: &Ctx, device: nvmlDevice_t) -> Result<[c_uint; 4], nvmlReturn_t> {
    let r = &remap_gpu(c, device)?.remapped_rows;
    Ok([
        r.correctable,
        r.uncorrectable,
        r.pending as c_uint,
        r.failure as c_uint,
    ])
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let [a, b, p, f] = remapped(&c, device)?;
        for ptr in [corr, unc, pending, failure] {
            super::nonnull(ptr)?;
        }
        put!(corr, a)?;
        put!(unc, b)?;
        put!(pending, p)?;
        put!(failure, f)
    })
}

fn retired_count(g: &Gpu, cause: nvmlPageRetirementCause_t) -> Result<u32, nvmlReturn_t> {
    match cause {
        nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS => {
            Ok(g.retired_pages.single_bit)
        }
        nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR => {
            Ok(g.retired_pages.double_bit)
        }
        _ => Err(INVALID_ARGUMENT),
    }
}

/// Retired pages of `cause`, by the NVML count protocol.
///
/// # Safety
/// `count` is null or valid for a read and a write; `addresses` and
/// `timestamps` are null or have room for `*count` entries.
unsafe fn retired(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut u64,
    timestamps: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::RetiredPages))?;
        let n = retired_count(g, cause)?;
        super::nonnull(count)?;
        // SAFETY: `count` is non-null (checked above) and valid for a read and
        // a write (`retired`'s contract, the NVML API's).
        let cap = unsafe { count.read_unaligned() };
        put!(count, n)?;
        if cap < n {
            return Err(INSUFFICIENT_SIZE);
        }
        if n > 0 {
            super::nonnull(addresses)?;
        }
        for k in 0..n as usize {
            let addr = 0x2_0000_0000u64 + ((cause as u64) << 28) + (k as u64) * 0x1000;
            // SAFETY: `addresses` (non-null, checked above) and a non-null
            // `timestamps` have room for `*count` = `cap` >= n entries
            // (`retired`'s contract, the NVML API's), and k < n.
            unsafe {
                addresses.add(k).write_unaligned(addr);
                if !timestamps.is_null() {
                    timestamps.add(k).write_unaligned(c.w.epoch.max(0.0) as u64);
                }
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut u64,
) -> nvmlReturn_t {
    // SAFETY: this function's own arguments, passed on; null `timestamps`
    // is allowed (`retired` skips them), as v1 has none.
    unsafe { retired(device, cause, count, addresses, std::ptr::null_mut()) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut u64,
    timestamps: *mut u64,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { retired(device, cause, count, addresses, timestamps) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::RetiredPages))?;
        let v = if g.retired_pages.pending {
            nvmlEnableState_enum_NVML_FEATURE_ENABLED
        } else {
            nvmlEnableState_enum_NVML_FEATURE_DISABLED
        };
        put!(pending, v)
    })
}
