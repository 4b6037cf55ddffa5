//! The plain-text snapshot (`--once`, and the screen of the refresh loop):
//! no escape codes; an unknown value is `-`.

use std::fmt::Write;

use crate::model::{Gpu, Holder, Mig, Snapshot, Workload};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

pub fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

pub fn gib(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}", x / GIB))
}

fn num(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".into(), |x| format!("{x:.0}{unit}"))
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// The whole snapshot as text.
pub fn text(s: &Snapshot) -> String {
    let mut out = String::new();
    let holders: usize = s
        .gpus
        .iter()
        .map(|g| g.holders.len() + g.mig.iter().map(|m| m.holders.len()).sum::<usize>())
        .sum();
    let _ = writeln!(
        out,
        "gpuscale-top  {}  {} GPUs  {holders} holders",
        s.source,
        s.gpus.len()
    );
    let _ = writeln!(
        out,
        "{:<4} {:<12} {:<22} {:>5} {:>4} {:>6} {:>4} {:<4} {:>13} {:>10} {:>5}  THROTTLE  ALARMS",
        "GPU",
        "NODE",
        "MODEL",
        "UTIL",
        "SM",
        "TENSOR",
        "DRAM",
        "SRC",
        "VRAM GiB",
        "POWER W",
        "TEMP"
    );
    for g in &s.gpus {
        gpu(&mut out, g);
    }
    let _ = writeln!(out, "\nWORKLOADS");
    let _ = writeln!(
        out,
        "{:<40} {:<12} {:>4} {:>7} {:>8} {:<16} {:>9} {:>9} {:<6}",
        "NAMESPACE/WORKLOAD",
        "KIND",
        "PODS",
        "DEVICES",
        "ACTIVITY",
        "BOTTLENECK",
        "USD/H",
        "USD/MTOK",
        "STATE"
    );
    for w in &s.workloads {
        workload(&mut out, w);
    }
    if !s.missing.is_empty() {
        let _ = writeln!(out, "\nmissing: {}", s.missing.join(", "));
    }
    out
}

fn gpu(out: &mut String, g: &Gpu) {
    let model = g
        .model
        .as_deref()
        .unwrap_or("-")
        .trim_start_matches("NVIDIA ");
    let vram = format!("{}/{}", gib(g.memory_used_bytes), gib(g.memory_total_bytes));
    let power = format!(
        "{}/{}",
        num(g.power_watts, ""),
        num(g.power_limit_watts, "")
    );
    let mut alarms = Vec::new();
    if let Some(e) = g.ecc_uncorrected.filter(|e| *e > 0.0) {
        alarms.push(format!("ECC uncorrected {e:.0}"));
    }
    if !g.xid.is_empty() {
        alarms.push(format!("XID {}", g.xid.join(",")));
    }
    let _ = writeln!(
        out,
        "{:<4} {:<12} {:<22} {:>5} {:>4} {:>6} {:>4} {:<4} {:>13} {:>10} {:>5}  {:<8}  {}",
        g.gpu,
        g.node,
        model,
        pct(g.utilization),
        pct(g.sm_active),
        pct(g.tensor_active),
        pct(g.dram_active),
        g.activity_source.as_deref().unwrap_or("-"),
        vram,
        power,
        num(g.temperature_celsius, "C"),
        list(&g.throttle),
        list(&alarms),
    );
    holders(out, "  ", &g.holders);
    for m in &g.mig {
        mig(out, m);
    }
}

fn mig(out: &mut String, m: &Mig) {
    let _ = writeln!(
        out,
        "  MIG {:<3} {:<9} {}  SM {}  VRAM GiB {}/{}",
        m.gpu_instance_id.as_deref().unwrap_or("-"),
        m.profile.as_deref().unwrap_or("-"),
        m.mig_uuid,
        pct(m.sm_active),
        gib(m.memory_used_bytes),
        gib(m.memory_total_bytes),
    );
    holders(out, "    ", &m.holders);
}

fn holders(out: &mut String, indent: &str, hs: &[Holder]) {
    for h in hs {
        let share = h
            .memory_share
            .map(|s| format!("  share {}", pct(Some(s))))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{indent}└ {}/{} ({})  VRAM GiB {}  SM {}{share}",
            h.namespace,
            h.pod,
            h.container.as_deref().unwrap_or("-"),
            gib(h.memory_used_bytes),
            pct(h.sm_utilization),
        );
    }
}

/// Dollars with two decimals, `-` when unknown.
pub fn usd(v: Option<f64>) -> String {
    v.map_or("-".into(), |c| format!("{c:.2}"))
}

fn workload(out: &mut String, w: &Workload) {
    let _ = writeln!(
        out,
        "{:<40} {:<12} {:>4} {:>7} {:>8} {:<16} {:>9} {:>9} {:<6}",
        format!("{}/{}", w.namespace, w.workload),
        w.kind.as_deref().unwrap_or("-"),
        w.pods,
        w.devices,
        pct(w.activity),
        w.bottleneck.as_deref().unwrap_or("-"),
        usd(w.cost_usd_per_hour),
        usd(w.cost_usd_per_million_tokens),
        w.state.as_deref().unwrap_or("-"),
    );
}
