//! dcgm-exporter's names (`--compat dcgm`): the families of its default
//! counters file, with its types, units and label names, computed from the
//! native families of the same collection (no NVML call of their own), so
//! dashboards, alerts and KEDA triggers written for dcgm-exporter keep working.

use std::collections::HashMap;
use std::sync::Arc;

use super::encode::{Format, escape_help, escape_value, write_value};
use super::{DeviceRef, Family, Kind, MigRef, PodLookup, Subject};

/// Which names `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exposition {
    /// The native families (`gpu_*`); the exporter's own `gpuscale_exporter_*`
    /// families are always served.
    pub native: bool,
    pub dcgm: Option<Options>,
}

impl Default for Exposition {
    fn default() -> Self {
        Self {
            native: true,
            dcgm: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// `Hostname` (dcgm-exporter's releases) or `hostname` (its main branch).
    pub hostname_label: &'static str,
    /// `pod_name`, `pod_namespace`, `container_name`, as its `--use-old-namespace`.
    pub old_pod_labels: bool,
}

/// How a native value becomes dcgm-exporter's.
#[derive(Clone, Copy)]
enum Conv {
    /// Multiply; DCGM reports these as floats.
    Times(f64),
    /// Multiply and round: DCGM reports these as integers (MHz, %, MiB, mJ).
    Whole(f64),
}

impl Conv {
    fn apply(self, v: f64) -> f64 {
        match self {
            Conv::Times(k) => v * k,
            Conv::Whole(k) => (v * k).round(),
        }
    }
}

const SAME: Conv = Conv::Times(1.0);
const PERCENT: Conv = Conv::Whole(100.0);
const MIB: Conv = Conv::Whole(1.0 / 1_048_576.0);
const MHZ: Conv = Conv::Whole(1e-6);

/// Where a compat value comes from.
#[derive(Clone, Copy)]
enum Source {
    /// A native family, optionally only its samples with one label value.
    Native(&'static str, Option<(&'static str, &'static str)>, Conv),
    /// The sum of native families per GPU.
    Sum(&'static [&'static str], Conv),
    /// The code of the GPU's most recent XID, 0 when it had none.
    LastXid,
    /// Total minus used memory of a MIG instance.
    MigFree,
}

struct Compat {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    gpu: Source,
    /// MIG instances as their own series, with the parent's `gpu` and `UUID`.
    mig: Option<Source>,
}

const fn gauge(name: &'static str, help: &'static str, gpu: Source, mig: Option<Source>) -> Compat {
    Compat {
        name,
        help,
        kind: Kind::Gauge,
        gpu,
        mig,
    }
}

const fn counter(name: &'static str, help: &'static str, gpu: Source) -> Compat {
    Compat {
        name,
        help,
        kind: Kind::Counter,
        gpu,
        mig: None,
    }
}

const fn native(family: &'static str, conv: Conv) -> Source {
    Source::Native(family, None, conv)
}

/// dcgm-exporter's default counters, in its file's order, then the two GPM
/// fields users turn on first.
const COMPAT: &[Compat] = &[
    gauge(
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        Source::Native("gpu_clock_hertz", Some(("clock", "sm")), MHZ),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz).",
        Source::Native("gpu_clock_hertz", Some(("clock", "memory")), MHZ),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_MEMORY_TEMP",
        "Memory temperature (in C).",
        native("gpu_memory_temperature_celsius", Conv::Whole(1.0)),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_GPU_TEMP",
        "GPU temperature (in C).",
        native("gpu_temperature_celsius", Conv::Whole(1.0)),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_POWER_USAGE",
        "Power draw (in W).",
        native("gpu_power_usage_watts", SAME),
        None,
    ),
    counter(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        native("gpu_energy_consumed_joules_total", Conv::Whole(1000.0)),
    ),
    counter(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        native("gpu_pcie_replays_total", SAME),
    ),
    gauge(
        "DCGM_FI_DEV_GPU_UTIL",
        "GPU utilization (in %).",
        native("gpu_utilization_ratio", PERCENT),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        native("gpu_memory_utilization_ratio", PERCENT),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_ENC_UTIL",
        "Encoder utilization (in %).",
        native("gpu_encoder_utilization_ratio", PERCENT),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_DEC_UTIL",
        "Decoder utilization (in %).",
        native("gpu_decoder_utilization_ratio", PERCENT),
        None,
    ),
    gauge(
        "DCGM_FI_DEV_XID_ERRORS",
        "Value of the last XID error encountered.",
        Source::LastXid,
        None,
    ),
    gauge(
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        native("gpu_memory_free_bytes", MIB),
        Some(Source::MigFree),
    ),
    gauge(
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        native("gpu_memory_used_bytes", MIB),
        Some(native("gpu_mig_memory_used_bytes", MIB)),
    ),
    gauge(
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB).",
        native("gpu_memory_reserved_bytes", MIB),
        None,
    ),
    counter(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "Total number of NVLink bandwidth counters for all lanes (in KiB).",
        Source::Sum(
            &[
                "gpu_nvlink_transmit_bytes_total",
                "gpu_nvlink_receive_bytes_total",
            ],
            Conv::Whole(1.0 / 1024.0),
        ),
    ),
    counter(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors.",
        Source::Native("gpu_remapped_rows", Some(("cause", "uncorrectable")), SAME),
    ),
    counter(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors.",
        Source::Native("gpu_remapped_rows", Some(("cause", "correctable")), SAME),
    ),
    gauge(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "Whether remapping of rows has failed.",
        native("gpu_remapped_rows_failure", SAME),
        None,
    ),
    gauge(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
        native("gpu_graphics_active_ratio", SAME),
        None,
    ),
    gauge(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        native("gpu_tensor_active_ratio", SAME),
        Some(native("gpu_mig_tensor_active_ratio", SAME)),
    ),
    gauge(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        native("gpu_dram_active_ratio", SAME),
        Some(native("gpu_mig_dram_active_ratio", SAME)),
    ),
    gauge(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        native("gpu_pcie_transmit_bytes_per_second", SAME),
        None,
    ),
    gauge(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        native("gpu_pcie_receive_bytes_per_second", SAME),
        None,
    ),
    gauge(
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        native("gpu_sm_active_ratio", SAME),
        Some(native("gpu_mig_sm_active_ratio", SAME)),
    ),
    gauge(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "The ratio of number of warps resident on an SM.",
        native("gpu_sm_occupancy_ratio", SAME),
        Some(native("gpu_mig_sm_occupancy_ratio", SAME)),
    ),
];

