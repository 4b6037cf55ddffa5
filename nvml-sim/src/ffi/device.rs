//! Device enumeration and identity.

use std::ffi::{c_char, c_int, c_uint};

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, GPU_IS_LOST, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, R, get_str, guard};
use crate::scenario::parse_pci_bus_id;
use crate::scenario::{Architecture, Feature, Gpu};
use crate::sim;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        put!(count, c.w.scenario.gpus.len() as c_uint)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetCount_v2(count) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        super::nonnull(device)?;
        let g =
            c.w.scenario
                .gpus
                .get(index as usize)
                .ok_or(INVALID_ARGUMENT)?;
        if g.is_lost(c.t) {
            return Err(GPU_IS_LOST);
        }
        put!(device, sim::gpu_handle(index as usize))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        // SAFETY: `uuid` is this function's C string argument: null (refused by
        // `get_str`) or NUL-terminated, per the NVML API.
        let uuid = unsafe { get_str(uuid) }?;
        super::nonnull(device)?;
        let s = &c.w.scenario;
        let (h, lost) = if let Some((i, g)) = s.gpu_by_uuid(uuid) {
            (sim::gpu_handle(i), g.is_lost(c.t))
        } else if let Some((i, j)) = s.mig_by_uuid(uuid) {
            (sim::mig_handle(i, j), s.gpus[i].is_lost(c.t))
        } else {
            return Err(NOT_FOUND);
        };
        if lost {
            return Err(GPU_IS_LOST);
        }
        put!(device, h)
    })
}

