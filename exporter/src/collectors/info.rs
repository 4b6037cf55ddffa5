//! `gpu_info`: identity of each GPU, read once per GPU and cached, and the
//! static facts other collectors read (thresholds, maximum clocks) as labels.
//! Model, PCI bus ID and driver version come with the GPU
//! ([`crate::metrics::DeviceFacts`], read by the collection loop).

use std::collections::HashMap;

use super::{Collector, Ctx, Gpu, Spec};
use crate::metrics::{Collected, Desc, Family, Subject};

pub const SPEC: Spec = Spec {
    name: "info",
    families: &[&GPU_INFO],
    build: |_, _| Box::new(Info::default()),
};

pub const GPU_INFO: Desc = Desc::gauge(
    "gpu_info",
    "GPU identity; the value is always 1.",
    "",
    &[
        "model",
        "pci_bus_id",
        "serial",
        "vbios_version",
        "architecture",
        "mig_mode",
        "driver_version",
        "cuda_version",
        // Added by the thermal and clocks collectors (`annotate`).
        "shutdown_celsius",
        "slowdown_celsius",
        "gpu_max_celsius",
        "memory_max_celsius",
        "max_graphics_hertz",
        "max_sm_hertz",
        "max_memory_hertz",
        "max_video_hertz",
    ],
);

/// Adds static facts of `gpu` to this cycle's `gpu_info`: a fact that never
/// changes costs a label instead of a series of its own.
pub fn annotate(out: &mut Collected, gpu: &Gpu<'_>, labels: &[(&'static str, String)]) {
    let Some(info) = out.families.iter_mut().find(|f| f.name == GPU_INFO.name) else {
        return;
    };
    let of_gpu = |s: &&mut crate::metrics::Sample| matches!(&s.subject, Subject::Device(d) if d.uuid == gpu.id.uuid);
    if let Some(sample) = info.samples.iter_mut().find(of_gpu) {
        sample.labels.extend(labels.iter().cloned());
    }
}

#[derive(Default)]
pub struct Info {
    /// Labels by UUID: identity does not change while the driver is loaded.
    cache: HashMap<String, Vec<(&'static str, String)>>,
    cuda: Option<String>,
}

fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

impl<'n> Collector<'n> for Info {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        if self.cuda.is_none() {
            self.cuda = cx
                .reader
                .read(
                    u32::MAX,
                    "nvmlSystemGetCudaDriverVersion_v2",
                    cx.nvml.sys_cuda_driver_version(),
                )
                .map(cuda_version);
        }
        let cuda = self.cuda.clone().unwrap_or_default();
        let mut fam = Family::of(&GPU_INFO);
        for gpu in cx.gpus {
            if !self.cache.contains_key(&*gpu.id.uuid) {
                let i = gpu.id.index;
                let d = &gpu.device;
                let serial = cx
                    .reader
                    .read(i, "nvmlDeviceGetSerial", d.serial())
                    .unwrap_or_default();
                let vbios = cx
                    .reader
                    .read(i, "nvmlDeviceGetVbiosVersion", d.vbios_version())
                    .unwrap_or_default();
                let arch = gpu
                    .arch
                    .as_ref()
                    .map(|a| format!("{a:?}").to_lowercase())
                    .unwrap_or_default();
                let mig = cx
                    .reader
                    .read(i, "nvmlDeviceGetMigMode", d.mig_mode())
                    .map(|m| {
                        if m.current == 1 {
                            "enabled"
                        } else {
                            "disabled"
                        }
                    })
                    .unwrap_or("unsupported");
                let fact = |v: &Option<std::sync::Arc<str>>| v.as_deref().unwrap_or("").to_owned();
                let labels = vec![
                    ("model", fact(&gpu.id.facts.model)),
                    ("pci_bus_id", fact(&gpu.id.facts.pci_bus_id)),
                    ("serial", serial),
                    ("vbios_version", vbios),
                    ("architecture", arch),
                    ("mig_mode", mig.to_string()),
                ];
                self.cache.insert(gpu.id.uuid.to_string(), labels);
            }
            if let Some(cached) = self.cache.get(&*gpu.id.uuid) {
                let mut labels = cached.clone();
                let driver = gpu.id.facts.driver_version.as_deref().unwrap_or("");
                labels.push(("driver_version", driver.to_owned()));
                labels.push(("cuda_version", cuda.clone()));
                fam.push(gpu.subject(), labels, 1.0);
            }
        }
        out.families.push(fam);
    }
}
