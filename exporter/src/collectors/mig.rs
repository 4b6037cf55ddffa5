//! MIG instances: identity and their own memory. (Discovery of the instances
//! happens once per cycle in the collection loop; see `collect::discover`.)

use super::{Collector, Ctx, Spec};
use crate::metrics::{Collected, Desc, Family, Subject};

pub struct Mig;

pub const SPEC: Spec = Spec {
    name: "mig",
    families: &[&MIG_INFO, &TOTAL, &USED],
    build: |_, _| Box::new(Mig),
};

pub const MIG_INFO: Desc = Desc::gauge(
    "gpu_mig_info",
    "MIG instance identity; the value is always 1.",
    "",
    &["compute_instance_id", "profile"],
);
const TOTAL: Desc = Desc::gauge(
    "gpu_mig_memory_total_bytes",
    "Memory of the MIG instance.",
    "bytes",
    &[],
);
const USED: Desc = Desc::gauge(
    "gpu_mig_memory_used_bytes",
    "Memory allocated in the MIG instance.",
    "bytes",
    &[],
);

impl<'n> Collector<'n> for Mig {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut info = Family::of(&MIG_INFO);
        let mut total = Family::of(&TOTAL);
        let mut used = Family::of(&USED);
        for mig in cx.migs {
            let subject = Subject::Mig(mig.id.clone());
            let ci = mig
                .compute_instance_id
                .map(|c| c.to_string())
                .unwrap_or_default();
            info.push(
                subject.clone(),
                vec![
                    ("compute_instance_id", ci),
                    (
                        "profile",
                        mig.id.profile.as_deref().unwrap_or("").to_owned(),
                    ),
                ],
                1.0,
            );
            let gpu = mig.id.gpu.index;
            if let Some(m) =
                cx.reader
                    .read(gpu, "nvmlDeviceGetMemoryInfo_v2", mig.device.memory_info())
            {
                total.push(subject.clone(), vec![], m.total as f64);
                used.push(subject, vec![], m.used as f64);
            }
        }
        out.families.extend([info, total, used]);
    }
}
