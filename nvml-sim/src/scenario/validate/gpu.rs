//! Checks of one GPU: identity, hardware, load curves, events, processes.

use std::collections::HashSet;

use super::{Problems, Seen, is_uuid, mig, parse_pci_bus_id, root, shown};
use crate::scenario::error::FieldPath;
use crate::scenario::limits::MAX_TEXT;
use crate::scenario::{Gpu, Load, MaxClocks};

/// Every check of GPU `i`.
pub(super) fn check<'a>(i: usize, g: &'a Gpu, seen: &mut Seen<'a>, out: &mut Problems) {
    let p = root().key("gpus").index(i);
    identity(i, g, &p, seen, out);
    hardware(g, &p, out);
    load(g, &p, out);
    events(g, &p, out);
    mig::check(g, &p, seen, out);
    processes(g, &p, out);
}

fn identity<'a>(i: usize, g: &'a Gpu, p: &FieldPath, seen: &mut Seen<'a>, out: &mut Problems) {
    if g.model.is_empty() || g.model.len() >= 96 {
        out.add(p.clone().key("model"), "must be 1 to 95 characters");
    }
    if is_uuid(&g.uuid, "GPU-") {
        seen.uuid(&g.uuid, p.clone().key("uuid"), out);
    } else {
        out.add(
            p.clone().key("uuid"),
            format!(
                "expected \"GPU-\" followed by a hex UUID, got {}",
                shown(&g.uuid)
            ),
        );
    }
    match parse_pci_bus_id(&g.pci_bus_id) {
        None => out.add(
            p.clone().key("pci_bus_id"),
            format!(
                "expected \"DDDDDDDD:BB:DD.F\" (hex), got {}",
                shown(&g.pci_bus_id)
            ),
        ),
        Some(bdf) => {
            if let Some(prev) = seen.buses.insert(bdf, i) {
                out.add(
                    p.clone().key("pci_bus_id"),
                    format!(
                        "duplicate PCI bus id {:?} (also gpus[{prev}])",
                        g.pci_bus_id
                    ),
                );
            }
        }
    }
    if let Some(serial) = &g.serial
        && (serial.is_empty() || serial.len() >= 30)
    {
        out.add(p.clone().key("serial"), "must be 1 to 29 characters");
    }
    if g.vbios_version.is_empty() || g.vbios_version.len() >= 32 {
        out.add(p.clone().key("vbios_version"), "must be 1 to 31 characters");
    }
}

fn hardware(g: &Gpu, p: &FieldPath, out: &mut Problems) {
    let at = |k: &str| p.clone().key(k);
    if g.memory_mib == 0 {
        out.add(at("memory_mib"), "must be > 0");
    }
    if g.reserved_mib >= g.memory_mib {
        out.add(at("reserved_mib"), "must be less than memory_mib");
    }
    if !(g.power_limit_watts.is_finite() && g.power_limit_watts > 0.0) {
        out.add(at("power_limit_watts"), "must be > 0");
    }
    if g.power_limit_default_watts
        .is_some_and(|w| !(w.is_finite() && w > 0.0))
    {
        out.add(at("power_limit_default_watts"), "must be > 0");
    }
    let mc = &g.max_clocks_mhz;
    if mc.graphics == 0 || mc.sm == 0 || mc.memory == 0 || mc.video == 0 {
        out.add(at("max_clocks_mhz"), "every clock must be > 0");
    }
    if !(1..=6).contains(&g.pcie.generation) {
        out.add(at("pcie").key("generation"), "must be 1..=6");
    }
    if ![1, 2, 4, 8, 16, 32].contains(&g.pcie.width) {
        out.add(at("pcie").key("width"), "must be 1, 2, 4, 8, 16 or 32");
    }
    // A maximum that is given (it defaults to the current value).
    if let Some(m) = g.pcie.max_generation
        && (!(1..=6).contains(&m) || m < g.pcie.generation)
    {
        out.add(
            at("pcie").key("max_generation"),
            "must be 1..=6 and at least generation",
        );
    }
    if let Some(m) = g.pcie.max_width
        && (![1, 2, 4, 8, 16, 32].contains(&m) || m < g.pcie.width)
    {
        out.add(
            at("pcie").key("max_width"),
            "must be 1, 2, 4, 8, 16 or 32 and at least width",
        );
    }
    if g.nvlinks > 18 {
        out.add(
            at("nvlinks"),
            "at most 18 NVLink links (NVML_NVLINK_MAX_LINKS)",
        );
    }
    if !(g.energy_offset_joules.is_finite() && g.energy_offset_joules >= 0.0) {
        out.add(at("energy_offset_joules"), "must be >= 0");
    }
    if let Some(t) = g.lost_at_s {
        out.time(t, at("lost_at_s"));
    }
}

