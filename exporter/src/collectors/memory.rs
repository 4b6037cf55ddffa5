//! Device memory (VRAM) from `nvmlDeviceGetMemoryInfo_v2`.

use super::{Collector, Ctx, Spec};
use crate::metrics::{Collected, Desc, Family};

pub struct Memory;

pub const SPEC: Spec = Spec {
    name: "memory",
    families: &[&TOTAL, &USED, &FREE, &RESERVED],
    build: |_, _| Box::new(Memory),
};

const TOTAL: Desc = Desc::gauge(
    "gpu_memory_total_bytes",
    "Total device memory.",
    "bytes",
    &[],
);
const USED: Desc = Desc::gauge(
    "gpu_memory_used_bytes",
    "Device memory allocated by processes.",
    "bytes",
    &[],
);
const FREE: Desc = Desc::gauge(
    "gpu_memory_free_bytes",
    "Device memory not allocated.",
    "bytes",
    &[],
);
const RESERVED: Desc = Desc::gauge(
    "gpu_memory_reserved_bytes",
    "Device memory reserved by the driver and firmware.",
    "bytes",
    &[],
);

impl<'n> Collector<'n> for Memory {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut total = Family::of(&TOTAL);
        let mut used = Family::of(&USED);
        let mut free = Family::of(&FREE);
        let mut reserved = Family::of(&RESERVED);
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
