//! PCIe throughput (when GPM does not provide it), the replay counter and
//! the link's generation and width against their maximum (a downgraded link).

use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;

use super::{Collector, Ctx, Gpu, Spec};
use crate::metrics::{Collected, Desc, Family};
use crate::nvml::Reader;

pub struct Pcie;

pub const SPEC: Spec = Spec {
    name: "pcie",
    families: &[&TX, &RX, &REPLAYS, &GEN, &MAX_GEN, &WIDTH, &MAX_WIDTH],
    build: |_, _| Box::new(Pcie),
};

/// Also fed by the GPM collector, on the GPUs it samples.
pub const TX: Desc = Desc::gauge(
    "gpu_pcie_transmit_bytes_per_second",
    "PCIe bytes transmitted per second by the GPU.",
    "bytes/s",
    &[],
);
pub const RX: Desc = Desc::gauge(
    "gpu_pcie_receive_bytes_per_second",
    "PCIe bytes received per second by the GPU.",
    "bytes/s",
    &[],
);
const REPLAYS: Desc = Desc::counter(
    "gpu_pcie_replays_total",
    "PCIe replays (link-level retransmissions).",
    "",
    &[],
);

const GEN: Desc = Desc::gauge(
    "gpu_pcie_link_generation",
    "Current PCIe link generation (many boards lower it while idle).",
    "",
    &[],
);
const MAX_GEN: Desc = Desc::gauge(
    "gpu_pcie_link_max_generation",
    "Highest PCIe link generation the GPU and its slot support.",
    "",
    &[],
);
const WIDTH: Desc = Desc::gauge(
    "gpu_pcie_link_width",
    "Current PCIe link width in lanes.",
    "",
    &[],
);
const MAX_WIDTH: Desc = Desc::gauge(
    "gpu_pcie_link_max_width",
    "Widest PCIe link the GPU and its slot support, in lanes.",
    "",
    &[],
);

impl<'n> Collector<'n> for Pcie {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut tx = Family::of(&TX);
        let mut rx = Family::of(&RX);
        let mut replays = Family::of(&REPLAYS);
        let mut link = [GEN, MAX_GEN, WIDTH, MAX_WIDTH].map(|d| Family::of(&d));
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            // GPM gives the same rates without the 20 ms sampling each call costs here.
            if !gpu.gpm {
                if let Some(kb) = cx.reader.read(
                    i,
                    "nvmlDeviceGetPcieThroughput",
                    d.pcie_throughput(PcieUtilCounter::Send),
                ) {
                    tx.push(gpu.subject(), vec![], f64::from(kb) * 1024.0);
                }
                if let Some(kb) = cx.reader.read(
                    i,
                    "nvmlDeviceGetPcieThroughput",
                    d.pcie_throughput(PcieUtilCounter::Receive),
                ) {
                    rx.push(gpu.subject(), vec![], f64::from(kb) * 1024.0);
                }
            }
            if let Some(n) =
                cx.reader
                    .read(i, "nvmlDeviceGetPcieReplayCounter", d.pcie_replay_counter())
            {
                replays.push(gpu.subject(), vec![], f64::from(n));
            }
            link_shape(cx.reader, gpu, &mut link);
        }
        let [g, mg, w, mw] = link;
        out.families.extend([tx, rx, replays, g, mg, w, mw]);
    }
}

/// Generation and width, current and maximum: each left out when NVML
/// cannot read it, so a comparison never sees a made-up value.
fn link_shape(reader: &mut Reader, gpu: &Gpu<'_>, [g, mg, w, mw]: &mut [Family; 4]) {
    let (i, d) = (gpu.id.index, &gpu.device);
    let reads = [
        (
            g,
            "nvmlDeviceGetCurrPcieLinkGeneration",
            d.current_pcie_link_gen(),
        ),
        (
            mg,
            "nvmlDeviceGetMaxPcieLinkGeneration",
            d.max_pcie_link_gen(),
        ),
        (
            w,
            "nvmlDeviceGetCurrPcieLinkWidth",
            d.current_pcie_link_width(),
        ),
        (mw, "nvmlDeviceGetMaxPcieLinkWidth", d.max_pcie_link_width()),
    ];
    for (family, function, read) in reads {
        if let Some(v) = reader.read(i, function, read) {
            family.push(gpu.subject(), vec![], f64::from(v));
        }
    }
}