/// The compat families: name and kind.
pub fn families() -> impl Iterator<Item = (&'static str, Kind)> {
    COMPAT.iter().map(|c| (c.name, c.kind))
}

/// The native families the compat families read by name.
pub fn native_sources() -> impl Iterator<Item = &'static str> {
    let sources = COMPAT.iter().flat_map(|c| [Some(c.gpu), c.mig]).flatten();
    sources.flat_map(|s| match s {
        Source::Native(name, _, _) => vec![name],
        Source::Sum(names, _) => names.to_vec(),
        Source::LastXid | Source::MigFree => Vec::new(),
    })
}

/// One collection, as the compat families read it.
pub struct Input<'a> {
    pub families: &'a [Family],
    pub devices: &'a [Arc<DeviceRef>],
    pub migs: &'a [Arc<MigRef>],
    /// `Collected::last_xids`: the last XID code of each GPU while the xid
    /// collector runs.
    pub last_xids: Option<&'a HashMap<Arc<str>, u64>>,
    pub node: &'a str,
    pub pods: &'a dyn PodLookup,
}

/// Appends the compat families to `out`. Called once per collection and
/// format, like the native encoder.
pub fn write(out: &mut String, input: &Input, opts: &Options, format: Format) {
    let by_name: HashMap<&str, &Family> = input.families.iter().map(|f| (f.name, f)).collect();
    let labels = LabelSets::new(input, opts);
    let mut rows: Vec<(&str, f64)> = Vec::new();
    for compat in COMPAT {
        rows.clear();
        collect(&mut rows, compat.gpu, input, &by_name, &labels, false);
        if let Some(mig) = compat.mig {
            collect(&mut rows, mig, input, &by_name, &labels, true);
        }
        if rows.is_empty() {
            continue;
        }
        write_header(out, compat, format);
        for (set, value) in &rows {
            out.push_str(compat.name);
            out.push('{');
            out.push_str(set);
            out.push_str("} ");
            write_value(out, *value);
            out.push('\n');
        }
    }
}

