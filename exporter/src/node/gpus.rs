//! The node's GPUs this collection: allocatable (answering NVML), allocated
//! (held by a pod, through the device plugin or a DRA claim, on the GPU
//! itself or one of its MIG instances) and active (any kernel time: NVML
//! utilization above 0, a MIG instance's SM activity above 0, or a process
//! with SM time). `active` is unknown (`None`) while an allocated GPU has
//! none of these readings: an unread GPU is never called idle.

use std::collections::HashSet;

use crate::metrics::{Collected, Subject};

/// The `state` values of `gpu_node_gpus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub allocatable: usize,
    pub allocated: usize,
    pub active: Option<usize>,
}

const UTILIZATION: &str = "gpu_utilization_ratio";
const MIG_ACTIVITY: &str = "gpu_mig_sm_active_ratio";

/// GPUs with an activity reading, and those whose reading is above 0.
fn activity(collected: &Collected) -> (HashSet<&str>, HashSet<&str>) {
    let (mut read, mut active) = (HashSet::new(), HashSet::new());
    let samples = collected
        .families
        .iter()
        .filter(|f| f.name == UTILIZATION || f.name == MIG_ACTIVITY)
        .flat_map(|f| &f.samples);
    for s in samples {
        let gpu: &str = match &s.subject {
            Subject::Device(d) => &d.uuid,
            Subject::Mig(m) => &m.gpu.uuid,
            _ => continue,
        };
        read.insert(gpu);
        if s.value > 0.0 {
            active.insert(gpu);
        }
    }
    for p in &collected.processes {
        if let Some(r) = p.sm_utilization_ratio {
            read.insert(&p.proc_ref.gpu.uuid);
            if r > 0.0 {
                active.insert(&p.proc_ref.gpu.uuid);
            }
        }
    }
    (read, active)
}

/// `held`: the GPU and MIG UUIDs pods hold (the pod mapper's holdings).
pub fn count(held: &HashSet<&str>, collected: &Collected) -> Counts {
    let answering: HashSet<&str> = collected.devices.iter().map(|d| &*d.uuid).collect();
    let mut allocated: HashSet<&str> = answering
        .iter()
        .copied()
        .filter(|u| held.contains(u))
        .collect();
    for m in &collected.migs {
        if held.contains(&*m.mig_uuid) {
            allocated.insert(&m.gpu.uuid);
        }
    }
    let (read, active) = activity(collected);
    let unread = allocated.iter().any(|g| !read.contains(g));
    Counts {
        allocatable: answering.len(),
        allocated: allocated.len(),
        active: (!unread).then(|| active.intersection(&answering).count()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::{DeviceRef, Family, Kind, MigRef, Sample};

    fn gpu(i: u32) -> Arc<DeviceRef> {
        Arc::new(DeviceRef::new(i, format!("GPU-{i}").into()))
    }

    fn family(name: &'static str, samples: Vec<(Subject, f64)>) -> Family {
        Family {
            name,
            help: "",
            kind: Kind::Gauge,
            samples: samples
                .into_iter()
                .map(|(subject, value)| Sample {
                    subject,
                    labels: Vec::new(),
                    value,
                })
                .collect(),
        }
    }

    #[test]
    fn mig_activity_counts_and_an_unread_allocated_gpu_leaves_active_unknown() {
        let (g0, g1, g2) = (gpu(0), gpu(1), gpu(2));
        let mig = Arc::new(MigRef {
            gpu: g1.clone(),
            mig_uuid: "MIG-1".into(),
            gpu_instance_id: 1,
            profile: None,
        });
        let mut c = Collected {
            families: vec![
                family(UTILIZATION, vec![(Subject::Device(g0.clone()), 0.0)]),
                family(MIG_ACTIVITY, vec![(Subject::Mig(mig.clone()), 0.4)]),
            ],
            devices: vec![g0, g1, g2],
            migs: vec![mig],
            processes: Vec::new(),
            last_xids: None,
        };
        let held: HashSet<&str> = ["GPU-0", "MIG-1"].into();
        let n = count(&held, &c);
        assert_eq!(
            n,
            Counts {
                allocatable: 3,
                allocated: 2,
                active: Some(1)
            }
        );
        c.families.truncate(1);
        assert_eq!(
            count(&held, &c).active,
            None,
            "GPU 1's MIG instance has no reading"
        );
    }
}
