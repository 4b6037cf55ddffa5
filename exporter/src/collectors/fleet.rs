//! What `--profile fleet` serves of a whole collection, decided across
//! families (docs/operations.md, "Fleet profile"): detail families no
//! alert, recording rule or adapter preset reads are left out, limits and
//! thresholds are served while they matter, per-process series only where
//! they say more than the per-pod ones. It applies to the native exposition
//! only: `--compat dcgm` still reads every family.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::metrics::{Family, Sample, Subject};

/// Families `--profile fleet` does not serve: detail panels of the GPU node
/// dashboard read them, nothing that alerts, records or scales does, and
/// the static ones are `gpu_info` labels (`max_*_hertz`).
pub const LEFT_OUT: &[&str] = &[
    "gpu_clock_max_hertz",
    "gpu_decoder_utilization_ratio",
    "gpu_encoder_utilization_ratio",
    "gpu_memory_free_bytes",
    "gpu_memory_reserved_bytes",
    "gpu_mig_sm_occupancy_ratio",
    "gpu_nvlink_receive_bytes_total",
    "gpu_nvlink_transmit_bytes_total",
    "gpu_performance_state",
    "gpu_sm_occupancy_ratio",
    "gpuscale_exporter_pod_attributed_devices",
    "gpuscale_exporter_pod_refresh_duration_seconds",
];

/// NVML proxies of a GPU's activity, which the right-sizing rules read for
/// a GPU without activity ratios (no GPM, no DCGM): served for those GPUs
/// only, with the enforced power limit.
pub const PROXIES: &[&str] = &[
    "gpu_memory_utilization_ratio",
    "gpu_pcie_receive_bytes_per_second",
    "gpu_pcie_transmit_bytes_per_second",
];

/// The activity ratio whose presence says a GPU needs no proxies.
const ACTIVITY: &str = "gpu_sm_active_ratio";

/// Pod-mapping health counts served only while non-zero (their alerts and
/// panels read `> 0`).
pub const NON_ZERO: &[&str] = &[
    "gpuscale_exporter_dra_devices_unattributed",
    "gpuscale_exporter_pod_refresh_errors_total",
    "gpuscale_exporter_unattributed_pids_total",
    "gpuscale_exporter_unattributed_processes",
];

/// A temperature threshold is served while its temperature is within this
/// many degrees of it: the alerts over them fire 5 °C below.
pub const NEAR_CELSIUS: f64 = 10.0;

/// Each threshold and the temperature compared with it.
const THRESHOLDS: [(&str, &str); 2] = [
    ("slowdown", "gpu_temperature_celsius"),
    ("memory_max", "gpu_memory_temperature_celsius"),
];

const THRESHOLD: &str = "gpu_temperature_threshold_celsius";
const LIMIT: &str = "gpu_power_limit_watts";
const DEFAULT_LIMIT: &str = "gpu_power_limit_default_watts";
const CLOCK: &str = "gpu_clock_hertz";
const MEMORY_TEMPERATURE: &str = "gpu_memory_temperature_celsius";

/// The clocks fleet serves, with the `gpu_info` label of their maximum.
const MAX_CLOCKS: [(&str, &str); 2] = [("sm", "max_sm_hertz"), ("memory", "max_memory_hertz")];
const ACTIVITY_SOURCE: &str = "gpu_activity_source_info";

fn label<'a>(s: &'a Sample, key: &str) -> Option<&'a str> {
    s.labels
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

fn uuid(s: &Sample) -> Option<&Arc<str>> {
    match &s.subject {
        Subject::Device(d) => Some(&d.uuid),
        _ => None,
    }
}

/// Per GPU UUID, the value of `name`'s device samples.
fn values<'a>(families: &'a [Family], name: &str) -> HashMap<&'a str, f64> {
    families
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .filter_map(|s| Some((&**uuid(s)?, s.value)))
        .collect()
}

/// What is known across families when one sample is judged.
struct Context<'a> {
    temperatures: [HashMap<&'a str, f64>; 2],
    limits: HashMap<&'a str, f64>,
    defaults: HashMap<&'a str, f64>,
    /// GPUs with activity ratios this collection.
    active: HashSet<&'a str>,
    /// Each GPU's maximum SM and memory clocks (`gpu_info`'s
    /// `max_sm_hertz`, `max_memory_hertz`).
    max_clocks: HashMap<(&'a str, &'static str), f64>,
    /// Each GPU's memory_max threshold.
    memory_max: HashMap<&'a str, f64>,
    /// Processes a GPU or MIG instance shares with another, and those
    /// without a pod.
    processes: HashSet<ProcKey>,
}

/// A GPU or one of its MIG instances, by UUID.
type DeviceKey = (Arc<str>, Option<Arc<str>>);

/// A process by GPU, MIG instance and pid.
type ProcKey = (Arc<str>, Option<Arc<str>>, u32);

fn proc_key(s: &Sample) -> Option<ProcKey> {
    match &s.subject {
        Subject::Process(p) => Some((p.gpu.uuid.clone(), p.mig_uuid.clone(), p.pid)),
        _ => None,
    }
}

