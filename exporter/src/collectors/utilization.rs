//! GPU and memory-controller duty cycles, encoder and decoder utilization.

use super::{Collector, Ctx, Spec, pct};
use crate::metrics::{Collected, Desc, Family};

pub struct Utilization;

pub const SPEC: Spec = Spec {
    name: "utilization",
    families: &[&GPU, &MEMORY, &ENCODER, &DECODER],
    build: |_, _| Box::new(Utilization),
};

const GPU: Desc = Desc::gauge(
    "gpu_utilization_ratio",
    "Fraction of the sample period during which a kernel was running on the GPU (duty cycle, not SM activity).",
    "ratio",
    &[],
);
const MEMORY: Desc = Desc::gauge(
    "gpu_memory_utilization_ratio",
    "Fraction of the sample period during which device memory was being read or written.",
    "ratio",
    &[],
);
const ENCODER: Desc = Desc::gauge(
    "gpu_encoder_utilization_ratio",
    "Video encoder utilization.",
    "ratio",
    &[],
);
const DECODER: Desc = Desc::gauge(
    "gpu_decoder_utilization_ratio",
    "Video decoder utilization.",
    "ratio",
    &[],
);

impl<'n> Collector<'n> for Utilization {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut gpu_util = Family::of(&GPU);
        let mut mem_util = Family::of(&MEMORY);
        let mut enc = Family::of(&ENCODER);
        let mut dec = Family::of(&DECODER);
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
