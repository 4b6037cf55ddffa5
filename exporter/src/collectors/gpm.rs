//! GPM (GPU Performance Monitoring, Hopper+): SM activity, occupancy, tensor
//! activity, DRAM bandwidth and PCIe rates from two samples, without DCGM.
//! Each cycle's sample is kept for the next, so a value spans one interval.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nvml_wrapper::GpmSample;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;

use super::{Collector, Ctx, pcie};
use crate::metrics::{Collected, Family, Subject};

/// NVML refuses metrics from samples closer than this.
const MIN_GAP: Duration = Duration::from_millis(100);
const MIB: f64 = 1024.0 * 1024.0;

pub struct Gpm<'n> {
    previous: HashMap<String, (GpmSample<'n>, Instant)>,
}

impl Gpm<'_> {
    pub fn new() -> Self {
        Self {
            previous: HashMap::new(),
        }
    }
}

/// MIG instances read the first four.
const DEVICE_IDS: [GpmMetricId; 7] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::GraphicsUtil,
];

struct Families {
    sm: Family,
    occ: Family,
    tensor: Family,
    dram: Family,
    tx: Family,
    rx: Family,
    graphics: Family,
}

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
    fn name(&self) -> &'static str {
        "gpm"
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut f = Families {
            sm: Family::gauge(
                "gpu_sm_active_ratio",
                "Fraction of time each SM had at least one warp assigned (GPM).",
            ),
            occ: Family::gauge(
                "gpu_sm_occupancy_ratio",
                "Warps resident on the SMs as a fraction of the maximum (GPM).",
            ),
            tensor: Family::gauge(
                "gpu_tensor_active_ratio",
                "Fraction of time the tensor cores were active (GPM).",
            ),
            dram: Family::gauge(
                "gpu_dram_active_ratio",
                "Fraction of the DRAM bandwidth used (GPM).",
            ),
            tx: Family::gauge(pcie::TX, pcie::TX_HELP),
            rx: Family::gauge(pcie::RX, pcie::RX_HELP),
            graphics: Family::gauge(
                "gpu_graphics_active_ratio",
                "Fraction of time the graphics or compute engine was active (GPM).",
            ),
        };
        let mut mig_sm = Family::gauge(
            "gpu_mig_sm_active_ratio",
            "SM activity of the MIG instance (GPM).",
        );
        let mut mig_occ = Family::gauge(
            "gpu_mig_sm_occupancy_ratio",
            "SM occupancy of the MIG instance (GPM).",
        );
        let mut mig_tensor = Family::gauge(
            "gpu_mig_tensor_active_ratio",
            "Tensor activity of the MIG instance (GPM).",
        );
        let mut mig_dram = Family::gauge(
            "gpu_mig_dram_active_ratio",
            "DRAM bandwidth used by the MIG instance (GPM).",
        );
        let gpus = cx.gpus;
        for gpu in gpus {
            if !gpu.gpm {
                continue;
            }
            let (i, uuid) = (gpu.id.index, gpu.id.uuid.to_string());
            let Some(v) = self.step(cx, i, &uuid, gpu.device.gpm_sample(), &DEVICE_IDS) else {
                continue;
            };
            let s = gpu.subject();
            let pushes = [
                (&mut f.sm, 0.01),
                (&mut f.occ, 0.01),
                (&mut f.tensor, 0.01),
                (&mut f.dram, 0.01),
                (&mut f.tx, MIB),
                (&mut f.rx, MIB),
                (&mut f.graphics, 0.01),
            ];
            for ((fam, scale), value) in pushes.into_iter().zip(v) {
                if let Some(x) = value {
                    fam.push(s.clone(), vec![], x * scale);
                }
            }
        }
        let migs = cx.migs;
        for mig in migs {
            let Some(parent) = gpus.iter().find(|g| g.id == mig.id.gpu) else {
                continue;
            };
            if !parent.gpm {
                continue;
            }
            let key = mig.id.mig_uuid.to_string();
            let sample = parent.device.gpm_mig_sample(mig.id.gpu_instance_id);
            let Some(v) = self.step(cx, parent.id.index, &key, sample, &DEVICE_IDS[..4]) else {
                continue;
            };
            let s = Subject::Mig(mig.id.clone());
            for (fam, value) in [&mut mig_sm, &mut mig_occ, &mut mig_tensor, &mut mig_dram]
                .into_iter()
                .zip(v)
            {
                if let Some(x) = value {
                    fam.push(s.clone(), vec![], x / 100.0);
                }
            }
        }
        // Forget samples of GPUs and instances that are gone.
        self.previous.retain(|k, _| {
            gpus.iter().any(|g| *g.id.uuid == **k) || migs.iter().any(|m| *m.id.mig_uuid == **k)
        });
        out.families.extend([
            f.sm, f.occ, f.tensor, f.dram, f.tx, f.rx, f.graphics, mig_sm, mig_occ, mig_tensor,
            mig_dram,
        ]);
    }
}
