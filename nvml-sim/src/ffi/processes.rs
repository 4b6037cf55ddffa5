//! Running processes and per-process utilization.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, INSUFFICIENT_SIZE, MIB, NOT_FOUND, NOT_SUPPORTED, R, guard, to_u32, to_u64};
use crate::scenario::{Feature, Process};

/// (process, gpu instance id, compute instance id) visible through a handle.
fn visible(c: &Ctx, device: nvmlDevice_t) -> Result<Vec<(Process, u32, u32)>, nvmlReturn_t> {
    let d = c.dev(device)?;
    if d.gpu.unsupported(Feature::Processes) {
        return Err(NOT_SUPPORTED);
    }
    let ids = |p: &Process| match &p.mig {
        Some(u) => d
            .gpu
            .mig
            .iter()
            .find(|m| &m.uuid == u)
            .map_or((u32::MAX, u32::MAX), |m| {
                (m.gpu_instance_id, m.compute_instance_id)
            }),
        None => (u32::MAX, u32::MAX),
    };
    let listed: Vec<Process> = d
        .gpu
        .processes
        .iter()
        .filter(|p| match d.mig {
            Some((_, m)) => p.mig.as_deref() == Some(m.uuid.as_str()),
            None => true,
        })
        .cloned()
        .collect();
    let uuid = d.mig.map_or(d.gpu.uuid.as_str(), |(_, m)| m.uuid.as_str());
    Ok(crate::live::merge(listed, uuid)
        .into_iter()
        .map(|p| {
            let (gi, ci) = ids(&p);
            (p, gi, ci)
        })
        .collect())
}

/// The NVML count protocol: `*count` in = capacity, out = needed.
///
/// # Safety
/// `count` is null or valid for a read and a write; `out` is null or has
/// room for `*count` entries.
unsafe fn fill<T>(count: *mut c_uint, out: *mut T, items: Vec<T>) -> R {
    super::nonnull(count)?;
    // SAFETY: `count` is non-null (checked above) and valid for a read
    // (`fill`'s contract).
    let cap = unsafe { count.read_unaligned() } as usize;
    put!(count, items.len() as c_uint)?;
    if items.is_empty() {
        return Ok(());
    }
    if cap < items.len() || out.is_null() {
        return Err(INSUFFICIENT_SIZE);
    }
    for (k, it) in items.into_iter().enumerate() {
        // SAFETY: `out` is non-null (checked above) with room for `*count` =
        // `cap` >= items.len() entries (`fill`'s contract), and k < items.len().
        unsafe { out.add(k).write_unaligned(it) };
    }
    Ok(())
}

/// A version of NVML's process-info struct.
trait ProcessInfo {
    /// From a process and its (GPU instance id, compute instance id).
    fn new(p: &Process, gi: u32, ci: u32) -> Self;
}

impl ProcessInfo for nvmlProcessInfo_t {
    fn new(p: &Process, gi: u32, ci: u32) -> Self {
        Self {
            pid: p.pid,
            usedGpuMemory: p.memory_mib * MIB,
            gpuInstanceId: gi,
            computeInstanceId: ci,
        }
    }
}

/// Version 1 has no instance ids.
impl ProcessInfo for nvmlProcessInfo_v1_t {
    fn new(p: &Process, _: u32, _: u32) -> Self {
        Self {
            pid: p.pid,
            usedGpuMemory: p.memory_mib * MIB,
        }
    }
}

/// The compute processes visible through `device`.
///
/// # Safety
/// As [`fill`].
unsafe fn running<T: ProcessInfo>(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut T,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let items = visible(&c, device)?
            .iter()
            .map(|(p, gi, ci)| T::new(p, *gi, *ci))
            .collect();
        // SAFETY: `count` and `infos` come from this helper's callers with
        // `fill`'s contract.
        unsafe { fill(count, infos, items) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `running`'s contract.
    unsafe { running(device, count, infos) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v2_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, count, infos) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v1_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `running`'s contract.
    unsafe { running(device, count, infos) }
}

/// Graphics and MPS process lists are always empty.
///
/// # Safety
/// As [`fill`].
unsafe fn empty<T>(device: nvmlDevice_t, count: *mut c_uint, infos: *mut T) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        c.dev(device)?;
        // SAFETY: `count` and `infos` come from this helper's callers with
        // `fill`'s contract; no entry is written to `infos`.
        unsafe { fill::<T>(count, infos, Vec::new()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `empty`'s contract.
    unsafe { empty(device, count, infos) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v2(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v2_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `empty`'s contract.
    unsafe { empty(device, count, infos) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v1_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `empty`'s contract.
    unsafe { empty(device, count, infos) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: `count` and `infos` are this function's out-pointer arguments: null or
    // valid as the NVML API requires, which is `empty`'s contract.
    unsafe { empty(device, count, infos) }
}

/// One sample per process, stamped "now" (so always newer than any earlier
/// `lastSeenTimeStamp`). NOT_FOUND without processes; NOT_SUPPORTED on MIG handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen: u64,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (_, g) = c.gpu(device, Some(Feature::ProcessUtilization))?;
        if g.unsupported(Feature::Processes) {
            return Err(NOT_SUPPORTED);
        }
        let now_us = to_u64((c.w.epoch + c.t) * 1e6);
        if g.processes.is_empty() || last_seen >= now_us {
            return Err(NOT_FOUND);
        }
        let items: Vec<_> = g
            .processes
            .iter()
            .map(|p| nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: now_us,
                smUtil: to_u32(p.sm_utilization.at(c.t)),
                memUtil: to_u32(p.memory_utilization.at(c.t)),
                encUtil: 0,
                decUtil: 0,
            })
            .collect();
        // SAFETY: `count` and `utilization` are this function's out-pointer arguments: null or
        // valid as the NVML API requires, which is `fill`'s contract.
        unsafe { fill(count, utilization, items) }
    })
}
