//! NVLink traffic and error counters, links up and down, and the GPU's
//! NVSwitch fabric state. Traffic is summed over the active links unless
//! `--nvlink-per-link` asks for one series per link: 18 links would
//! otherwise make NVLink a third of an H100 node's scrape.

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
};

use super::{Collector, Ctx, Gpu, Spec};
use crate::metrics::{Collected, Desc, Family};
use crate::nvml::raw;

pub struct NvLinks {
    pub per_link: bool,
}

pub const SPEC: Spec = Spec {
    name: "nvlink",
    families: &[&TX, &RX, &ERROR_COUNT, &LINKS, &FABRIC],
    build: |_, setup| {
        Box::new(NvLinks {
            per_link: setup.options.nvlink_per_link,
        })
    },
};

const TX: Desc = Desc::counter(
    "gpu_nvlink_transmit_bytes_total",
    "NVLink data bytes transmitted (per link with --nvlink-per-link, else summed over links).",
    "bytes",
    &["link"],
);
const RX: Desc = Desc::counter(
    "gpu_nvlink_receive_bytes_total",
    "NVLink data bytes received (per link with --nvlink-per-link, else summed over links).",
    "bytes",
    &["link"],
);
const ERROR_COUNT: Desc = Desc::counter(
    "gpu_nvlink_errors_total",
    "NVLink data-link errors by type (per link with --nvlink-per-link, else summed over links).",
    "",
    &["link", "type"],
);

const LINKS: Desc = Desc::gauge(
    "gpu_nvlink_links",
    "NVLink links of the GPU by state (active, inactive = down).",
    "",
    &["state"],
);
const FABRIC: Desc = Desc::gauge(
    "gpu_fabric_state",
    "1 for the GPU's NVSwitch fabric state (not_started, in_progress, completed, failed).",
    "",
    &["state"],
);

/// NVML_NVLINK_MAX_LINKS.
const MAX_LINKS: u32 = 18;

const ERRORS: [(ErrorCounter, &str); 4] = [
    (ErrorCounter::DlCrcFlit, "crc_flit"),
    (ErrorCounter::DlCrcData, "crc_data"),
    (ErrorCounter::DlReplay, "replay"),
    (ErrorCounter::DlRecovery, "recovery"),
];

impl<'n> Collector<'n> for NvLinks {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut tx = Family::of(&TX);
        let mut rx = Family::of(&RX);
        let mut errors = Family::of(&ERROR_COUNT);
        let mut states = Family::of(&LINKS);
        let mut fabric = Family::of(&FABRIC);
        let gpus = cx.gpus;
        for gpu in gpus {
            fabric_state(cx, gpu, &mut fabric);
            let Some(Links { active, inactive }) = links(cx, gpu) else {
                continue;
            };
            for (state, n) in [("active", active.len()), ("inactive", inactive)] {
                states.push(gpu.subject(), vec![("state", state.into())], n as f64);
            }
            if active.is_empty() {
                continue;
            }
            self.errors(cx, gpu, &active, &mut errors);
            self.traffic(cx, gpu, &active, [&mut tx, &mut rx]);
        }
        out.families.extend([tx, rx, errors, states, fabric]);
    }
}

/// The links of a GPU by state.
struct Links {
    active: Vec<u32>,
    inactive: usize,
}

/// The GPU's links; NVML answers INVALID_ARGUMENT past its last one. `None`
/// when not even the first link's state could be read (no NVLink, or a
/// failed read: no count is better than a wrong one).
fn links(cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>) -> Option<Links> {
    let mut found = Links {
        active: Vec::new(),
        inactive: 0,
    };
    for link in 0..MAX_LINKS {
        match gpu.device.link_wrapper_for(link).is_active() {
            Ok(true) => found.active.push(link),
            Ok(false) => found.inactive += 1,
            Err(NvmlError::InvalidArg) if link > 0 => break,
            Err(NvmlError::InvalidArg) => return None,
            Err(e) => {
                cx.reader.fail(gpu.id.index, "nvmlDeviceGetNvLinkState", &e);
                return None;
            }
        }
    }
    Some(found)
}

/// `gpu_fabric_state`: left out where the GPU has no fabric.
fn fabric_state(cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>, family: &mut Family) {
    let read = raw::fabric_info(cx.nvml, &gpu.device);
    let Some(info) = cx
        .reader
        .read(gpu.id.index, "nvmlDeviceGetGpuFabricInfo", read)
    else {
        return;
    };
    if let Some(state) = info.state_label() {
        family.push(gpu.subject(), vec![("state", state.into())], 1.0);
    }
}

impl NvLinks {
    /// Errors are summed over links (like DCGM's *_TOTAL fields) unless
    /// --nvlink-per-link: per-link error series are 72 per H100.
    fn errors(&self, cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>, links: &[u32], errors: &mut Family) {
        let mut totals = [None::<f64>; 4];
        for &link in links {
            let wrapper = gpu.device.link_wrapper_for(link);
            for (slot, (counter, label)) in ERRORS.iter().enumerate() {
                let read = wrapper.error_counter(*counter);
                let i = gpu.id.index;
                let Some(n) = cx.reader.read(i, "nvmlDeviceGetNvLinkErrorCounter", read) else {
                    continue;
                };
                if self.per_link {
                    let labels = vec![("link", link.to_string()), ("type", label.to_string())];
                    errors.push(gpu.subject(), labels, n as f64);
                } else {
                    *totals[slot].get_or_insert(0.0) += n as f64;
                }
            }
        }
        for (total, (_, label)) in totals.iter().zip(ERRORS) {
            if let Some(n) = total {
                errors.push(gpu.subject(), vec![("type", label.to_string())], *n);
            }
        }
    }

    /// Data bytes per link or summed, from one batched field-values call.
    fn traffic(
        &self,
        cx: &mut Ctx<'_, '_>,
        gpu: &Gpu<'_>,
        links: &[u32],
        [tx, rx]: [&mut Family; 2],
    ) {
        let i = gpu.id.index;
        let requests: Vec<(u32, u32)> = links
            .iter()
            .flat_map(|&l| {
                [
                    (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l),
                    (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l),
                ]
            })
            .collect();
        let Some(values) = cx.reader.read(
            i,
            "nvmlDeviceGetFieldValues",
            raw::scoped_field_values(cx.nvml, &gpu.device, &requests),
        ) else {
            return;
        };
        let (mut tx_sum, mut rx_sum) = (None::<f64>, None::<f64>);
        for ((field, link), value) in requests.iter().zip(values) {
            let bytes = match value {
                // The field counts KiB.
                Ok(kib) => kib * 1024.0,
                Err(e) => {
                    cx.reader
                        .fail(i, "nvmlDeviceGetFieldValues(NVLINK_THROUGHPUT)", &e);
                    continue;
                }
            };
            let is_tx = *field == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
            if self.per_link {
                let fam = if is_tx { &mut *tx } else { &mut *rx };
                fam.push(gpu.subject(), vec![("link", link.to_string())], bytes);
            } else {
                *(if is_tx { &mut tx_sum } else { &mut rx_sum }).get_or_insert(0.0) += bytes;
            }
        }
        if let Some(b) = tx_sum {
            tx.push(gpu.subject(), vec![], b);
        }
        if let Some(b) = rx_sum {
            rx.push(gpu.subject(), vec![], b);
        }
    }
}
