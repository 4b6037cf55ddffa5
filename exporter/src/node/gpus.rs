//! The node's GPUs this collection: allocatable (answering NVML), allocated
//! (held by a pod, through the device plugin or a DRA claim, on the GPU
//! itself or one of its MIG instances) and active (any kernel time: NVML
//! utilization above 0, or a process with SM time).

use std::collections::HashSet;

use crate::metrics::{Collected, Subject};

/// The `state` values of `gpu_node_gpus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub allocatable: usize,
    pub allocated: usize,
    pub active: usize,
}

const UTILIZATION: &str = "gpu_utilization_ratio";

/// `held`: the GPU and MIG UUIDs pods hold (the pod mapper's holdings).
pub fn count(held: &HashSet<&str>, collected: &Collected) -> Counts {
    let mut allocated: HashSet<&str> = collected
        .devices
        .iter()
        .map(|d| &*d.uuid)
        .filter(|u| held.contains(u))
        .collect();
    for m in &collected.migs {
        if held.contains(&*m.mig_uuid) {
            allocated.insert(&m.gpu.uuid);
        }
    }
    let mut active: HashSet<&str> = collected
        .families
        .iter()
        .filter(|f| f.name == UTILIZATION)
        .flat_map(|f| &f.samples)
        .filter(|s| s.value > 0.0)
        .filter_map(|s| match &s.subject {
            Subject::Device(d) => Some(&*d.uuid),
            _ => None,
        })
        .collect();
    for p in &collected.processes {
        if p.sm_utilization_ratio.is_some_and(|r| r > 0.0) {
            active.insert(&p.proc_ref.gpu.uuid);
        }
    }
    let answering: HashSet<&str> = collected.devices.iter().map(|d| &*d.uuid).collect();
    Counts {
        allocatable: answering.len(),
        allocated: allocated.len(),
        active: active.intersection(&answering).count(),
    }
}
