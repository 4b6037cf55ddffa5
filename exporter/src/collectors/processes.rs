//! GPU processes: memory per process and, where NVML samples it, SM and
//! memory utilization per process (the basis of per-pod usage on shared GPUs).

use std::collections::HashMap;
use std::sync::Arc;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;

use super::{Collector, Ctx, Gpu, Spec};
use crate::metrics::{Collected, Desc, Family, ProcRef, ProcessUsage, Subject};

pub const SPEC: Spec = Spec {
    name: "processes",
    families: &[&MEMORY, &SM, &MEMORY_UTIL],
    build: |_, _| Box::new(Processes::default()),
};

const MEMORY: Desc = Desc::gauge(
    "gpu_process_memory_used_bytes",
    "Device memory used by the process.",
    "bytes",
    &[],
);
const SM: Desc = Desc::gauge(
    "gpu_process_sm_utilization_ratio",
    "Fraction of time the process had a kernel on the SMs, averaged over the samples since the last collection.",
    "ratio",
    &[],
);
const MEMORY_UTIL: Desc = Desc::gauge(
    "gpu_process_memory_utilization_ratio",
    "Fraction of time the process read or wrote device memory.",
    "ratio",
    &[],
);

#[derive(Default)]
pub struct Processes {
    /// Newest utilization sample seen per GPU (NVML returns samples after it).
    last_seen: HashMap<u32, u64>,
}

impl<'n> Collector<'n> for Processes {
    fn collect(&mut self, cx: &mut Ctx<'_, 'n>, out: &mut Collected) {
        let mut fams = [MEMORY, SM, MEMORY_UTIL].map(|d| Family::of(&d));
        let gpus = cx.gpus;
        for gpu in gpus {
            let found = running(cx, gpu);
            if found.is_empty() {
                continue;
            }
            let utils = self.utilization(cx, gpu);
            for (mig_uuid, p) in found {
                let proc_ref = Arc::new(ProcRef {
                    gpu: gpu.id.clone(),
                    mig_uuid,
                    pid: p.pid,
                });
                out.processes
                    .push(usage(proc_ref, &p, utils.get(&p.pid), &mut fams));
            }
        }
        self.last_seen
            .retain(|i, _| cx.gpus.iter().any(|g| g.id.index == *i));
        out.families.extend(fams);
    }
}

/// Processes per MIG instance where the GPU is partitioned, else per GPU.
fn running(cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>) -> Vec<(Option<Arc<str>>, ProcessInfo)> {
    const FUNCTION: &str = "nvmlDeviceGetComputeRunningProcesses_v3";
    let i = gpu.id.index;
    let migs: Vec<_> = cx.migs.iter().filter(|m| m.id.gpu == gpu.id).collect();
    if migs.is_empty() {
        let procs = cx
            .reader
            .read(i, FUNCTION, gpu.device.running_compute_processes());
        return procs
            .unwrap_or_default()
            .into_iter()
            .map(|p| (None, p))
            .collect();
    }
    let mut found = Vec::new();
    for mig in migs {
        let procs = cx
            .reader
            .read(i, FUNCTION, mig.device.running_compute_processes());
        let uuid = &mig.id.mig_uuid;
        found.extend(
            procs
                .unwrap_or_default()
                .into_iter()
                .map(|p| (Some(uuid.clone()), p)),
        );
    }
    found
}

/// A process's SM and memory utilization (0–1), averaged over its samples.
#[derive(Debug, Clone, Copy, Default)]
struct Utilization {
    sm: f64,
    memory: f64,
}

impl Processes {
    /// Per pid, the average of the samples NVML buffered since the last collection.
    fn utilization(&mut self, cx: &mut Ctx<'_, '_>, gpu: &Gpu<'_>) -> HashMap<u32, Utilization> {
        let i = gpu.id.index;
        let since = self.last_seen.get(&i).copied();
        let utils = match gpu.device.process_utilization_stats(since) {
            Ok(samples) => samples,
            // No sample since the last call.
            Err(NvmlError::NotFound) => Vec::new(),
            Err(e) => {
                cx.reader.fail(i, "nvmlDeviceGetProcessUtilization", &e);
                Vec::new()
            }
        };
        if let Some(newest) = utils.iter().map(|s| s.timestamp).max() {
            self.last_seen.insert(i, newest);
        }
        let mut sums: HashMap<u32, (Utilization, u32)> = HashMap::new();
        for s in &utils {
            let (sum, n) = sums.entry(s.pid).or_default();
            sum.sm += f64::from(s.sm_util);
            sum.memory += f64::from(s.mem_util);
            *n += 1;
        }
        let average = |(sum, n): (Utilization, u32)| Utilization {
            sm: sum.sm / f64::from(n) / 100.0,
            memory: sum.memory / f64::from(n) / 100.0,
        };
        sums.into_iter().map(|(pid, s)| (pid, average(s))).collect()
    }
}

/// One process's samples, and its usage for the pod join.
fn usage(
    proc_ref: Arc<ProcRef>,
    p: &ProcessInfo,
    util: Option<&Utilization>,
    [mem, sm, mem_util]: &mut [Family; 3],
) -> ProcessUsage {
    let subject = Subject::Process(proc_ref.clone());
    let memory = match p.used_gpu_memory {
        UsedGpuMemory::Used(b) => Some(b as f64),
        UsedGpuMemory::Unavailable => None,
    };
    if let Some(b) = memory {
        mem.push(subject.clone(), vec![], b);
    }
    if let Some(u) = util {
        sm.push(subject.clone(), vec![], u.sm);
        mem_util.push(subject, vec![], u.memory);
    }
    ProcessUsage {
        proc_ref,
        memory_used_bytes: memory,
        sm_utilization_ratio: util.map(|u| u.sm),
    }
}
