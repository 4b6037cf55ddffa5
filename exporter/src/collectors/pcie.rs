//! PCIe throughput (when GPM does not provide it) and the replay counter.

use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;

use super::{Collector, Ctx};
use crate::metrics::{Collected, Family};

pub struct Pcie {
    /// Whether the GPM collector runs and so reports PCIe rates on GPUs with GPM.
    pub gpm_enabled: bool,
}

pub const TX: &str = "gpu_pcie_transmit_bytes_per_second";
pub const RX: &str = "gpu_pcie_receive_bytes_per_second";
pub const TX_HELP: &str = "PCIe bytes transmitted per second by the GPU.";
pub const RX_HELP: &str = "PCIe bytes received per second by the GPU.";

impl<'n> Collector<'n> for Pcie {
    fn name(&self) -> &'static str {
        "pcie"
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut tx = Family::gauge(TX, TX_HELP);
        let mut rx = Family::gauge(RX, RX_HELP);
        let mut replays = Family::counter(
            "gpu_pcie_replays_total",
            "PCIe replays (link-level retransmissions).",
        );
        for gpu in cx.gpus {
            let (i, d) = (gpu.id.index, &gpu.device);
            // GPM gives the same rates without the 20 ms sampling each call costs here.
            if !(self.gpm_enabled && gpu.gpm) {
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
