//! PCIe, NVLink and field values.

use std::ffi::{c_int, c_uint};

use nvml_wrapper_sys::bindings::field_id::*;
use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INVALID_ARGUMENT, NOT_SUPPORTED, R, guard, to_u32, to_u64};
use crate::scenario::{FabricState, Feature, Gpu, NvlinkErrorType, ThrottleReason};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Pcie))?;
        let bps = match counter {
            nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES => {
                g.load.pcie_tx_bytes_per_second.at(c.t)
            }
            nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES => {
                g.load.pcie_rx_bytes_per_second.at(c.t)
            }
            _ => return Err(INVALID_ARGUMENT),
        };
        // NVML reports KB/s (1 KB = 1024 bytes)
        put!(value, to_u32(bps / 1024.0))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(
    device: nvmlDevice_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::PcieReplay))?;
        put!(value, g.pcie_replays.min(u32::MAX as u64) as c_uint)
    })
}

/// One PCIe link property.
///
/// # Safety
/// `out` is null or valid for a write.
unsafe fn pcie_value(device: nvmlDevice_t, out: *mut c_uint, f: fn(&Gpu) -> u32) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Pcie))?;
        put!(out, f(g))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(
    device: nvmlDevice_t,
    v: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: `v` is this function's out-pointer argument: null or
    // valid as the NVML API requires, which is `pcie_value`'s contract.
    unsafe { pcie_value(device, v, |g| g.pcie.generation) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(
    device: nvmlDevice_t,
    v: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: `v` is this function's out-pointer argument: null or
    // valid as the NVML API requires, which is `pcie_value`'s contract.
    unsafe { pcie_value(device, v, |g| g.pcie.width) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(
    device: nvmlDevice_t,
    v: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: `v` is this function's out-pointer argument: null or
    // valid as the NVML API requires, which is `pcie_value`'s contract.
    unsafe { pcie_value(device, v, |g| g.pcie.max_generation()) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(
    device: nvmlDevice_t,
    v: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: `v` is this function's out-pointer argument: null or
    // valid as the NVML API requires, which is `pcie_value`'s contract.
    unsafe { pcie_value(device, v, |g| g.pcie.max_width()) }
}

fn nvlink_gpu(c: &Ctx, device: nvmlDevice_t, link: c_uint) -> Result<&Gpu, nvmlReturn_t> {
    let (_, g) = c.gpu(device, Some(Feature::Nvlink))?;
    if g.nvlinks == 0 {
        return Err(NOT_SUPPORTED);
    }
    if link >= g.nvlinks {
        return Err(INVALID_ARGUMENT);
    }
    Ok(g)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let g = nvlink_gpu(&c, device, link)?;
        let state = if g.nvlink_down(link, c.t) {
            nvmlEnableState_enum_NVML_FEATURE_DISABLED
        } else {
            nvmlEnableState_enum_NVML_FEATURE_ENABLED
        };
        put!(active, state)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkVersion(
    device: nvmlDevice_t,
    link: c_uint,
    version: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let g = nvlink_gpu(&c, device, link)?;
        put!(version, g.architecture.nvlink_version())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let g = nvlink_gpu(&c, device, link)?;
        let kind = match counter {
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_REPLAY => {
                Some(NvlinkErrorType::Replay)
            }
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_RECOVERY => {
                Some(NvlinkErrorType::Recovery)
            }
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_FLIT => {
                Some(NvlinkErrorType::CrcFlit)
            }
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_DATA => {
                Some(NvlinkErrorType::CrcData)
            }
            nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_ECC_DATA => None,
            _ => return Err(INVALID_ARGUMENT),
        };
        let v = kind.map_or(0, |k| g.nvlink_error_count(link, k, c.t));
        put!(value, v)
    })
}

// ---------------------------------------------------------------- field values

enum Val {
    U32(u32),
    U64(u64),
}

/// Cumulative NVLink data (KiB) over [0, t] on `link` (u32::MAX = all links).
fn nvlink_kib(g: &Gpu, rx: bool, scope: u32, t: f64) -> Result<u64, nvmlReturn_t> {
    if g.unsupported(Feature::Nvlink) || g.nvlinks == 0 {
        return Err(NOT_SUPPORTED);
    }
    let links = if scope == u32::MAX {
        g.nvlinks as f64
    } else if scope < g.nvlinks {
        1.0
    } else {
        return Err(INVALID_ARGUMENT);
    };
    let curve = if rx {
        &g.load.nvlink_rx_bytes_per_second
    } else {
        &g.load.nvlink_tx_bytes_per_second
    };
    Ok(to_u64(curve.integral(0.0, t.max(0.0)) * links / 1024.0))
}

fn throttle_ns(g: &Gpu, reasons: &[ThrottleReason], t: f64) -> Result<Val, nvmlReturn_t> {
    if g.unsupported(Feature::Violation) || g.unsupported(Feature::Throttle) {
        return Err(NOT_SUPPORTED);
    }
    Ok(Val::U64(to_u64(g.throttle_seconds(reasons, t) * 1e9)))
}

fn field(c: &Ctx, idx: usize, g: &Gpu, id: u32, scope: u32) -> Result<Val, nvmlReturn_t> {
    let t = c.t;
    let unsup = |f: Feature| {
        if g.unsupported(f) {
            Err(NOT_SUPPORTED)
        } else {
            Ok(())
        }
    };
    // Field ids 251-273 were renumbered with driver 580.82 (CUDA 13.0 U1).
    let canonical = if c.w.field_ids_v13u1 {
        match id {
            269..=273 => id - 18,
            251..=268 => 1000 + id, // power smoothing: not modelled
            other => other,
        }
    } else {
        id
    };
    use ThrottleReason::*;
    match canonical {
        NVML_FI_DEV_MEMORY_TEMP => {
            unsup(Feature::MemoryTemperature)?;
            Ok(Val::U32(to_u32(g.load.memory_temperature_celsius.at(t))))
        }
        NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION => {
            unsup(Feature::Energy)?;
            Ok(Val::U64(c.w.energy_mj(idx, t)))
        }
        NVML_FI_DEV_POWER_INSTANT => {
            unsup(Feature::Power)?;
            Ok(Val::U32(to_u32(g.load.power_watts.at(t) * 1000.0)))
        }
        NVML_FI_DEV_PCIE_REPLAY_COUNTER => {
            unsup(Feature::PcieReplay)?;
            Ok(Val::U64(g.pcie_replays))
        }
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX => nvlink_kib(g, false, scope, t).map(Val::U64),
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => nvlink_kib(g, true, scope, t).map(Val::U64),
        NVML_FI_DEV_REMAPPED_COR
        | NVML_FI_DEV_REMAPPED_UNC
        | NVML_FI_DEV_REMAPPED_PENDING
        | NVML_FI_DEV_REMAPPED_FAILURE => {
            unsup(Feature::RemappedRows)?;
            if !g.architecture.has_row_remapping() {
                return Err(NOT_SUPPORTED);
            }
            let r = &g.remapped_rows;
            Ok(Val::U32(match canonical {
                NVML_FI_DEV_REMAPPED_COR => r.correctable,
                NVML_FI_DEV_REMAPPED_UNC => r.uncorrectable,
                NVML_FI_DEV_REMAPPED_PENDING => r.pending as u32,
                _ => r.failure as u32,
            }))
        }
        // violation time per policy, ns (74 doubles as CLOCKS_EVENT_REASON_SW_POWER_CAP, 76 as ..._SYNC_BOOST)
        NVML_FI_DEV_PERF_POLICY_POWER..=NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS => {
            let policy = match canonical {
                NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS => {
                    nvmlPerfPolicyType_enum_NVML_PERF_POLICY_TOTAL_APP_CLOCKS
                }
                NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS => {
                    nvmlPerfPolicyType_enum_NVML_PERF_POLICY_TOTAL_BASE_CLOCKS
                }
                other => other - NVML_FI_DEV_PERF_POLICY_POWER,
            };
            let reasons = super::telemetry::policy_reasons(policy).ok_or(NOT_SUPPORTED)?;
            throttle_ns(g, reasons, t)
        }
        NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN => throttle_ns(g, &[SwThermal], t),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN => throttle_ns(g, &[HwThermal], t),
        NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN => {
            throttle_ns(g, &[HwPowerBrake], t)
        }
        _ => Err(NOT_SUPPORTED),
    }
}

/// Supported ids (driver < 580.82 numbering): 74-81 (violation ns per
/// policy), 82 (memory temperature), 83 (energy mJ), 94 (PCIe replays),
/// 138/139 (NVLink TX/RX KiB, scopeId = link or 0xFFFFFFFF for all),
/// 142-145 (remapped rows), 186 (instant power mW), 251-253 (sw thermal, hw
/// thermal, hw power brake throttle ns). Others: per-field NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let (idx, g) = c.gpu(device, None)?;
        if count < 0 {
            return Err(INVALID_ARGUMENT);
        }
        if count == 0 {
            return Ok(());
        }
        super::nonnull(values)?;
        let ts = to_u64((c.w.epoch + c.t) * 1e6) as i64;
        for k in 0..count as usize {
            // SAFETY: `values` is non-null (checked above) and points to the
            // caller's aligned array of `count` entries (NVML API); k < count.
            let v = unsafe { &mut *values.add(k) };
            v.timestamp = ts;
            v.latencyUsec = 0;
            match field(&c, idx, g, v.fieldId, v.scopeId) {
                Ok(Val::U32(x)) => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                    v.value.uiVal = x;
                    v.nvmlReturn = nvmlReturn_enum_NVML_SUCCESS;
                }
                Ok(Val::U64(x)) => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    v.value.ullVal = x;
                    v.nvmlReturn = nvmlReturn_enum_NVML_SUCCESS;
                }
                Err(e) => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    v.value.ullVal = 0;
                    v.nvmlReturn = e;
                }
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, None)?;
        let state = g.fabric_at(c.t).ok_or(NOT_SUPPORTED)?;
        let (state, status) = match state {
            FabricState::NotStarted => (
                NVML_GPU_FABRIC_STATE_NOT_STARTED,
                nvmlReturn_enum_NVML_SUCCESS,
            ),
            FabricState::InProgress => (
                NVML_GPU_FABRIC_STATE_IN_PROGRESS,
                nvmlReturn_enum_NVML_SUCCESS,
            ),
            FabricState::Completed => (
                NVML_GPU_FABRIC_STATE_COMPLETED,
                nvmlReturn_enum_NVML_SUCCESS,
            ),
            FabricState::Failed => (
                NVML_GPU_FABRIC_STATE_COMPLETED,
                nvmlReturn_enum_NVML_ERROR_UNKNOWN,
            ),
        };
        put!(
            info,
            nvmlGpuFabricInfo_t {
                clusterUuid: [0; 16],
                status,
                cliqueId: 0,
                state: state as nvmlGpuFabricState_t,
            }
        )
    })
}