fn write_header(out: &mut String, compat: &Compat, format: Format) {
    // dcgm-exporter's counters have no `_total`. OpenMetrics would require
    // it on the samples, so they are typed `unknown` there: same series names.
    let kind = match (compat.kind, format) {
        (Kind::Gauge, _) => "gauge",
        (Kind::Counter, Format::Text) => "counter",
        (Kind::Counter, Format::OpenMetrics) => "unknown",
    };
    out.push_str("# HELP ");
    out.push_str(compat.name);
    out.push(' ');
    escape_help(out, compat.help);
    out.push_str("\n# TYPE ");
    out.push_str(compat.name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// The values of one source, with the label set of their GPU or MIG instance.
fn collect<'l>(
    rows: &mut Vec<(&'l str, f64)>,
    source: Source,
    input: &Input,
    by_name: &HashMap<&str, &Family>,
    labels: &'l LabelSets,
    mig: bool,
) {
    match source {
        Source::Native(name, filter, conv) => {
            let Some(family) = by_name.get(name) else {
                return;
            };
            for s in &family.samples {
                if let Some((k, v)) = filter
                    && !s.labels.iter().any(|(lk, lv)| *lk == k && lv == v)
                {
                    continue;
                }
                let set = match (&s.subject, mig) {
                    (Subject::Device(d), false) => labels.device(&d.uuid),
                    (Subject::Mig(m), true) => labels.mig(&m.mig_uuid),
                    _ => None,
                };
                if let Some(set) = set {
                    rows.push((set, conv.apply(s.value)));
                }
            }
        }
        Source::Sum(names, conv) => {
            let mut sums: Vec<Option<f64>> = vec![None; input.devices.len()];
            for name in names {
                let Some(family) = by_name.get(name) else {
                    continue;
                };
                for s in &family.samples {
                    let Subject::Device(d) = &s.subject else {
                        continue;
                    };
                    if let Some(i) = input.devices.iter().position(|x| x.uuid == d.uuid) {
                        *sums[i].get_or_insert(0.0) += s.value;
                    }
                }
            }
            for (d, sum) in input.devices.iter().zip(sums) {
                if let (Some(sum), Some(set)) = (sum, labels.device(&d.uuid)) {
                    rows.push((set, conv.apply(sum)));
                }
            }
        }
        Source::LastXid => {
            // Served only while the xid collector runs.
            let Some(last) = input.last_xids else {
                return;
            };
            for d in input.devices {
                let code = last.get(&d.uuid).map_or(0.0, |&c| c as f64);
                if let Some(set) = labels.device(&d.uuid) {
                    rows.push((set, code));
                }
            }
        }
        Source::MigFree => {
            let value = |name: &str, uuid: &str| {
                by_name.get(name).and_then(|f| {
                    f.samples.iter().find_map(|s| match &s.subject {
                        Subject::Mig(m) if *m.mig_uuid == *uuid => Some(s.value),
                        _ => None,
                    })
                })
            };
            for m in input.migs {
                let total = value("gpu_mig_memory_total_bytes", &m.mig_uuid);
                let used = value("gpu_mig_memory_used_bytes", &m.mig_uuid);
                if let (Some(t), Some(u), Some(set)) = (total, used, labels.mig(&m.mig_uuid)) {
                    rows.push((set, MIB.apply(t - u)));
                }
            }
        }
    }
}

/// The rendered label set (without braces) of each GPU and MIG instance of
/// the collection, built once: `gpu, UUID, pci_bus_id, device, modelName,
/// [GPU_I_PROFILE, GPU_I_ID,] Hostname, DCGM_FI_DRIVER_VERSION` and the pod
/// labels, in dcgm-exporter's order.
struct LabelSets {
    devices: HashMap<Arc<str>, String>,
    migs: HashMap<Arc<str>, String>,
}

impl LabelSets {
    fn new(input: &Input, opts: &Options) -> Self {
        let mut devices = HashMap::new();
        let mut heads: HashMap<Arc<str>, (String, String)> = HashMap::new();
        for d in input.devices {
            let mut head = String::with_capacity(200);
            let index = d.index.to_string();
            push(&mut head, "gpu", &index);
            push(&mut head, "UUID", &d.uuid);
            push(&mut head, "pci_bus_id", fact(&d.facts.pci_bus_id));
            push(&mut head, "device", &format!("nvidia{index}"));
            push(&mut head, "modelName", fact(&d.facts.model));
            let mut tail = String::with_capacity(100);
            push(&mut tail, opts.hostname_label, input.node);
            let driver = fact(&d.facts.driver_version);
            push(&mut tail, "DCGM_FI_DRIVER_VERSION", driver);
            let mut set = head.clone();
            append(&mut set, &tail);
            push_pod(&mut set, input.pods, &d.uuid, opts);
            devices.insert(d.uuid.clone(), set);
            heads.insert(d.uuid.clone(), (head, tail));
        }
        let mut migs = HashMap::new();
        for m in input.migs {
            let Some((head, tail)) = heads.get(&m.gpu.uuid) else {
                continue;
            };
            let mut set = head.clone();
            push(&mut set, "GPU_I_PROFILE", fact(&m.profile));
            push(&mut set, "GPU_I_ID", &m.gpu_instance_id.to_string());
            append(&mut set, tail);
            push_pod(&mut set, input.pods, &m.mig_uuid, opts);
            migs.insert(m.mig_uuid.clone(), set);
        }
        Self { devices, migs }
    }

    fn device(&self, uuid: &str) -> Option<&str> {
        self.devices.get(uuid).map(String::as_str)
    }

    fn mig(&self, uuid: &str) -> Option<&str> {
        self.migs.get(uuid).map(String::as_str)
    }
}

/// `pod`, `namespace`, `container` of the one pod holding the device, under
/// the names dcgm-exporter writes (sorted, as its template ranges a map).
fn push_pod(set: &mut String, pods: &dyn PodLookup, uuid: &str, opts: &Options) {
    let Some(owner) = pods.device_owner(uuid) else {
        return;
    };
    let get = |key: &str| {
        owner
            .0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    let (ns, pod, container) = (get("namespace"), get("pod"), get("container"));
    if opts.old_pod_labels {
        push(set, "container_name", container);
        push(set, "pod_name", pod);
        push(set, "pod_namespace", ns);
    } else {
        push(set, "container", container);
        push(set, "namespace", ns);
        push(set, "pod", pod);
    }
}

/// A fact as a label value: empty (no label) when NVML could not read it.
fn fact(v: &Option<Arc<str>>) -> &str {
    v.as_deref().unwrap_or("")
}

/// Appends a rendered part of a label set.
fn append(set: &mut String, part: &str) {
    if !set.is_empty() && !part.is_empty() {
        set.push(',');
    }
    set.push_str(part);
}

/// Appends `key="value"`; an empty value is no label, as in the native encoder.
fn push(set: &mut String, key: &str, value: &str) {
    if value.is_empty() {
        return;
    }
    if !set.is_empty() {
        set.push(',');
    }
    set.push_str(key);
    set.push_str("=\"");
    escape_value(set, value);
    set.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{DeviceFacts, NoPods, PodLabelSet};

    struct OnePod(PodLabelSet);
    impl PodLookup for OnePod {
        fn device_owner(&self, uuid: &str) -> Option<&PodLabelSet> {
            (uuid == "MIG-a").then_some(&self.0)
        }
        fn process_owner(&self, _pid: u32) -> Option<&PodLabelSet> {
            None
        }
    }

    /// One GPU with a MIG instance. No `gpu_info` or `gpu_mig_info`: the
    /// identity labels come with the device, whichever collectors run.
    fn node() -> (Vec<Family>, Vec<Arc<DeviceRef>>, Vec<Arc<MigRef>>) {
        let gpu = Arc::new(DeviceRef {
            index: 3,
            uuid: "GPU-a".into(),
            facts: DeviceFacts {
                model: Some("NVIDIA H100 80GB HBM3".into()),
                pci_bus_id: Some("00000000:18:00.0".into()),
                driver_version: Some("570.172.08".into()),
            },
        });
        let mig = Arc::new(MigRef {
            gpu: gpu.clone(),
            mig_uuid: "MIG-a".into(),
            gpu_instance_id: 2,
            profile: Some("3g.40gb".into()),
        });
        let (d, m) = (Subject::Device(gpu.clone()), Subject::Mig(mig.clone()));
        let fams = vec![
            Family::gauge("gpu_utilization_ratio", "h").with(d.clone(), vec![], 0.07),
            Family::gauge("gpu_mig_memory_total_bytes", "h").with(
                m.clone(),
                vec![],
                4096.0 * 1048576.0,
            ),
            Family::gauge("gpu_mig_memory_used_bytes", "h").with(m, vec![], 1024.0 * 1048576.0),
            Family::counter("gpu_energy_consumed_joules_total", "h").with(d, vec![], 12.345),
        ];
        (fams, vec![gpu], vec![mig])
    }

    fn render(pods: &dyn PodLookup, opts: Options, format: Format) -> String {
        let (families, devices, migs) = node();
        let last_xids = HashMap::from([(devices[0].uuid.clone(), 79)]);
        let input = Input {
            families: &families,
            devices: &devices,
            migs: &migs,
            last_xids: Some(&last_xids),
            node: "n1",
            pods,
        };
        let mut out = String::new();
        write(&mut out, &input, &opts, format);
        out
    }

    const OPTS: Options = Options {
        hostname_label: "Hostname",
        old_pod_labels: false,
    };

    #[test]
    fn dcgm_labels_units_and_types() {
        let pods = OnePod(PodLabelSet(vec![
            ("namespace".into(), "ml".into()),
            ("pod".into(), "p-0".into()),
            ("container".into(), "c".into()),
            ("workload".into(), "p".into()),
        ]));
        let text = render(&pods, OPTS, Format::Text);
        let gpu = "gpu=\"3\",UUID=\"GPU-a\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia3\",modelName=\"NVIDIA H100 80GB HBM3\"";
        let tail = "Hostname=\"n1\",DCGM_FI_DRIVER_VERSION=\"570.172.08\"";
        assert!(
            text.contains(&format!("DCGM_FI_DEV_GPU_UTIL{{{gpu},{tail}}} 7\n")),
            "{text}"
        );
        assert!(text.contains(&format!(
            "DCGM_FI_DEV_FB_FREE{{{gpu},GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",{tail},container=\"c\",namespace=\"ml\",pod=\"p-0\"}} 3072\n"
        )), "{text}");
        assert!(text.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
        assert!(text.contains(&format!(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{gpu},{tail}}} 12345\n"
        )));
        assert!(
            text.contains(&format!("DCGM_FI_DEV_XID_ERRORS{{{gpu},{tail}}} 79\n")),
            "the most recent XID"
        );
        assert!(
            !text.contains("DCGM_FI_DEV_SM_CLOCK"),
            "no clocks collected, none served"
        );
        assert!(!text.contains("workload"));
        let om = render(&pods, OPTS, Format::OpenMetrics);
        assert!(om.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"));
    }

    #[test]
    fn old_pod_label_names_and_lowercase_hostname() {
        let pods = OnePod(PodLabelSet(vec![
            ("namespace".into(), "ml".into()),
            ("pod".into(), "p".into()),
        ]));
        let opts = Options {
            hostname_label: "hostname",
            old_pod_labels: true,
        };
        let text = render(&pods, opts, Format::Text);
        assert!(text.contains(",hostname=\"n1\","));
        assert!(
            text.contains(",pod_name=\"p\",pod_namespace=\"ml\"} "),
            "{text}"
        );
        let bare = render(&NoPods, OPTS, Format::Text);
        assert!(!bare.contains("pod"));
    }

    #[test]
    fn unread_facts_are_no_labels_and_xids_need_their_collector() {
        let gpu = Arc::new(DeviceRef::new(0, "GPU-b".into()));
        let util = Family::gauge("gpu_utilization_ratio", "h").with(
            Subject::Device(gpu.clone()),
            vec![],
            0.5,
        );
        let (families, devices) = (vec![util], vec![gpu]);
        let none_seen = HashMap::new();
        let write_with = |last_xids| {
            let input = Input {
                families: &families,
                devices: &devices,
                migs: &[],
                last_xids,
                node: "n1",
                pods: &NoPods,
            };
            let mut out = String::new();
            write(&mut out, &input, &OPTS, Format::Text);
            out
        };
        let text = write_with(Some(&none_seen));
        let set = "gpu=\"0\",UUID=\"GPU-b\",device=\"nvidia0\",Hostname=\"n1\"";
        assert!(
            text.contains(&format!("DCGM_FI_DEV_GPU_UTIL{{{set}}} 50\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("DCGM_FI_DEV_XID_ERRORS{{{set}}} 0\n")),
            "no XID yet: 0"
        );
        assert!(!write_with(None).contains("DCGM_FI_DEV_XID_ERRORS"));
    }
}