fn load(g: &Gpu, p: &FieldPath, out: &mut Problems) {
    let l = &g.load;
    let lp = |k: &str| p.clone().key("load").key(k);
    if let Some(c) = &l.memory_used_mib {
        let max = g.memory_mib.saturating_sub(g.reserved_mib) as f64;
        let what = "memory_used_mib (at most memory_mib - reserved_mib)";
        out.curve(c, lp("memory_used_mib"), 0.0, max, what);
    }
    for (k, c) in [
        ("temperature_celsius", &l.temperature_celsius),
        ("memory_temperature_celsius", &l.memory_temperature_celsius),
    ] {
        out.curve(c, lp(k), 0.0, 200.0, "a temperature");
    }
    clocks(l, &g.max_clocks_mhz, p, out);
    out.curve(&l.pstate, lp("pstate"), 0.0, 15.0, "a performance state");
    for (k, c) in [
        ("utilization", &l.utilization),
        ("memory_utilization", &l.memory_utilization),
        ("fan_speed", &l.fan_speed),
        ("encoder_utilization", &l.encoder_utilization),
        ("decoder_utilization", &l.decoder_utilization),
        ("sm_active", &l.sm_active),
        ("sm_occupancy", &l.sm_occupancy),
        ("tensor_active", &l.tensor_active),
        ("dram_active", &l.dram_active),
    ] {
        out.pct(c, lp(k));
    }
    for (k, c) in [
        ("power_watts", &l.power_watts),
        ("pcie_tx_bytes_per_second", &l.pcie_tx_bytes_per_second),
        ("pcie_rx_bytes_per_second", &l.pcie_rx_bytes_per_second),
        ("nvlink_tx_bytes_per_second", &l.nvlink_tx_bytes_per_second),
        ("nvlink_rx_bytes_per_second", &l.nvlink_rx_bytes_per_second),
    ] {
        out.nonneg(c, lp(k));
    }
}

/// Clock curves stay at or below their max clock.
fn clocks(l: &Load, mc: &MaxClocks, p: &FieldPath, out: &mut Problems) {
    for (k, c, max) in [
        ("graphics_clock_mhz", &l.graphics_clock_mhz, mc.graphics),
        ("sm_clock_mhz", &l.sm_clock_mhz, mc.sm),
        ("memory_clock_mhz", &l.memory_clock_mhz, mc.memory),
        ("video_clock_mhz", &l.video_clock_mhz, mc.video),
    ] {
        if let Some(c) = c {
            let at = p.clone().key("load").key(k);
            out.curve(c, at, 0.0, max as f64, "a clock (at most the max clock)");
        }
    }
}

/// Throttle intervals, XIDs, ECC and NVLink errors.
fn events(g: &Gpu, p: &FieldPath, out: &mut Problems) {
    for (j, iv) in g.throttle.iter().enumerate() {
        let tp = p.clone().key("throttle").index(j);
        out.time(iv.from_s, tp.clone().key("from_s"));
        if let Some(to) = iv.to_s {
            out.time(to, tp.clone().key("to_s"));
            if to < iv.from_s {
                out.add(tp.key("to_s"), "must not be before from_s");
            }
        }
    }
    for (j, x) in g.xids.iter().enumerate() {
        let xp = p.clone().key("xids").index(j);
        out.time(x.at_s, xp.clone().key("at_s"));
        if x.xid == 0 {
            out.add(xp.key("xid"), "must be > 0");
        }
    }
    for (j, e) in g.ecc_errors.iter().enumerate() {
        let ep = p.clone().key("ecc_errors").index(j);
        out.time(e.at_s, ep.clone().key("at_s"));
        if !g.ecc {
            out.add(ep, "ECC errors on a GPU with `ecc: false`");
        }
    }
    links_down(g, p, out);
    for (j, s) in g.fabric.iter().enumerate() {
        let sp = p.clone().key("fabric").index(j);
        out.time(s.at_s, sp.clone().key("at_s"));
        if j > 0 && s.at_s <= g.fabric[j - 1].at_s {
            out.add(sp.key("at_s"), "must be after the previous step");
        }
    }
    for (j, e) in g.nvlink_errors.iter().enumerate() {
        let ep = p.clone().key("nvlink_errors").index(j);
        out.time(e.at_s, ep.clone().key("at_s"));
        if e.link >= g.nvlinks {
            out.add(
                ep.key("link"),
                format!("link {} does not exist (nvlinks: {})", e.link, g.nvlinks),
            );
        }
    }
}

fn links_down(g: &Gpu, p: &FieldPath, out: &mut Problems) {
    for (j, d) in g.nvlink_down.iter().enumerate() {
        let dp = p.clone().key("nvlink_down").index(j);
        out.time(d.from_s, dp.clone().key("from_s"));
        if let Some(to) = d.to_s {
            out.time(to, dp.clone().key("to_s"));
            if to < d.from_s {
                out.add(dp.clone().key("to_s"), "must not be before from_s");
            }
        }
        if d.link >= g.nvlinks {
            out.add(
                dp.key("link"),
                format!("link {} does not exist (nvlinks: {})", d.link, g.nvlinks),
            );
        }
    }
}

/// Processes: unique pids, utilizations, memory within the GPU or the MIG
/// instance they run in.
fn processes(g: &Gpu, p: &FieldPath, out: &mut Problems) {
    let mut pids = HashSet::new();
    for (j, pr) in g.processes.iter().enumerate() {
        let pp = |k: &str| p.clone().key("processes").index(j).key(k);
        if pr.pid == 0 {
            out.add(pp("pid"), "must be > 0");
        } else if !pids.insert(pr.pid) {
            out.add(pp("pid"), format!("duplicate pid {} on this GPU", pr.pid));
        }
        out.text(&pr.name, pp("name"), MAX_TEXT);
        out.pct(&pr.sm_utilization, pp("sm_utilization"));
        out.pct(&pr.memory_utilization, pp("memory_utilization"));
        mig::check_process(g, pr, p.clone().key("processes").index(j), out);
        if pr.memory_mib > g.memory_mib {
            out.add(pp("memory_mib"), "more than the GPU's memory_mib");
        }
    }
}
