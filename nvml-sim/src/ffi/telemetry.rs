//! Utilization, memory, power, energy, temperature, fans, clocks, throttling, pstate.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INVALID_ARGUMENT, MIB, NOT_SUPPORTED, R, guard, to_u32, to_u64};
use crate::scenario::{Curve, Feature, Gpu, Load, ThrottleReason};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Utilization))?;
        let mem = if g.unsupported(Feature::MemoryUtilization) {
            0.0
        } else {
            g.load.memory_utilization.at(c.t)
        };
        let u = nvmlUtilization_t {
            gpu: to_u32(g.load.utilization.at(c.t)),
            memory: to_u32(mem),
        };
        put!(utilization, u)
    })
}

/// (total, reserved, used) in bytes for a GPU or MIG handle.
fn memory(c: &Ctx, device: nvmlDevice_t) -> Result<(u64, u64, u64), nvmlReturn_t> {
    let d = c.dev(device)?;
    Ok(match d.mig {
        Some((_, m)) => {
            let used = match &m.load.memory_used_mib {
                Some(cv) => cv.at(c.t),
                None => {
                    let listed = d.gpu.processes_in_mig(&m.uuid).cloned().collect();
                    let all = crate::live::merge(listed, &m.uuid);
                    all.iter().map(|p| p.memory_mib as f64).sum()
                }
            };
            let total = m.memory_mib * MIB;
            (total, 0, to_u64(used * MIB as f64).min(total))
        }
        None => {
            let g = d.gpu;
            let total = g.memory_mib * MIB;
            let reserved = g.reserved_mib * MIB;
            let used = match &g.load.memory_used_mib {
                Some(_) => g.memory_used_mib(c.t),
                None => {
                    let all = crate::live::merge(g.processes.clone(), &g.uuid);
                    all.iter().map(|p| p.memory_mib as f64).sum()
                }
            };
            let used = to_u64(used * MIB as f64).min(total - reserved);
            (total, reserved, used)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    mem: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        super::nonnull(mem)?;
        let want = (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as u32;
        // SAFETY: `mem` is non-null (checked above) and points to the caller's
        // struct (NVML API); only its version is read, unaligned.
        let version = unsafe { std::ptr::addr_of!((*mem).version).read_unaligned() };
        if version != want {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let (total, reserved, used) = memory(&c, device)?;
        let v = nvmlMemory_v2_t {
            version,
            total,
            reserved,
            free: total - reserved - used,
            used,
        };
        put!(mem, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    mem: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (total, reserved, used) = memory(&c, device)?;
        // v1 counts the reserved memory as used
        let v = nvmlMemory_t {
            total,
            free: total - reserved - used,
            used: used + reserved,
        };
        put!(mem, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Power))?;
        put!(power, to_u32(g.load.power_watts.at(c.t) * 1000.0))
    })
}

fn power_limit_mw(c: &Ctx, device: nvmlDevice_t) -> Result<c_uint, nvmlReturn_t> {
    let (_, g) = c.gpu(device, Some(Feature::PowerLimit))?;
    Ok(to_u32(g.power_limit_watts * 1000.0))
}

fn default_power_limit_mw(c: &Ctx, device: nvmlDevice_t) -> Result<c_uint, nvmlReturn_t> {
    let (_, g) = c.gpu(device, Some(Feature::PowerLimit))?;
    let watts = g.power_limit_default_watts.unwrap_or(g.power_limit_watts);
    Ok(to_u32(watts * 1000.0))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let v = power_limit_mw(&c, device)?;
        put!(limit, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetEnforcedPowerLimit(device, limit) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementDefaultLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let v = default_power_limit_mw(&c, device)?;
        put!(limit, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimitConstraints(
    device: nvmlDevice_t,
    min: *mut c_uint,
    max: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let v = power_limit_mw(&c, device)?.max(default_power_limit_mw(&c, device)?);
        super::nonnull(min)?;
        super::nonnull(max)?;
        put!(min, v / 2)?;
        put!(max, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (i, _) = c.gpu(device, Some(Feature::Energy))?;
        super::nonnull(energy)?;
        let v = c.w.energy_mj(i, c.t);
        put!(energy, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Temperature))?;
        if sensor != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return Err(INVALID_ARGUMENT);
        }
        put!(temp, to_u32(g.load.temperature_celsius.at(c.t)))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: nvmlDevice_t,
    kind: nvmlTemperatureThresholds_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Temperature))?;
        let th = &g.thresholds_celsius;
        let v = match kind {
            nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SHUTDOWN => th.shutdown,
            nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SLOWDOWN => th.slowdown,
            nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_MEM_MAX => th.memory_max,
            nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_GPU_MAX => th.gpu_max,
            k if k < nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_COUNT => {
                return Err(NOT_SUPPORTED);
            }
            _ => return Err(INVALID_ARGUMENT),
        };
        put!(temp, v)
    })
}

fn num_fans(g: &Gpu) -> c_uint {
    if g.unsupported(Feature::FanSpeed) {
        0
    } else {
        1
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNumFans(
    device: nvmlDevice_t,
    n: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, None)?;
        put!(n, num_fans(g))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: nvmlDevice_t,
    fan: c_uint,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        // Real fanless boards (H200 SXM) answer INVALID_ARGUMENT here, not
        // NOT_SUPPORTED: fan 0 is simply out of range.
        let (_, g) = c.gpu(device, None)?;
        if fan >= num_fans(g) {
            return Err(INVALID_ARGUMENT);
        }
        put!(speed, to_u32(g.load.fan_speed.at(c.t)))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed(
    device: nvmlDevice_t,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetFanSpeed_v2(device, 0, speed) }
}

fn max_clock(g: &Gpu, kind: nvmlClockType_t) -> Result<u32, nvmlReturn_t> {
    let m = &g.max_clocks_mhz;
    Ok(match kind {
        nvmlClockType_enum_NVML_CLOCK_GRAPHICS => m.graphics,
        nvmlClockType_enum_NVML_CLOCK_SM => m.sm,
        nvmlClockType_enum_NVML_CLOCK_MEM => m.memory,
        nvmlClockType_enum_NVML_CLOCK_VIDEO => m.video,
        _ => return Err(INVALID_ARGUMENT),
    })
}

fn current_clock(g: &Gpu, kind: nvmlClockType_t, t: f64) -> Result<u32, nvmlReturn_t> {
    let l = &g.load;
    let curve = match kind {
        nvmlClockType_enum_NVML_CLOCK_GRAPHICS => &l.graphics_clock_mhz,
        nvmlClockType_enum_NVML_CLOCK_SM => &l.sm_clock_mhz,
        nvmlClockType_enum_NVML_CLOCK_MEM => &l.memory_clock_mhz,
        nvmlClockType_enum_NVML_CLOCK_VIDEO => &l.video_clock_mhz,
        _ => return Err(INVALID_ARGUMENT),
    };
    let max = max_clock(g, kind)?;
    Ok(match curve {
        Some(cv) => to_u32(cv.at(t)),
        None => max,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Clocks))?;
        let v = current_clock(g, kind, c.t)?;
        put!(clock, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Clocks))?;
        let v = max_clock(g, kind)?;
        put!(clock, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClock(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    id: nvmlClockId_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Clocks))?;
        let v = match id {
            nvmlClockId_enum_NVML_CLOCK_ID_CURRENT => current_clock(g, kind, c.t)?,
            nvmlClockId_enum_NVML_CLOCK_ID_APP_CLOCK_TARGET
            | nvmlClockId_enum_NVML_CLOCK_ID_APP_CLOCK_DEFAULT
            | nvmlClockId_enum_NVML_CLOCK_ID_CUSTOMER_BOOST_MAX => max_clock(g, kind)?,
            _ => return Err(INVALID_ARGUMENT),
        };
        put!(mhz, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxCustomerBoostClock(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetMaxClockInfo(device, kind, clock) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Throttle))?;
        let bits = g
            .throttle_reasons(c.t)
            .iter()
            .fold(0u64, |acc, r| acc | r.bit());
        put!(reasons, bits)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut u64,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetCurrentClocksEventReasons(device, reasons) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        c.gpu(device, Some(Feature::Throttle))?;
        put!(reasons, 0x1ff)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut u64,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetSupportedClocksEventReasons(device, reasons) }
}

