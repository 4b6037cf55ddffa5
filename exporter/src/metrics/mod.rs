//! The exporter's metric model: what collectors produce and the encoder reads.
//!
//! Collectors know GPUs, not pods: a sample names its *subject* (a GPU, a MIG
//! instance, a process) and the encoder adds the subject's labels — and the
//! pod labels the join step found for it — when it renders the snapshot.

pub mod dcgm;
pub mod encode;

use std::collections::HashMap;
use std::sync::Arc;

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// A whole GPU, as NVML numbers it, with what NVML says it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceRef {
    pub index: u32,
    pub uuid: Arc<str>,
    pub facts: DeviceFacts,
}

impl DeviceRef {
    /// A GPU whose facts are not known (yet).
    pub fn new(index: u32, uuid: Arc<str>) -> Self {
        Self {
            index,
            uuid,
            facts: DeviceFacts::default(),
        }
    }
}

/// What does not change while the driver is loaded, read once per GPU by
/// the collection and handed to whoever needs it (`gpu_info`, the dcgm
/// labels, GPU prices) by type. `None`: NVML could not read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DeviceFacts {
    /// `nvmlDeviceGetName`, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: Option<Arc<str>>,
    /// `nvmlDeviceGetPciInfo_v3` bus ID, e.g. `00000000:18:00.0`.
    pub pci_bus_id: Option<Arc<str>>,
    /// `nvmlSystemGetDriverVersion`, e.g. `570.172.08`.
    pub driver_version: Option<Arc<str>>,
}

/// A MIG instance of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MigRef {
    pub gpu: Arc<DeviceRef>,
    pub mig_uuid: Arc<str>,
    pub gpu_instance_id: u32,
    /// The profile from the instance's name (`3g.40gb`); `None` when NVML
    /// could not name it.
    pub profile: Option<Arc<str>>,
}

/// A process running on a GPU (or on one of its MIG instances).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcRef {
    pub gpu: Arc<DeviceRef>,
    pub mig_uuid: Option<Arc<str>>,
    pub pid: u32,
}

/// What a sample is about; decides the base labels and the pod join.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// No labels but the sample's own (a series that names its node and
    /// device itself, such as `gpu_pod_allocation`).
    Global,
    /// The exporter or its node: the sample's labels, then `node`.
    Node,
    Device(Arc<DeviceRef>),
    Mig(Arc<MigRef>),
    Process(Arc<ProcRef>),
}

/// Extra labels of one sample, after the subject's labels.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub subject: Subject,
    pub labels: Labels,
    pub value: f64,
}

/// What a family is, fixed at compile time. Collectors build their families
/// from these, and the docs and dashboard tests read the same list
/// ([`crate::catalog`]), so a name is written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// The unit as docs/metrics.md writes it; empty for counts and 0/1 flags.
    pub unit: &'static str,
    /// Label keys after the subject's own (`node`, `gpu`, `uuid`, pod labels).
    pub labels: &'static [&'static str],
}

impl Desc {
    pub const fn gauge(
        name: &'static str,
        help: &'static str,
        unit: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            kind: Kind::Gauge,
            unit,
            labels,
        }
    }

    pub const fn counter(
        name: &'static str,
        help: &'static str,
        unit: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            help,
            kind: Kind::Counter,
            unit,
            labels,
        }
    }
}

/// One metric family. `name` is the sample name; counters end in `_total`.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    /// An empty family of the described kind.
    pub fn of(desc: &Desc) -> Self {
        Self {
            name: desc.name,
            help: desc.help,
            kind: desc.kind,
            samples: Vec::new(),
        }
    }

    pub fn gauge(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            kind: Kind::Gauge,
            samples: Vec::new(),
        }
    }

    pub fn counter(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            kind: Kind::Counter,
            samples: Vec::new(),
        }
    }

    pub fn push(&mut self, subject: Subject, labels: Labels, value: f64) {
        self.samples.push(Sample {
            subject,
            labels,
            value,
        });
    }

    pub fn with(mut self, subject: Subject, labels: Labels, value: f64) -> Self {
        self.push(subject, labels, value);
        self
    }
}

/// A 0/1 sample value.
pub fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// Pre-rendered pod labels (`namespace`, `pod`, `container`, `workload`,
/// `workload_kind`, `label_*`), in the order they are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLabelSet(pub Vec<(String, String)>);

/// The join seam: who holds a device or runs a process. Implemented by the
/// pod mapper over its latest immutable pod map; the encoder asks it once per
/// collection, never per scrape.
pub trait PodLookup: Send + Sync {
    /// Labels of the single pod holding this GPU or MIG UUID; `None` when no
    /// pod or several pods hold it (shared GPUs get per-pod series instead).
    fn device_owner(&self, uuid: &str) -> Option<&PodLabelSet>;
    /// Labels of the pod a GPU process belongs to.
    fn process_owner(&self, pid: u32) -> Option<&PodLabelSet>;
}

/// No pod mapping (not on Kubernetes, or the mapper is down).
pub struct NoPods;

impl PodLookup for NoPods {
    fn device_owner(&self, _uuid: &str) -> Option<&PodLabelSet> {
        None
    }
    fn process_owner(&self, _pid: u32) -> Option<&PodLabelSet> {
        None
    }
}

/// The result of one collection cycle, before the pod join and encoding.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub families: Vec<Family>,
    /// GPUs that answered this cycle (lost GPUs are not here).
    pub devices: Vec<Arc<DeviceRef>>,
    pub migs: Vec<Arc<MigRef>>,
    /// GPU processes seen this cycle, with the memory NVML reports for them
    /// (bytes) and their SM utilization (0–1) when NVML sampled it.
    pub processes: Vec<ProcessUsage>,
    /// The code of each GPU's most recent XID by UUID (absent: none seen);
    /// `None` when the xid collector does not run.
    pub last_xids: Option<HashMap<Arc<str>, u64>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessUsage {
    pub proc_ref: Arc<ProcRef>,
    pub memory_used_bytes: Option<f64>,
    pub sm_utilization_ratio: Option<f64>,
}
