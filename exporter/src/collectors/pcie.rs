//! PCIe throughput (when GPM does not provide it) and the replay counter.

use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;

use super::{Collector, Ctx, Spec};
use crate::metrics::{Collected, Desc, Family};

pub struct Pcie;

pub const SPEC: Spec = Spec {
    name: "pcie",
    families: &[&TX, &RX, &REPLAYS],
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

impl<'n> Collector<'n> for Pcie {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut tx = Family::of(&TX);
        let mut rx = Family::of(&RX);
        let mut replays = Family::of(&REPLAYS);
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
        }
        out.families.extend([tx, rx, replays]);
    }
}