/// Throttle reasons counted by each violation policy.
pub(crate) fn policy_reasons(policy: nvmlPerfPolicyType_t) -> Option<&'static [ThrottleReason]> {
    use ThrottleReason::*;
    Some(match policy {
        nvmlPerfPolicyType_enum_NVML_PERF_POLICY_POWER => &[SwPowerCap, HwPowerBrake],
        nvmlPerfPolicyType_enum_NVML_PERF_POLICY_THERMAL => &[SwThermal, HwThermal],
        nvmlPerfPolicyType_enum_NVML_PERF_POLICY_SYNC_BOOST => &[SyncBoost],
        nvmlPerfPolicyType_enum_NVML_PERF_POLICY_RELIABILITY => &[HwSlowdown],
        nvmlPerfPolicyType_enum_NVML_PERF_POLICY_BOARD_LIMIT
        | nvmlPerfPolicyType_enum_NVML_PERF_POLICY_LOW_UTILIZATION
        | nvmlPerfPolicyType_enum_NVML_PERF_POLICY_TOTAL_APP_CLOCKS
        | nvmlPerfPolicyType_enum_NVML_PERF_POLICY_TOTAL_BASE_CLOCKS => &[],
        _ => return None,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    viol: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Violation))?;
        let reasons = policy_reasons(policy).ok_or(INVALID_ARGUMENT)?;
        let secs = g.throttle_seconds(reasons, c.t);
        let v = nvmlViolationTime_t {
            referenceTime: to_u64((c.w.epoch + c.t) * 1e6),
            violationTime: to_u64(secs * 1e9),
        };
        put!(viol, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPerformanceState(
    device: nvmlDevice_t,
    pstate: *mut nvmlPstates_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::Pstate))?;
        put!(pstate, to_u32(g.load.pstate.at(c.t)).min(15))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerState(
    device: nvmlDevice_t,
    pstate: *mut nvmlPstates_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetPerformanceState(device, pstate) }
}

