//! Temperatures, thresholds and fans.

use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_MEMORY_TEMP;

use super::{Collector, Ctx, pct};
use crate::metrics::{Collected, Family};

pub struct Thermal;

const THRESHOLDS: [(TemperatureThreshold, &str); 4] = [
    (TemperatureThreshold::Shutdown, "shutdown"),
    (TemperatureThreshold::Slowdown, "slowdown"),
    (TemperatureThreshold::GpuMax, "gpu_max"),
    (TemperatureThreshold::MemoryMax, "memory_max"),
];

pub(crate) fn sample_f64(s: &FieldValueSample) -> Option<f64> {
    match s.value.as_ref().ok()? {
        SampleValue::F64(v) => Some(*v),
        SampleValue::U32(v) => Some(f64::from(*v)),
        SampleValue::U64(v) => Some(*v as f64),
        SampleValue::I64(v) => Some(*v as f64),
    }
}

impl<'n> Collector<'n> for Thermal {
    fn name(&self) -> &'static str {
        "thermal"
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut temp = Family::gauge("gpu_temperature_celsius", "GPU die temperature.");
        let mut mem_temp =
            Family::gauge("gpu_memory_temperature_celsius", "HBM memory temperature.");
        let mut thresholds = Family::gauge(
            "gpu_temperature_threshold_celsius",
            "Temperature at which the GPU slows down, shuts down, or its maximum operating temperature.",
        );
        let mut fan = Family::gauge(
            "gpu_fan_speed_ratio",
            "Fan speed as a fraction of its maximum.",
        );
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
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
                d.field_values_for(&[FieldId(NVML_FI_DEV_MEMORY_TEMP)]),
            );
            if let Some(sample) = fields.and_then(|v| v.into_iter().next()) {
                match sample {
                    Ok(s) => match &s.value {
                        Ok(_) => {
                            if let Some(v) = sample_f64(&s) {
                                mem_temp.push(gpu.subject(), vec![], v);
                            }
                        }
                        Err(e) => cx
                            .reader
                            .fail(i, "nvmlDeviceGetFieldValues(MEMORY_TEMP)", e),
                    },
                    Err(e) => cx
                        .reader
                        .fail(i, "nvmlDeviceGetFieldValues(MEMORY_TEMP)", &e),
                }
            }
            for (which, label) in THRESHOLDS {
                if let Some(t) = cx.reader.read(
                    i,
                    "nvmlDeviceGetTemperatureThreshold",
                    d.temperature_threshold(which),
                ) {
                    thresholds.push(
                        gpu.subject(),
                        vec![("threshold", label.to_string())],
                        f64::from(t),
                    );
                }
            }
            if let Some(s) = cx
                .reader
                .read(i, "nvmlDeviceGetFanSpeed_v2", d.fan_speed(0))
            {
                fan.push(gpu.subject(), vec![], pct(s));
            }
        }
        out.families.extend([temp, mem_temp, thresholds, fan]);
    }
}
