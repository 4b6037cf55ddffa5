//! Device memory (VRAM) from `nvmlDeviceGetMemoryInfo_v2`.

use super::{Collector, Ctx};
use crate::metrics::{Collected, Family};

pub struct Memory;

impl<'n> Collector<'n> for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut total = Family::gauge("gpu_memory_total_bytes", "Total device memory.");
        let mut used = Family::gauge(
            "gpu_memory_used_bytes",
            "Device memory allocated by processes.",
        );
        let mut free = Family::gauge("gpu_memory_free_bytes", "Device memory not allocated.");
        let mut reserved = Family::gauge(
            "gpu_memory_reserved_bytes",
            "Device memory reserved by the driver and firmware.",
        );
        for gpu in cx.gpus {
            if let Some(m) = cx.reader.read(
                gpu.id.index,
                "nvmlDeviceGetMemoryInfo_v2",
                gpu.device.memory_info(),
            ) {
                total.push(gpu.subject(), vec![], m.total as f64);
                used.push(gpu.subject(), vec![], m.used as f64);
                free.push(gpu.subject(), vec![], m.free as f64);
                reserved.push(gpu.subject(), vec![], m.reserved as f64);
            }
        }
        out.families.extend([total, used, free, reserved]);
    }
}
