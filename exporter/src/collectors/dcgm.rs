//! The `dcgm` collector: asks the DCGM reader for a read of the GPUs and
//! MIG instances without GPM as the cycle starts, serves that read under
//! the GPM collector's families, and says where each GPU's activity comes
//! from. Makes no DCGM call itself.

use std::sync::Arc;

use super::gpm;
use super::{Collector, Ctx, Spec};
use crate::dcgm::{Activity, Key, Pending, Reader, View, Wanted};
use crate::metrics::{Collected, Desc, Family, Subject};

pub const SPEC: Spec = Spec {
    name: "dcgm",
    families: &[
        &gpm::GRAPHICS,
        &gpm::SM,
        &gpm::OCCUPANCY,
        &gpm::TENSOR,
        &gpm::DRAM,
        &gpm::MIG_SM,
        &gpm::MIG_OCCUPANCY,
        &gpm::MIG_TENSOR,
        &gpm::MIG_DRAM,
        &SOURCE,
        &UP,
        &LEFT_OUT,
    ],
    build: |_, setup| {
        Box::new(Dcgm {
            reader: setup.dcgm.clone(),
            pending: None,
        })
    },
};

pub const SOURCE: Desc = Desc::gauge(
    "gpu_activity_source_info",
    "Where the GPU's SM, tensor and DRAM activity comes from: gpm (NVML GPM), dcgm (the DCGM host engine) or none; always 1.",
    "",
    &["source"],
);
pub const UP: Desc = Desc::gauge(
    "gpuscale_exporter_dcgm_up",
    "1 while the DCGM reader reads from the host engine; 0 with the reason it does not (--dcgm-hostengine set only).",
    "",
    &["reason"],
);
pub const LEFT_OUT: Desc = Desc::gauge(
    "gpuscale_exporter_dcgm_fields_left_out",
    "GPUs for which DCGM does not watch a profiling field, by field and reason (multi_pass, not_supported, refused).",
    "",
    &["field", "reason"],
);

pub struct Dcgm {
    reader: Option<Reader>,
    /// The read this cycle asked for in `prepare`.
    pending: Option<Pending>,
}

/// The GPU families in the order of `super::FIELDS`.
const GPU: [&Desc; 5] = [
    &gpm::GRAPHICS,
    &gpm::SM,
    &gpm::OCCUPANCY,
    &gpm::TENSOR,
    &gpm::DRAM,
];
/// The MIG families: no graphics engine family per instance.
const MIG: [Option<&Desc>; 5] = [
    None,
    Some(&gpm::MIG_SM),
    Some(&gpm::MIG_OCCUPANCY),
    Some(&gpm::MIG_TENSOR),
    Some(&gpm::MIG_DRAM),
];

impl<'n> Collector<'n> for Dcgm {
    fn prepare(&mut self, cx: &Ctx<'_, 'n>) {
        self.pending = self.reader.as_ref().map(|r| r.ask(wanted(cx)));
    }

    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let view = match (&self.reader, self.pending.take()) {
            (Some(r), Some(p)) => r.answer(p),
            (Some(r), None) => r.answer(r.ask(wanted(cx))),
            (None, _) => View::default(),
        };
        out.families.extend(activity(cx, &view));
        out.families.push(sources(cx, &view));
        if self.reader.is_some() {
            out.families.extend(own(&view));
        }
    }
}

/// The GPUs and MIG instances without GPM.
fn wanted(cx: &Ctx<'_, '_>) -> Wanted {
    let mut wanted = Wanted::default();
    for g in cx.gpus.iter().filter(|g| !g.gpm) {
        wanted.0.insert(Key::Gpu(g.id.uuid.clone()));
    }
    for m in cx.migs {
        let parent_gpm = cx.gpus.iter().any(|g| g.id == m.id.gpu && g.gpm);
        if !parent_gpm {
            wanted
                .0
                .insert(Key::Mig(m.id.gpu.uuid.clone(), m.id.gpu_instance_id));
        }
    }
    wanted
}

fn push(fam: &mut Family, subject: Subject, value: Option<f64>) {
    if let Some(v) = value {
        fam.push(subject, vec![], v);
    }
}

fn activity(cx: &Ctx<'_, '_>, view: &View) -> Vec<Family> {
    let mut gpu = GPU.map(Family::of);
    let mut mig: Vec<Option<Family>> = MIG.iter().map(|d| d.map(Family::of)).collect();
    for g in cx.gpus.iter().filter(|g| !g.gpm) {
        let Some(row) = view.values.get(&Key::Gpu(g.id.uuid.clone())) else {
            continue;
        };
        for (fam, v) in gpu.iter_mut().zip(row) {
            push(fam, g.subject(), *v);
        }
    }
    for m in cx.migs {
        let key = Key::Mig(m.id.gpu.uuid.clone(), m.id.gpu_instance_id);
        let Some(row) = view.values.get(&key) else {
            continue;
        };
        for (fam, v) in mig.iter_mut().zip(row) {
            if let Some(f) = fam {
                push(f, Subject::Mig(m.id.clone()), *v);
            }
        }
    }
    gpu.into_iter().chain(mig.into_iter().flatten()).collect()
}

fn any(row: Option<&Activity>) -> bool {
    row.is_some_and(|r| r.iter().any(Option::is_some))
}

fn sources(cx: &Ctx<'_, '_>, view: &View) -> Family {
    let mut fam = Family::of(&SOURCE);
    for g in cx.gpus {
        let uuid: &Arc<str> = &g.id.uuid;
        let from_dcgm = any(view.values.get(&Key::Gpu(uuid.clone())))
            || view
                .values
                .iter()
                .any(|(k, r)| matches!(k, Key::Mig(u, _) if u == uuid) && any(Some(r)));
        let source = match (g.gpm, from_dcgm) {
            (true, _) => "gpm",
            (false, true) => "dcgm",
            (false, false) => "none",
        };
        fam.push(g.subject(), vec![("source", source.to_string())], 1.0);
    }
    fam
}

fn own(view: &View) -> Vec<Family> {
    let mut up = Family::of(&UP);
    match view.down {
        None => up.push(Subject::Node, vec![], 1.0),
        Some(why) => up.push(Subject::Node, vec![("reason", why.to_string())], 0.0),
    }
    let mut left = Family::of(&LEFT_OUT);
    for ((field, why), n) in &view.left_out {
        let labels = vec![
            ("field", (*field).to_string()),
            ("reason", (*why).to_string()),
        ];
        left.push(Subject::Node, labels, *n as f64);
    }
    vec![up, left]
}
