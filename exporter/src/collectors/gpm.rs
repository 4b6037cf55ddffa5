//! GPM (GPU Performance Monitoring, Hopper+): SM activity, occupancy, tensor
//! activity, DRAM bandwidth and PCIe rates from two samples, without DCGM.
//! Each cycle's sample is kept for the next, so a value spans one interval.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nvml_wrapper::GpmSample;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;

use super::{Collector, Ctx, Spec, pcie};
use crate::metrics::{Collected, Desc, Family, Subject};

/// NVML refuses metrics from samples closer than this.
const MIN_GAP: Duration = Duration::from_millis(100);
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Default)]
pub struct Gpm<'n> {
    /// The last sample by GPU or MIG UUID, and when it was taken.
    previous: HashMap<String, (GpmSample<'n>, Instant)>,
}

pub const SPEC: Spec = Spec {
    name: "gpm",
    families: &[
        &SM,
        &OCCUPANCY,
        &TENSOR,
        &DRAM,
        &pcie::TX,
        &pcie::RX,
        &GRAPHICS,
        &MIG_SM,
        &MIG_OCCUPANCY,
        &MIG_TENSOR,
        &MIG_DRAM,
    ],
    build: |_, _| Box::new(Gpm::default()),
};

pub const SM: Desc = Desc::gauge(
    "gpu_sm_active_ratio",
    "Fraction of time each SM had at least one warp assigned (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const OCCUPANCY: Desc = Desc::gauge(
    "gpu_sm_occupancy_ratio",
    "Warps resident on the SMs as a fraction of the maximum (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const TENSOR: Desc = Desc::gauge(
    "gpu_tensor_active_ratio",
    "Fraction of time the tensor cores were active (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const DRAM: Desc = Desc::gauge(
    "gpu_dram_active_ratio",
    "Fraction of the DRAM bandwidth used (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const GRAPHICS: Desc = Desc::gauge(
    "gpu_graphics_active_ratio",
    "Fraction of time the graphics or compute engine was active (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const MIG_SM: Desc = Desc::gauge(
    "gpu_mig_sm_active_ratio",
    "SM activity of the MIG instance (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const MIG_OCCUPANCY: Desc = Desc::gauge(
    "gpu_mig_sm_occupancy_ratio",
    "SM occupancy of the MIG instance (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const MIG_TENSOR: Desc = Desc::gauge(
    "gpu_mig_tensor_active_ratio",
    "Tensor activity of the MIG instance (GPM, or DCGM without it).",
    "ratio",
    &[],
);
pub const MIG_DRAM: Desc = Desc::gauge(
    "gpu_mig_dram_active_ratio",
    "DRAM bandwidth used by the MIG instance (GPM, or DCGM without it).",
    "ratio",
    &[],
);

/// What a GPU reports, and the factor from NVML's unit (percent, MiB/s).
const DEVICE: [(GpmMetricId, &Desc, f64); 7] = [
    (GpmMetricId::SmUtil, &SM, 0.01),
    (GpmMetricId::SmOccupancy, &OCCUPANCY, 0.01),
    (GpmMetricId::AnyTensorUtil, &TENSOR, 0.01),
    (GpmMetricId::DramBwUtil, &DRAM, 0.01),
    (GpmMetricId::PcieTxPerSec, &pcie::TX, MIB),
    (GpmMetricId::PcieRxPerSec, &pcie::RX, MIB),
    (GpmMetricId::GraphicsUtil, &GRAPHICS, 0.01),
];

/// What a MIG instance reports (percent).
const MIG: [(GpmMetricId, &Desc); 4] = [
    (GpmMetricId::SmUtil, &MIG_SM),
    (GpmMetricId::SmOccupancy, &MIG_OCCUPANCY),
    (GpmMetricId::AnyTensorUtil, &MIG_TENSOR),
    (GpmMetricId::DramBwUtil, &MIG_DRAM),
];

impl<'n> Gpm<'n> {
    /// Takes a new sample for `key`; returns the metric values against the previous one.
    fn step(
        &mut self,
        cx: &mut Ctx<'_, 'n>,
        gpu: u32,
        key: &str,
        sample: Result<GpmSample<'n>, NvmlError>,
        ids: &[GpmMetricId],
    ) -> Option<Vec<Option<f64>>> {
        let sample = cx.reader.read(gpu, "nvmlGpmSampleGet", sample)?;
        let now = Instant::now();
        let result = match self.previous.get(key) {
            Some((prev, at)) if now.duration_since(*at) >= MIN_GAP => cx.reader.read(
                gpu,
                "nvmlGpmMetricsGet",
                gpm_metrics_get(cx.nvml, prev, &sample, ids),
            ),
            // Too close to the previous sample: keep the older one for next time.
            Some(_) => return None,
            None => None,
        };
        self.previous.insert(key.to_string(), (sample, now));
        let values = result?;
        Some(
            values
                .into_iter()
                .map(|r| match r {
                    Ok(m) if m.value.is_finite() => Some(m.value),
                    Ok(_) => None,
                    Err(e) => {
                        cx.reader.fail(gpu, "nvmlGpmMetricsGet(metric)", &e);
                        None
                    }
                })
                .collect(),
        )
    }
}

impl<'n> Collector<'n> for Gpm<'n> {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut device = DEVICE.map(|(_, desc, _)| Family::of(desc));
        let mut mig = MIG.map(|(_, desc)| Family::of(desc));
        self.collect_gpus(cx, &mut device);
        self.collect_migs(cx, &mut mig);
        // Forget samples of GPUs and instances that are gone.
        let (gpus, migs) = (cx.gpus, cx.migs);
        self.previous.retain(|k, _| {
            gpus.iter().any(|g| *g.id.uuid == **k) || migs.iter().any(|m| *m.id.mig_uuid == **k)
        });
        out.families.extend(device);
        out.families.extend(mig);
    }
}

impl<'n> Gpm<'n> {
    fn collect_gpus(&mut self, cx: &mut Ctx<'_, 'n>, families: &mut [Family; 7]) {
        let ids = DEVICE.map(|(id, _, _)| id);
        let gpus = cx.gpus;
        for gpu in gpus {
            if !gpu.gpm {
                continue;
            }
            let (i, uuid) = (gpu.id.index, gpu.id.uuid.to_string());
            let Some(v) = self.step(cx, i, &uuid, gpu.device.gpm_sample(), &ids) else {
                continue;
            };
            for ((fam, (_, _, scale)), value) in families.iter_mut().zip(DEVICE).zip(v) {
                if let Some(x) = value {
                    fam.push(gpu.subject(), vec![], x * scale);
                }
            }
        }
    }

    fn collect_migs(&mut self, cx: &mut Ctx<'_, 'n>, families: &mut [Family; 4]) {
        let ids = MIG.map(|(id, _)| id);
        let (gpus, migs) = (cx.gpus, cx.migs);
        for mig in migs {
            let Some(parent) = gpus.iter().find(|g| g.id == mig.id.gpu) else {
                continue;
            };
            if !parent.gpm {
                continue;
            }
            let key = mig.id.mig_uuid.to_string();
            let sample = parent.device.gpm_mig_sample(mig.id.gpu_instance_id);
            let Some(v) = self.step(cx, parent.id.index, &key, sample, &ids) else {
                continue;
            };
            for (fam, value) in families.iter_mut().zip(v) {
                if let Some(x) = value {
                    fam.push(Subject::Mig(mig.id.clone()), vec![], x / 100.0);
                }
            }
        }
    }
}
