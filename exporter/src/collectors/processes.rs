//! GPU processes: memory per process and, where NVML samples it, SM and
//! memory utilization per process (the basis of per-pod usage on shared GPUs).

use std::collections::HashMap;
use std::sync::Arc;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;

use super::{Collector, Ctx, Spec};
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
        let mut mem = Family::of(&MEMORY);
        let mut sm = Family::of(&SM);
        let mut mem_util = Family::of(&MEMORY_UTIL);
        for gpu in cx.gpus {
            let i = gpu.id.index;
            // Processes per MIG instance where the GPU is partitioned, else per GPU.
            let mut found: Vec<(Option<Arc<str>>, ProcessInfo)> = Vec::new();
            let migs: Vec<_> = cx.migs.iter().filter(|m| m.id.gpu == gpu.id).collect();
            if migs.is_empty() {
                let procs = cx.reader.read(
                    i,
                    "nvmlDeviceGetComputeRunningProcesses_v3",
                    gpu.device.running_compute_processes(),
                );
                found.extend(procs.unwrap_or_default().into_iter().map(|p| (None, p)));
            } else {
                for mig in migs {
                    let procs = cx.reader.read(
                        i,
                        "nvmlDeviceGetComputeRunningProcesses_v3",
                        mig.device.running_compute_processes(),
                    );
                    found.extend(
                        procs
                            .unwrap_or_default()
                            .into_iter()
                            .map(|p| (Some(mig.id.mig_uuid.clone()), p)),
                    );
                }
            }
            if found.is_empty() {
                continue;
            }
            let utils = match gpu
                .device
                .process_utilization_stats(self.last_seen.get(&i).copied())
            {
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
            // Average the samples NVML buffered since the last collection.
            let mut by_pid: HashMap<u32, (f64, f64, u32)> = HashMap::new();
            for s in &utils {
                let e = by_pid.entry(s.pid).or_default();
                e.0 += f64::from(s.sm_util);
                e.1 += f64::from(s.mem_util);
                e.2 += 1;
            }
            for (mig_uuid, p) in found {
                let proc_ref = Arc::new(ProcRef {
                    gpu: gpu.id.clone(),
                    mig_uuid,
                    pid: p.pid,
                });
                let subject = Subject::Process(proc_ref.clone());
                let memory = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b as f64),
                    UsedGpuMemory::Unavailable => None,
                };
                if let Some(b) = memory {
                    mem.push(subject.clone(), vec![], b);
                }
                let util = by_pid
                    .get(&p.pid)
                    .map(|(s, m, n)| (s / f64::from(*n) / 100.0, m / f64::from(*n) / 100.0));
                if let Some((s, m)) = util {
                    sm.push(subject.clone(), vec![], s);
                    mem_util.push(subject, vec![], m);
                }
                out.processes.push(ProcessUsage {
                    proc_ref,
                    memory_used_bytes: memory,
                    sm_utilization_ratio: util.map(|u| u.0),
                });
            }
        }
        self.last_seen
            .retain(|i, _| cx.gpus.iter().any(|g| g.id.index == *i));
        out.families.extend([mem, sm, mem_util]);
    }
}
