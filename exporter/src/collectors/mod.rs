//! One collector per concern, each behind [`Collector`] and described by a
//! [`Spec`] (its name, its families, how to build it), listed once in
//! [`REGISTRY`]. The collection loop times each one and isolates its failures.

mod clocks;
pub mod dcgm;
mod ecc;
pub mod fleet;
pub mod gpm;
pub mod info;
mod memory;
mod mig;
mod nvlink;
mod pcie;
mod power;
mod processes;
pub mod profile;
mod thermal;
mod utilization;
pub mod xid;

use std::sync::Arc;

use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::{Device, Nvml};

use crate::metrics::{Collected, Desc, DeviceRef, MigRef, Subject};
use crate::nvml::Reader;

/// A GPU that answered this cycle.
pub struct Gpu<'n> {
    pub device: Device<'n>,
    pub id: Arc<DeviceRef>,
    pub arch: Option<DeviceArchitecture>,
    /// The GPM collector samples this GPU this cycle (Hopper and later, with
    /// `gpm` enabled), so it also reports the GPU's PCIe rates.
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
}

/// Everything a collector may read.
pub struct Ctx<'a, 'n> {
    pub nvml: &'n Nvml,
    pub gpus: &'a [Gpu<'n>],
    pub migs: &'a [MigDev<'n>],
    pub reader: &'a mut Reader,
}

pub trait Collector<'n> {
    /// Called for every collector before any collects: starts what runs
    /// elsewhere while the cycle's NVML reads go on (the DCGM read).
    fn prepare(&mut self, _cx: &Ctx<'_, 'n>) {}
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected);
}

/// What the registry knows of a collector.
pub struct Spec {
    pub name: &'static str,
    /// Every family it can emit.
    pub families: &'static [&'static Desc],
    /// Builds it for one NVML session (GPM samples borrow the session).
    pub build: for<'n> fn(&'n Nvml, &Setup) -> Box<dyn Collector<'n> + 'n>,
}

/// Every collector, in run order (MIG before the ones that read `out.migs`).
pub const REGISTRY: &[Spec] = &[
    info::SPEC,
    utilization::SPEC,
    memory::SPEC,
    power::SPEC,
    thermal::SPEC,
    clocks::SPEC,
    pcie::SPEC,
    nvlink::SPEC,
    ecc::SPEC,
    mig::SPEC,
    gpm::SPEC,
    dcgm::SPEC,
    processes::SPEC,
    xid::SPEC,
];

/// Every collector's name, in run order.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|s| s.name)
}

/// Whether the collector of `spec` is among `enabled`.
pub fn is_enabled(enabled: &[String], spec: &Spec) -> bool {
    enabled.iter().any(|e| e == spec.name)
}

/// Settings that change what a collector emits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// One NVLink traffic series per link instead of per GPU.
    pub nvlink_per_link: bool,
    /// Which of the collected series are served.
    pub profile: profile::Profile,
}

/// What collectors are built from.
#[derive(Clone, Default)]
pub struct Setup {
    pub options: Options,
    /// Filled by the XID event thread, read by the `xid` collector.
    pub xids: xid::XidLog,
    /// The DCGM reader, read by the `dcgm` collector (`--dcgm-hostengine`).
    pub dcgm: Option<crate::dcgm::Reader>,
}

/// A built collector and its registry entry.
pub struct Running<'n> {
    pub spec: &'static Spec,
    pub collector: Box<dyn Collector<'n> + 'n>,
}

/// Builds the enabled collectors for one NVML session, in registry order.
pub fn build<'n>(nvml: &'n Nvml, enabled: &[String], setup: &Setup) -> Vec<Running<'n>> {
    REGISTRY
        .iter()
        .filter(|spec| is_enabled(enabled, spec))
        .map(|spec| {
            let collector = (spec.build)(nvml, setup);
            let profile = setup.options.profile;
            Running {
                spec,
                collector: if profile == profile::Profile::Full {
                    collector
                } else {
                    Box::new(Trimmed {
                        inner: collector,
                        profile,
                    })
                },
            }
        })
        .collect()
}

/// A collector whose families are trimmed to a profile as they are built,
/// before the pod join and the encoder see them.
struct Trimmed<'n> {
    inner: Box<dyn Collector<'n> + 'n>,
    profile: profile::Profile,
}

impl<'n> Collector<'n> for Trimmed<'n> {
    fn prepare(&mut self, cx: &Ctx<'_, 'n>) {
        self.inner.prepare(cx);
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let from = out.families.len();
        self.inner.collect(cx, out);
        for family in &mut out.families[from..] {
            self.profile.trim(family);
        }
        self.profile.trim_together(&mut out.families[from..]);
    }
}

pub(crate) fn pct(v: u32) -> f64 {
    f64::from(v) / 100.0
}
