//! Power draw, the enforced and default limits and the energy counter.

use super::{Collector, Ctx, Spec};
use crate::metrics::{Collected, Desc, Family};

pub struct Power;

pub const SPEC: Spec = Spec {
    name: "power",
    families: &[&USAGE, &LIMIT, &DEFAULT_LIMIT, &ENERGY],
    build: |_, _| Box::new(Power),
};

const USAGE: Desc = Desc::gauge(
    "gpu_power_usage_watts",
    "Power drawn by the GPU board.",
    "watts",
    &[],
);
const LIMIT: Desc = Desc::gauge(
    "gpu_power_limit_watts",
    "Power limit the driver enforces.",
    "watts",
    &[],
);
/// The board's default limit: a GPU held at a cap below it was lowered on
/// purpose (nvidia-smi -pl, a power policy), which is what the power-cap
/// alert compares with.
const DEFAULT_LIMIT: Desc = Desc::gauge(
    "gpu_power_limit_default_watts",
    "Default power limit of the GPU board.",
    "watts",
    &[],
);
const ENERGY: Desc = Desc::counter(
    "gpu_energy_consumed_joules_total",
    "Energy consumed by the GPU since the driver was loaded.",
    "joules",
    &[],
);

impl<'n> Collector<'n> for Power {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut usage = Family::of(&USAGE);
        let mut limit = Family::of(&LIMIT);
        let mut default_limit = Family::of(&DEFAULT_LIMIT);
        let mut energy = Family::of(&ENERGY);
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            if let Some(mw) = cx
                .reader
                .read(i, "nvmlDeviceGetPowerUsage", d.power_usage())
            {
                usage.push(gpu.subject(), vec![], f64::from(mw) / 1000.0);
            }
            if let Some(mw) = cx.reader.read(
                i,
                "nvmlDeviceGetEnforcedPowerLimit",
                d.enforced_power_limit(),
            ) {
                limit.push(gpu.subject(), vec![], f64::from(mw) / 1000.0);
            }
            if let Some(mw) = cx.reader.read(
                i,
                "nvmlDeviceGetPowerManagementDefaultLimit",
                d.power_management_limit_default(),
            ) {
                default_limit.push(gpu.subject(), vec![], f64::from(mw) / 1000.0);
            }
            if let Some(mj) = cx.reader.read(
                i,
                "nvmlDeviceGetTotalEnergyConsumption",
                d.total_energy_consumption(),
            ) {
                energy.push(gpu.subject(), vec![], mj as f64 / 1000.0);
            }
        }
        out.families.extend([usage, limit, default_limit, energy]);
    }
}
