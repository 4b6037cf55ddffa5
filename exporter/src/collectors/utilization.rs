//! GPU and memory-controller duty cycles, encoder and decoder utilization.

use super::{Collector, Ctx, pct};
use crate::metrics::{Collected, Family};

pub struct Utilization;

impl<'n> Collector<'n> for Utilization {
    fn name(&self) -> &'static str {
        "utilization"
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut gpu_util = Family::gauge(
            "gpu_utilization_ratio",
            "Fraction of the sample period during which a kernel was running on the GPU (duty cycle, not SM activity).",
        );
        let mut mem_util = Family::gauge(
            "gpu_memory_utilization_ratio",
            "Fraction of the sample period during which device memory was being read or written.",
        );
        let mut enc = Family::gauge(
            "gpu_encoder_utilization_ratio",
            "Video encoder utilization.",
        );
        let mut dec = Family::gauge(
            "gpu_decoder_utilization_ratio",
            "Video decoder utilization.",
        );
        for gpu in cx.gpus {
            let i = gpu.id.index;
            if let Some(u) = cx.reader.read(
                i,
                "nvmlDeviceGetUtilizationRates",
                gpu.device.utilization_rates(),
            ) {
                gpu_util.push(gpu.subject(), vec![], pct(u.gpu));
                mem_util.push(gpu.subject(), vec![], pct(u.memory));
            }
            if let Some(u) = cx.reader.read(
                i,
                "nvmlDeviceGetEncoderUtilization",
                gpu.device.encoder_utilization(),
            ) {
                enc.push(gpu.subject(), vec![], pct(u.utilization));
            }
            if let Some(u) = cx.reader.read(
                i,
                "nvmlDeviceGetDecoderUtilization",
                gpu.device.decoder_utilization(),
            ) {
                dec.push(gpu.subject(), vec![], pct(u.utilization));
            }
        }
        out.families.extend([gpu_util, mem_util, enc, dec]);
    }
}
