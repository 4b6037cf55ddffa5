//! GPM (GPU performance monitoring, Hopper and newer).
//!
//! A sample records (GPU, MIG instance, scenario time). `nvmlGpmMetricsGet`
//! reports each metric as the curve's mean between the two samples' times.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_uint};
use std::sync::Mutex;

use nvml_wrapper_sys::bindings::*;

use super::{Ctx, GPU_IS_LOST, INVALID_ARGUMENT, NOT_SUPPORTED, R, guard};
use crate::scenario::{Curve, Feature, Gpu, MigLoad};
use crate::sim::{self, lock};

#[derive(Clone, Copy)]
struct Sample {
    gpu: usize,
    mig: Option<usize>,
    t: f64,
}

struct Samples {
    next: usize,
    map: BTreeMap<usize, Option<Sample>>,
}

static SAMPLES: Mutex<Samples> = Mutex::new(Samples {
    next: 1,
    map: BTreeMap::new(),
});

fn gpm_supported(g: &Gpu) -> bool {
    g.architecture.has_gpm() && !g.unsupported(Feature::Gpm)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        super::nonnull(support)?;
        // SAFETY: `support` is non-null (checked above) and points to the
        // caller's struct (NVML API); the version is read unaligned.
        let version = unsafe { std::ptr::addr_of!((*support).version).read_unaligned() };
        if version != NVML_GPM_SUPPORT_VERSION {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let d = c.dev(device)?;
        let v = nvmlGpmSupport_t {
            version,
            isSupportedDevice: gpm_supported(d.gpu) as c_uint,
        };
        put!(support, v)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryIfStreamingEnabled(
    device: nvmlDevice_t,
    state: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        if !gpm_supported(d.gpu) {
            return Err(NOT_SUPPORTED);
        }
        put!(state, 0)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| {
        sim::world()?;
        super::nonnull(sample)?;
        let mut s = lock(&SAMPLES);
        let id = s.next;
        s.next += 1;
        s.map.insert(id, None);
        put!(sample, id as nvmlGpmSample_t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| match lock(&SAMPLES).map.remove(&(sample as usize)) {
        Some(_) => Ok(()),
        None => Err(INVALID_ARGUMENT),
    })
}

fn record(sample: nvmlGpmSample_t, value: Sample) -> R {
    match lock(&SAMPLES).map.get_mut(&(sample as usize)) {
        Some(slot) => {
            *slot = Some(value);
            Ok(())
        }
        None => Err(INVALID_ARGUMENT),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let d = c.dev(device)?;
        if !gpm_supported(d.gpu) {
            return Err(NOT_SUPPORTED);
        }
        record(
            sample,
            Sample {
                gpu: d.idx,
                mig: d.mig.map(|(j, _)| j),
                t: c.t,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: c_uint,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        let (idx, g) = c.gpu(device, None)?;
        if !gpm_supported(g) {
            return Err(NOT_SUPPORTED);
        }
        let j = g
            .mig
            .iter()
            .position(|m| m.gpu_instance_id == gpu_instance_id)
            .ok_or(INVALID_ARGUMENT)?;
        record(
            sample,
            Sample {
                gpu: idx,
                mig: Some(j),
                t: c.t,
            },
        )
    })
}

struct Info {
    short: &'static CStr,
    long: &'static CStr,
    unit: &'static CStr,
}

const PCT: &CStr = c"%";
const MIBS: &CStr = c"MiB/sec";

/// Metric value over [t0, t1], or per-metric NOT_SUPPORTED.
fn metric(
    g: &Gpu,
    mig: Option<usize>,
    id: u32,
    t0: f64,
    t1: f64,
) -> Result<(f64, Info), nvmlReturn_t> {
    match (value(g, mig, id, t0, t1), describe(id)) {
        (Some(v), Some(info)) => Ok((v, info)),
        _ => Err(NOT_SUPPORTED),
    }
}

/// The curve's mean over [t0, t1] for metric `id`; None where the GPU (or
/// a MIG instance, for device-wide metrics) does not measure it.
fn value(g: &Gpu, mig: Option<usize>, id: u32, t0: f64, t1: f64) -> Option<f64> {
    let mean = |c: &Curve| c.mean(t0, t1);
    let inst = mig.and_then(|j| g.mig.get(j));
    let pick = |gpu: &Curve, f: fn(&MigLoad) -> &Curve| match inst {
        Some(m) => mean(f(&m.load)),
        None => mean(gpu),
    };
    // Device-wide metrics: not on MIG instances, nor where the feature is off.
    let whole = |f: Feature| inst.is_none() && !g.unsupported(f);
    let links = g.nvlinks as f64;
    let l = &g.load;
    Some(match id {
        nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL if whole(Feature::Utilization) => {
            mean(&l.utilization)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL => pick(&l.sm_active, |m| &m.sm_active),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY => {
            pick(&l.sm_occupancy, |m| &m.sm_occupancy)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL => {
            pick(&l.tensor_active, |m| &m.tensor_active)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL => pick(&l.dram_active, |m| &m.dram_active),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_TX_PER_SEC if whole(Feature::Pcie) => {
            mean(&l.pcie_tx_bytes_per_second) / 1048576.0
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_RX_PER_SEC if whole(Feature::Pcie) => {
            mean(&l.pcie_rx_bytes_per_second) / 1048576.0
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC if whole(Feature::Nvlink) => {
            mean(&l.nvlink_tx_bytes_per_second) * links / 1048576.0
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC if whole(Feature::Nvlink) => {
            mean(&l.nvlink_rx_bytes_per_second) * links / 1048576.0
        }
        _ => return None,
    })
}

/// Metric `id`'s names and unit, as real NVML reports them.
fn describe(id: u32) -> Option<Info> {
    let (short, long, unit) = match id {
        nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL => (
            c"gr_util",
            c"Percentage of time any compute/graphics app was active on the GPU",
            PCT,
        ),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL => {
            (c"sm_util", c"Percentage of SMs that were busy", PCT)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY => (
            c"sm_occupancy",
            c"Percentage of warps that were occupied",
            PCT,
        ),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL => (
            c"any_tensor_util",
            c"Percentage of time the GPU's SMs were doing any tensor operations",
            PCT,
        ),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL => (
            c"dram_bw_util",
            c"Percentage of DRAM bw used vs theoretical maximum",
            PCT,
        ),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_TX_PER_SEC => {
            (c"pcie_tx", c"PCIe traffic from this GPU in MiB/sec", MIBS)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_RX_PER_SEC => {
            (c"pcie_rx", c"PCIe traffic to this GPU in MiB/sec", MIBS)
        }
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC => (
            c"nvlink_total_tx",
            c"NvLink write bandwidth for all links in MiB/sec",
            MIBS,
        ),
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC => (
            c"nvlink_total_rx",
            c"NvLink read bandwidth for all links in MiB/sec",
            MIBS,
        ),
        _ => return None,
    };
    Some(Info { short, long, unit })
}

/// Writes one metric's answer into the caller's request: the value and
/// names, or the error with zero and null names.
fn answer(m: &mut nvmlGpmMetric_t, result: Result<(f64, Info), nvmlReturn_t>) {
    let (value, ret, info) = match result {
        Ok((v, info)) => (v, nvmlReturn_enum_NVML_SUCCESS, Some(info)),
        Err(e) => (0.0, e, None),
    };
    let name = |f: fn(&Info) -> &'static CStr| {
        info.as_ref()
            .map_or(std::ptr::null_mut(), |i| f(i).as_ptr().cast_mut())
    };
    m.value = value;
    m.nvmlReturn = ret;
    m.metricInfo.shortName = name(|i| i.short);
    m.metricInfo.longName = name(|i| i.long);
    m.metricInfo.unit = name(|i| i.unit);
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(request: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    guard(|| {
        let c = Ctx::new()?;
        super::nonnull(request)?;
        // SAFETY: `request` is non-null (checked above) and points to the
        // caller's aligned request struct (NVML API), which nothing else
        // touches during the call.
        let req = unsafe { &mut *request };
        if req.version != NVML_GPM_METRICS_GET_VERSION {
            return Err(nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let n = req.numMetrics as usize;
        if n > req.metrics.len() || n > nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX as usize {
            return Err(INVALID_ARGUMENT);
        }
        let (s1, s2) = {
            let s = lock(&SAMPLES);
            let get = |h: nvmlGpmSample_t| {
                s.map
                    .get(&(h as usize))
                    .copied()
                    .flatten()
                    .ok_or(INVALID_ARGUMENT)
            };
            (get(req.sample1)?, get(req.sample2)?)
        };
        if s1.gpu != s2.gpu || s1.mig != s2.mig {
            return Err(INVALID_ARGUMENT);
        }
        let g = c.w.scenario.gpus.get(s1.gpu).ok_or(INVALID_ARGUMENT)?;
        if g.is_lost(c.t) {
            return Err(GPU_IS_LOST);
        }
        let (t0, t1) = if s1.t <= s2.t {
            (s1.t, s2.t)
        } else {
            (s2.t, s1.t)
        };
        for m in req.metrics.iter_mut().take(n) {
            answer(m, metric(g, s1.mig, m.metricId, t0, t1));
        }
        Ok(())
    })
}