fn find_by_pci(c: &Ctx, bus_id: &str) -> Result<nvmlDevice_t, nvmlReturn_t> {
    let want = parse_pci_bus_id(bus_id.trim()).ok_or(INVALID_ARGUMENT)?;
    let (i, g) =
        c.w.scenario
            .gpus
            .iter()
            .enumerate()
            .find(|(_, g)| parse_pci_bus_id(&g.pci_bus_id) == Some(want))
            .ok_or(NOT_FOUND)?;
    if g.is_lost(c.t) {
        return Err(GPU_IS_LOST);
    }
    Ok(sim::gpu_handle(i))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        // SAFETY: `bus_id` is this function's C string argument: null (refused by
        // `get_str`) or NUL-terminated, per the NVML API.
        let bus_id = unsafe { get_str(bus_id) }?;
        super::nonnull(device)?;
        let h = find_by_pci(&c, bus_id)?;
        put!(device, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged; the
    // callee's pointer contract (null or valid, per the NVML API) is this
    // function's own.
    unsafe { nvmlDeviceGetHandleByPciBusId_v2(bus_id, device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleBySerial(
    serial: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        // SAFETY: `serial` is this function's C string argument: null (refused by
        // `get_str`) or NUL-terminated, per the NVML API.
        let serial = unsafe { get_str(serial) }?;
        super::nonnull(device)?;
        let (i, g) =
            c.w.scenario
                .gpus
                .iter()
                .enumerate()
                .find(|(_, g)| g.serial.as_deref() == Some(serial))
                .ok_or(NOT_FOUND)?;
        if g.is_lost(c.t) {
            return Err(GPU_IS_LOST);
        }
        put!(device, sim::gpu_handle(i))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (i, _) = c.gpu(device, None)?;
        put!(index, i as c_uint)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (i, _) = c.gpu(device, None)?;
        put!(minor, i as c_uint)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        let n = match d.mig {
            Some((_, m)) => format!("{} MIG {}", d.gpu.model, m.profile),
            None => d.gpu.model.clone(),
        };
        put_str!(name, length, &n)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        let u = match d.mig {
            Some((_, m)) => &m.uuid,
            None => &d.gpu.uuid,
        };
        put_str!(uuid, length, u)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        if d.gpu.unsupported(Feature::Serial) {
            return Err(NOT_SUPPORTED);
        }
        let s = d.gpu.serial.as_deref().ok_or(NOT_SUPPORTED)?;
        put_str!(serial, length, s)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetVbiosVersion(
    device: nvmlDevice_t,
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        if d.gpu.unsupported(Feature::Vbios) {
            return Err(NOT_SUPPORTED);
        }
        put_str!(version, length, &d.gpu.vbios_version)
    })
}

fn pci_device_id(g: &Gpu) -> u32 {
    let dev: u32 = match g.architecture {
        Architecture::Volta => 0x1DB5,
        Architecture::Turing => 0x1EB8,
        Architecture::Ampere => 0x20B2,
        Architecture::Ada => 0x26B5,
        Architecture::Hopper => 0x2330,
        Architecture::Blackwell => 0x2901,
    };
    (dev << 16) | 0x10DE
}

fn fill_pci(g: &Gpu) -> Result<nvmlPciInfo_t, nvmlReturn_t> {
    let (domain, bus, device, func) = parse_pci_bus_id(&g.pci_bus_id).ok_or(INVALID_ARGUMENT)?;
    // SAFETY: nvmlPciInfo_t is plain old data; all-zero is valid.
    let mut p: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
    p.domain = domain;
    p.bus = bus;
    p.device = device;
    p.pciDeviceId = pci_device_id(g);
    p.pciSubSystemId = 0x16C1_10DE;
    let full = format!("{domain:08X}:{bus:02X}:{device:02X}.{func:X}");
    let legacy = format!("{:04X}:{bus:02X}:{device:02X}.{func:X}", domain & 0xffff);
    for (dst, src) in [
        (&mut p.busId[..], full.as_bytes()),
        (&mut p.busIdLegacy[..], legacy.as_bytes()),
    ] {
        let n = dst.len().saturating_sub(1);
        for (d, s) in dst.iter_mut().zip(src.iter().take(n)) {
            *d = *s as c_char;
        }
    }
    Ok(p)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        let p = fill_pci(d.gpu)?;
        put!(pci, p)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v2(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged: the
    // bindings declare v1, v2 and v3 with the same `nvmlPciInfo_t`, so `pci`
    // is null or valid for v3's write, as the NVML API requires.
    unsafe { nvmlDeviceGetPciInfo_v3(device, pci) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    // SAFETY: passes this function's own arguments on unchanged: the
    // bindings declare v1, v2 and v3 with the same `nvmlPciInfo_t`, so `pci`
    // is null or valid for v3's write, as the NVML API requires.
    unsafe { nvmlDeviceGetPciInfo_v3(device, pci) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetArchitecture(
    device: nvmlDevice_t,
    arch: *mut nvmlDeviceArchitecture_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        let a = match d.gpu.architecture {
            Architecture::Volta => NVML_DEVICE_ARCH_VOLTA,
            Architecture::Turing => NVML_DEVICE_ARCH_TURING,
            Architecture::Ampere => NVML_DEVICE_ARCH_AMPERE,
            Architecture::Ada => NVML_DEVICE_ARCH_ADA,
            Architecture::Hopper => NVML_DEVICE_ARCH_HOPPER,
            Architecture::Blackwell => NVML_DEVICE_ARCH_BLACKWELL,
        };
        put!(arch, a)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetBrand(
    device: nvmlDevice_t,
    brand: *mut nvmlBrandType_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        let b = match d.gpu.architecture {
            Architecture::Volta | Architecture::Turing => nvmlBrandType_enum_NVML_BRAND_TESLA,
            _ => nvmlBrandType_enum_NVML_BRAND_NVIDIA,
        };
        put!(brand, b)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    guard(|| -> R {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        super::nonnull(major)?;
        super::nonnull(minor)?;
        let (ma, mi) = d.gpu.architecture.compute_capability();
        put!(major, ma)?;
        put!(minor, mi)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        c.gpu(device, None)?;
        put!(mode, nvmlEnableState_enum_NVML_FEATURE_ENABLED)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(
    device: nvmlDevice_t,
    mode: *mut nvmlComputeMode_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        c.dev(device)?;
        put!(mode, nvmlComputeMode_enum_NVML_COMPUTEMODE_DEFAULT)
    })
}
