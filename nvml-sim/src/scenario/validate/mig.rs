//! Checks of a GPU's MIG instances and of the MIG placement of its processes.

use std::collections::HashSet;

use super::{Problems, Seen, is_uuid, shown};
use crate::scenario::error::FieldPath;
use crate::scenario::limits::MAX_MIG_PER_GPU;
use crate::scenario::{Gpu, MigInstance, Process};

/// The GPU's MIG instances: architecture, count, identity, memory, load.
pub(super) fn check<'a>(g: &'a Gpu, p: &FieldPath, seen: &mut Seen<'a>, out: &mut Problems) {
    if g.mig_enabled() && !g.architecture.has_mig() {
        out.add(
            p.clone().key("mig"),
            format!(
                "{} GPUs have no MIG",
                format!("{:?}", g.architecture).to_lowercase()
            ),
        );
    }
    if g.mig.len() > MAX_MIG_PER_GPU {
        out.add(
            p.clone().key("mig"),
            format!("at most {MAX_MIG_PER_GPU} MIG instances per GPU"),
        );
    }
    let mut gis = HashSet::new();
    for (j, m) in g.mig.iter().enumerate() {
        let mp = p.clone().key("mig").index(j);
        instance(m, &mp, seen, out);
        if !gis.insert(m.gpu_instance_id) {
            out.add(
                mp.key("gpu_instance_id"),
                format!("duplicate gpu_instance_id {}", m.gpu_instance_id),
            );
        }
    }
    let mig_mem: u64 = g.mig.iter().map(|m| m.memory_mib).sum();
    if mig_mem > g.memory_mib {
        out.add(
            p.clone().key("mig"),
            format!(
                "MIG instances hold {mig_mem} MiB, more than memory_mib {}",
                g.memory_mib
            ),
        );
    }
}

fn instance<'a>(m: &'a MigInstance, mp: &FieldPath, seen: &mut Seen<'a>, out: &mut Problems) {
    let at = |k: &str| mp.clone().key(k);
    if is_uuid(&m.uuid, "MIG-") {
        seen.uuid(&m.uuid, at("uuid"), out);
    } else {
        out.add(
            at("uuid"),
            format!(
                "expected \"MIG-\" followed by a hex UUID, got {}",
                shown(&m.uuid)
            ),
        );
    }
    if m.profile.is_empty() || m.profile.len() > 40 {
        out.add(at("profile"), "must be 1 to 40 characters, e.g. 3g.40gb");
    }
    if m.memory_mib == 0 {
        out.add(at("memory_mib"), "must be > 0");
    }
    let lp = |k: &str| at("load").key(k);
    if let Some(c) = &m.load.memory_used_mib {
        let what = "memory_used_mib (at most the instance's memory_mib)";
        out.curve(c, lp("memory_used_mib"), 0.0, m.memory_mib as f64, what);
    }
    out.pct(&m.load.sm_active, lp("sm_active"));
    out.pct(&m.load.sm_occupancy, lp("sm_occupancy"));
    out.pct(&m.load.tensor_active, lp("tensor_active"));
    out.pct(&m.load.dram_active, lp("dram_active"));
}

/// A process names a MIG instance of its GPU exactly when the GPU is in MIG
/// mode, and fits in that instance's memory.
pub(super) fn check_process(g: &Gpu, pr: &Process, pp: FieldPath, out: &mut Problems) {
    match &pr.mig {
        Some(m) => match g.mig.iter().find(|x| &x.uuid == m) {
            None => out.add(
                pp.key("mig"),
                format!("no MIG instance {} on this GPU", shown(m)),
            ),
            Some(inst) if pr.memory_mib > inst.memory_mib => out.add(
                pp.key("memory_mib"),
                "more than the MIG instance's memory_mib",
            ),
            Some(_) => {}
        },
        None if g.mig_enabled() => out.add(
            pp.key("mig"),
            "the GPU is in MIG mode: name the MIG instance the process runs in",
        ),
        None => {}
    }
}
