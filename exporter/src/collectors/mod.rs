//! One collector per concern, each behind [`Collector`], listed once in
//! [`all`]. The collection loop times each one and isolates its failures.

mod clocks;
mod ecc;
mod gpm;
mod info;
mod memory;
mod mig;
mod nvlink;
mod pcie;
mod power;
mod processes;
mod thermal;
mod utilization;
pub mod xid;

use std::sync::Arc;

use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::{Device, Nvml};

use crate::metrics::{Collected, DeviceRef, MigRef, Subject};
use crate::nvml::Reader;

/// A GPU that answered this cycle.
pub struct Gpu<'n> {
    pub device: Device<'n>,
    pub id: Arc<DeviceRef>,
    pub arch: Option<DeviceArchitecture>,
    /// GPM (SM/tensor/DRAM activity without DCGM; Hopper and later).
    pub gpm: bool,
}

impl Gpu<'_> {
    pub fn subject(&self) -> Subject {
        Subject::Device(self.id.clone())
    }
}

/// A MIG instance found on an answering GPU this cycle.
pub struct MigDev<'n> {
    pub device: Device<'n>,
    pub id: Arc<MigRef>,
    pub compute_instance_id: Option<u32>,
    pub profile: String,
}

/// Everything a collector may read.
pub struct Ctx<'a, 'n> {
    pub nvml: &'n Nvml,
    pub gpus: &'a [Gpu<'n>],
    pub migs: &'a [MigDev<'n>],
    pub reader: &'a mut Reader,
}

pub trait Collector<'n> {
    fn name(&self) -> &'static str;
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected);
}

/// Every collector's name, in run order (MIG before the ones that read `out.migs`).
pub const NAMES: &[&str] = &[
    "info",
    "utilization",
    "memory",
    "power",
    "thermal",
    "clocks",
    "pcie",
    "nvlink",
    "ecc",
    "mig",
    "gpm",
    "processes",
    "xid",
];

/// Settings that change what a collector emits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// One NVLink traffic series per link instead of per GPU.
    pub nvlink_per_link: bool,
}

/// Builds the enabled collectors for one NVML session.
pub fn all<'n>(
    enabled: &[String],
    options: Options,
    xids: xid::XidLog,
) -> Vec<Box<dyn Collector<'n> + 'n>> {
    let mut list: Vec<Box<dyn Collector<'n> + 'n>> = Vec::new();
    for name in NAMES {
        if !enabled.iter().any(|e| e == name) {
            continue;
        }
        list.push(match *name {
            "info" => Box::new(info::Info::default()),
            "utilization" => Box::new(utilization::Utilization),
            "memory" => Box::new(memory::Memory),
            "power" => Box::new(power::Power),
            "thermal" => Box::new(thermal::Thermal::default()),
            "clocks" => Box::new(clocks::Clocks::default()),
            "pcie" => Box::new(pcie::Pcie {
                gpm_enabled: enabled.iter().any(|e| e == "gpm"),
            }),
            "nvlink" => Box::new(nvlink::NvLinks {
                per_link: options.nvlink_per_link,
            }),
            "ecc" => Box::new(ecc::Ecc),
            "mig" => Box::new(mig::Mig),
            "gpm" => Box::new(gpm::Gpm::new()),
            "processes" => Box::new(processes::Processes::new()),
            _ => Box::new(xid::Xid::new(xids.clone())),
        });
    }
    list
}

pub(crate) fn pct(v: u32) -> f64 {
    f64::from(v) / 100.0
}