/// Processes worth a series of their own: several on one GPU or MIG
/// instance (time-slicing), or one without a pod (`gpu_process_unattributed`).
fn shared_or_unattributed(families: &[Family]) -> HashSet<ProcKey> {
    let mut by_device: HashMap<DeviceKey, HashSet<u32>> = HashMap::new();
    let mut keep = HashSet::new();
    for f in families {
        for key in f.samples.iter().filter_map(proc_key) {
            if f.name == "gpu_process_unattributed" {
                keep.insert(key.clone());
            }
            let (gpu, mig, pid) = key;
            by_device.entry((gpu, mig)).or_default().insert(pid);
        }
    }
    for ((gpu, mig), pids) in by_device {
        if pids.len() > 1 {
            keep.extend(pids.into_iter().map(|pid| (gpu.clone(), mig.clone(), pid)));
        }
    }
    keep
}

impl<'a> Context<'a> {
    fn new(families: &'a [Family]) -> Self {
        let max_clocks = families
            .iter()
            .filter(|f| f.name == "gpu_info")
            .flat_map(|f| &f.samples)
            .flat_map(|s| {
                MAX_CLOCKS.iter().filter_map(move |(clock, key)| {
                    let hz = label(s, key)?.parse().ok()?;
                    Some(((&**uuid(s)?, *clock), hz))
                })
            })
            .collect();
        let memory_max = families
            .iter()
            .filter(|f| f.name == THRESHOLD)
            .flat_map(|f| &f.samples)
            .filter(|s| label(s, "threshold") == Some("memory_max"))
            .filter_map(|s| Some((&**uuid(s)?, s.value)))
            .collect();
        Self {
            temperatures: THRESHOLDS.map(|(_, t)| values(families, t)),
            limits: values(families, LIMIT),
            active: values(families, ACTIVITY).into_keys().collect(),
            defaults: values(families, DEFAULT_LIMIT),
            max_clocks,
            memory_max,
            processes: shared_or_unattributed(families),
        }
    }

    /// Whether the fleet profile serves `s` of family `name`.
    fn serves(&self, name: &str, s: &Sample) -> bool {
        let gpu = uuid(s).map(|u| &**u);
        match name {
            THRESHOLD => self.near_threshold(gpu, s),
            LIMIT | DEFAULT_LIMIT => self.limit_lowered(gpu, name),
            // The SM and memory clocks while they run below their maximum.
            CLOCK => label(s, "clock").is_some_and(|c| self.below_max(gpu, c, s.value)),
            // The memory temperature while within NEAR_CELSIUS of its limit.
            MEMORY_TEMPERATURE => gpu
                .and_then(|g| self.memory_max.get(g))
                .is_none_or(|max| s.value >= max - NEAR_CELSIUS),
            n if n.starts_with("gpu_process_") && n != "gpu_process_unattributed" => {
                proc_key(s).is_some_and(|k| self.processes.contains(&k))
            }
            n if NON_ZERO.contains(&n) => s.value != 0.0,
            n if PROXIES.contains(&n) => gpu.is_none_or(|g| self.needs_proxies(g)),
            // Where the activity ratios come from, while not the usual GPM.
            ACTIVITY_SOURCE => label(s, "source") != Some("gpm"),
            _ => true,
        }
    }

    /// A threshold while its temperature is within [`NEAR_CELSIUS`] of it
    /// (always where the temperature is not read: nothing to compare with).
    fn near_threshold(&self, gpu: Option<&str>, s: &Sample) -> bool {
        let Some(i) = THRESHOLDS
            .iter()
            .position(|(t, _)| label(s, "threshold") == Some(*t))
        else {
            return false;
        };
        let temperature = gpu.and_then(|g| self.temperatures[i].get(g));
        temperature.is_none_or(|t| *t >= s.value - NEAR_CELSIUS)
    }

    /// Whether `clock` (sm or memory) runs below its maximum (always where
    /// the maximum is not known; never for the other clocks).
    fn below_max(&self, gpu: Option<&str>, clock: &str, hz: f64) -> bool {
        let Some((clock, _)) = MAX_CLOCKS.iter().find(|(c, _)| *c == clock) else {
            return false;
        };
        gpu.and_then(|g| self.max_clocks.get(&(g, *clock)))
            .is_none_or(|max| hz < *max)
    }

    /// A GPU without activity ratios: the right-sizing rules read its NVML
    /// proxies.
    fn needs_proxies(&self, gpu: &str) -> bool {
        !self.active.contains(gpu)
    }

    /// The enforced and default power limits while they differ or the GPU
    /// needs proxies (power over the limit is one), and the enforced one
    /// always where the default is not read.
    fn limit_lowered(&self, gpu: Option<&str>, name: &str) -> bool {
        let Some(gpu) = gpu else { return true };
        match (self.limits.get(gpu), self.defaults.get(gpu)) {
            (Some(limit), Some(default)) => limit != default || self.needs_proxies(gpu),
            (Some(_), None) => name == LIMIT,
            _ => true,
        }
    }
}

/// The families `--profile fleet` serves of a collection, in order.
pub fn serve(families: &[Family]) -> Vec<Family> {
    let cx = Context::new(families);
    families
        .iter()
        .filter(|f| !LEFT_OUT.contains(&f.name))
        .map(|f| Family {
            name: f.name,
            help: f.help,
            kind: f.kind,
            samples: f
                .samples
                .iter()
                .filter(|s| cx.serves(f.name, s))
                .cloned()
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