/// NVML's typical encoder/decoder sampling period.
const CODEC_SAMPLING_US: c_uint = 167_000;

/// Encoder and decoder utilization: the same call shape, another curve.
///
/// # Safety
/// `util` and `period_us` are null or valid for a write.
unsafe fn codec_utilization(
    device: nvmlDevice_t,
    util: *mut c_uint,
    period_us: *mut c_uint,
    feature: Feature,
    curve: fn(&Load) -> &Curve,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(feature))?;
        super::nonnull(util)?;
        super::nonnull(period_us)?;
        put!(util, to_u32(curve(&g.load).at(c.t)))?;
        put!(period_us, CODEC_SAMPLING_US)
    })
}

/// Exports `$name`, the encoder's or decoder's utilization call: NVML's
/// signature over [`codec_utilization`] with that codec's feature and curve.
macro_rules! codec_utilization_export {
    ($name:ident, $feature:expr, $curve:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: nvmlDevice_t,
            util: *mut c_uint,
            period_us: *mut c_uint,
        ) -> nvmlReturn_t {
            // SAFETY: `util` and `period_us` are this function's out-pointer arguments: null or
            // valid as the NVML API requires, which is `codec_utilization`'s contract.
            unsafe { codec_utilization(device, util, period_us, $feature, |l| &l.$curve) }
        }
    };
}

codec_utilization_export!(
    nvmlDeviceGetEncoderUtilization,
    Feature::Encoder,
    encoder_utilization
);
codec_utilization_export!(
    nvmlDeviceGetDecoderUtilization,
    Feature::Decoder,
    decoder_utilization
);
