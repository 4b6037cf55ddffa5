//! Temperatures, thresholds and fans.

use std::collections::HashMap;

use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_MEMORY_TEMP;

use super::{Collector, Ctx, Spec, info, pct};
use crate::metrics::{Collected, Desc, Family};
use crate::nvml::raw;

pub const SPEC: Spec = Spec {
    name: "thermal",
    families: &[&TEMP, &MEMORY_TEMP, &THRESHOLD, &FAN],
    build: |_, _| Box::new(Thermal::default()),
};

const TEMP: Desc = Desc::gauge(
    "gpu_temperature_celsius",
    "GPU die temperature.",
    "celsius",
    &[],
);
const MEMORY_TEMP: Desc = Desc::gauge(
    "gpu_memory_temperature_celsius",
    "HBM memory temperature.",
    "celsius",
    &[],
);
const THRESHOLD: Desc = Desc::gauge(
    "gpu_temperature_threshold_celsius",
    "Temperature at which the GPU slows down (slowdown) or its memory's maximum operating temperature (memory_max); all thresholds are gpu_info labels.",
    "celsius",
    &["threshold"],
);
const FAN: Desc = Desc::gauge(
    "gpu_fan_speed_ratio",
    "Fan speed as a fraction of its maximum.",
    "ratio",
    &[],
);

/// Thresholds and the fan count are fixed while the driver is loaded, so they
/// are read once per GPU (what each NVML call costs on an H200:
/// docs/hardware/h200-2026-11-30.md).
#[derive(Default)]
pub struct Thermal {
    fixed: HashMap<String, Fixed>,
}

struct Fixed {
    thresholds: Vec<(&'static str, f64)>,
    fans: u32,
}

/// Reads what does not change; `None` when a call failed and must be retried.
fn read_fixed(cx: &mut Ctx<'_, '_>, i: u32, d: &nvml_wrapper::Device<'_>) -> Option<Fixed> {
    let mut complete = true;
    let mut thresholds = Vec::new();
    for (which, label) in THRESHOLDS {
        let t = d.temperature_threshold(which);
        let read = cx
            .reader
            .read_fixed(i, "nvmlDeviceGetTemperatureThreshold", t);
        complete &= read.settled;
        if let Some(t) = read.value {
            thresholds.push((label, f64::from(t)));
        }
    }
    // Fanless boards (H100/H200 SXM) report 0 fans and reject fan index 0
    // with INVALID_ARGUMENT: ask for the count before asking for a speed.
    let fans = cx
        .reader
        .read_fixed(i, "nvmlDeviceGetNumFans", d.num_fans());
    let fixed = Fixed {
        thresholds,
        fans: fans.value.unwrap_or(0),
    };
    (complete && fans.settled).then_some(fixed)
}

const THRESHOLDS: [(TemperatureThreshold, &str); 4] = [
    (TemperatureThreshold::Shutdown, "shutdown"),
    (TemperatureThreshold::Slowdown, "slowdown"),
    (TemperatureThreshold::GpuMax, "gpu_max"),
    (TemperatureThreshold::MemoryMax, "memory_max"),
];

/// Each threshold's `gpu_info` label.
const INFO_LABELS: [(&str, &str); 4] = [
    ("shutdown", "shutdown_celsius"),
    ("slowdown", "slowdown_celsius"),
    ("gpu_max", "gpu_max_celsius"),
    ("memory_max", "memory_max_celsius"),
];

/// Thresholds that are also a series: the alerts compare temperatures
/// with them, which PromQL cannot do with a label.
const SERIES: [&str; 2] = ["slowdown", "memory_max"];

impl<'n> Collector<'n> for Thermal {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut temp = Family::of(&TEMP);
        let mut mem_temp = Family::of(&MEMORY_TEMP);
        let mut thresholds = Family::of(&THRESHOLD);
        let mut fan = Family::of(&FAN);
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            if !self.fixed.contains_key(&*gpu.id.uuid)
                && let Some(f) = read_fixed(cx, i, d)
            {
                self.fixed.insert(gpu.id.uuid.to_string(), f);
            }
            if let Some(t) = cx.reader.read(
                i,
                "nvmlDeviceGetTemperature",
                d.temperature(TemperatureSensor::Gpu),
            ) {
                temp.push(gpu.subject(), vec![], f64::from(t));
            }
            let fields = cx.reader.read(
                i,
                "nvmlDeviceGetFieldValues",
                raw::scoped_field_values(cx.nvml, d, &[(NVML_FI_DEV_MEMORY_TEMP, 0)]),
            );
            for value in fields.into_iter().flatten() {
                if let Some(c) = cx
                    .reader
                    .read(i, "nvmlDeviceGetFieldValues(MEMORY_TEMP)", value)
                {
                    mem_temp.push(gpu.subject(), vec![], c);
                }
            }
            let Some(f) = self.fixed.get(&*gpu.id.uuid) else {
                continue;
            };
            let mut info = Vec::new();
            for (label, t) in &f.thresholds {
                if SERIES.contains(label) {
                    thresholds.push(gpu.subject(), vec![("threshold", label.to_string())], *t);
                }
                if let Some((_, key)) = INFO_LABELS.iter().find(|(l, _)| l == label) {
                    info.push((*key, t.to_string()));
                }
            }
            info::annotate(out, gpu, &info);
            // The first fan, as nvidia-smi's fan.speed reports it.
            if f.fans > 0
                && let Some(s) = cx
                    .reader
                    .read(i, "nvmlDeviceGetFanSpeed_v2", d.fan_speed(0))
            {
                fan.push(gpu.subject(), vec![], pct(s));
            }
        }
        out.families.extend([temp, mem_temp, thresholds, fan]);
    }
}
