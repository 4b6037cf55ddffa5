//! The exporter's own health: build, NVML state, collector timings, errors,
//! the state file, and the process's footprint ([`process`]).
//!
//! They are families like the GPU ones, built from their descriptors once
//! per collection from the loop's state and encoded with them
//! (docs/architecture.md). Each series is about the node
//! ([`Subject::Node`]); families come sorted by name and series by their
//! label values, labels sorted by key, so the exposition stays what
//! Prometheus client registries write.

pub mod process;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metrics::{Desc, Family, Kind, Labels, Subject, flag};

#[derive(Debug, Default)]
pub struct LoopStats {
    pub nvml_up: bool,
    pub collections_total: u64,
    pub last_duration: f64,
    pub last_success_unix: f64,
    /// Each collector's last run.
    pub collectors: BTreeMap<&'static str, CollectorRun>,
}

/// One run of a collector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectorRun {
    pub duration_seconds: f64,
    /// No NVML call failed and it did not panic.
    pub success: bool,
}

#[derive(Debug, Clone)]
pub struct GpuState {
    pub uuid: Option<Arc<str>>,
    pub state: GpuHealth,
}

/// The `state` label of `gpuscale_exporter_gpu_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuHealth {
    Ok,
    /// Fallen off the bus (GPU_IS_LOST).
    Lost,
    /// Any other failure to open it.
    Error,
}

impl GpuHealth {
    pub const ALL: [GpuHealth; 3] = [GpuHealth::Ok, GpuHealth::Lost, GpuHealth::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            GpuHealth::Ok => "ok",
            GpuHealth::Lost => "lost",
            GpuHealth::Error => "error",
        }
    }

    /// The state of a GPU whose handle or UUID could not be read.
    pub fn of_error(e: &nvml_wrapper::error::NvmlError) -> Self {
        if matches!(e, nvml_wrapper::error::NvmlError::GpuLost) {
            GpuHealth::Lost
        } else {
            GpuHealth::Error
        }
    }
}

pub const BUILD_INFO: Desc = Desc::gauge(
    "gpuscale_exporter_build_info",
    "Build of the exporter; the value is always 1.",
    "",
    &["version", "revision", "rustc_version"],
);
pub const NVML_UP: Desc = Desc::gauge(
    "gpuscale_exporter_nvml_up",
    "1 while NVML is initialised and answering, else 0.",
    "",
    &[],
);
pub const GPUS: Desc = Desc::gauge(
    "gpuscale_exporter_gpus",
    "GPUs NVML reports on this node.",
    "",
    &["node"],
);
pub const GPU_STATE: Desc = Desc::gauge(
    "gpuscale_exporter_gpu_state",
    "1 for the GPU's current state (ok, lost, error; missing: in the state file, not reported by NVML).",
    "",
    &["node", "gpu", "uuid", "state"],
);
pub const COLLECTOR_DURATION: Desc = Desc::gauge(
    "gpuscale_exporter_collector_duration_seconds",
    "Duration of the collector's last run.",
    "seconds",
    &["collector"],
);
pub const COLLECTOR_SUCCESS: Desc = Desc::gauge(
    "gpuscale_exporter_collector_success",
    "1 when the collector's last run had no error.",
    "",
    &["collector"],
);
pub const COLLECTION_DURATION: Desc = Desc::gauge(
    "gpuscale_exporter_collection_duration_seconds",
    "Duration of the last whole collection cycle.",
    "seconds",
    &[],
);
pub const COLLECTIONS: Desc = Desc::counter(
    "gpuscale_exporter_collections_total",
    "Collection cycles run.",
    "",
    &[],
);
pub const LAST_COLLECTION: Desc = Desc::gauge(
    "gpuscale_exporter_last_collection_timestamp_seconds",
    "Unix time of the last successful collection.",
    "seconds",
    &[],
);
pub const NVML_ERRORS: Desc = Desc::counter(
    "gpuscale_exporter_nvml_errors_total",
    "NVML calls that failed, by function and error kind.",
    "",
    &["function", "error"],
);

pub const GPUS_EXPECTED: Desc = Desc::gauge(
    "gpuscale_exporter_gpus_expected",
    "GPUs the state file remembers on this node (one per PCI bus ID seen).",
    "",
    &["node"],
);
pub const STATE_FILE_OK: Desc = Desc::gauge(
    "gpuscale_exporter_state_file_ok",
    "1 while the GPU state file was read (or rebuilt) and its last write succeeded.",
    "",
    &["node"],
);

/// Every family of the exporter's own health and footprint.
pub const FAMILIES: &[&Desc] = &[
    &BUILD_INFO,
    &NVML_UP,
    &GPUS,
    &GPU_STATE,
    &COLLECTOR_DURATION,
    &COLLECTOR_SUCCESS,
    &COLLECTION_DURATION,
    &COLLECTIONS,
    &LAST_COLLECTION,
    &NVML_ERRORS,
    &GPUS_EXPECTED,
    &STATE_FILE_OK,
    &process::CPU,
    &process::OPEN_FDS,
    &process::MAX_FDS,
    &process::VIRTUAL_MEMORY,
    &process::RESIDENT_MEMORY,
    &process::START_TIME,
    &process::THREADS,
];

/// Self-metrics `--profile fleet` does not serve: the exporter's footprint
/// and per-collector timings, which panels chart and no alert reads (the
/// restart-loop alert reads `process_start_time_seconds`, kept).
pub const FLEET_LEFT_OUT: &[&Desc] = &[
    &COLLECTOR_DURATION,
    &COLLECTIONS,
    &process::CPU,
    &process::OPEN_FDS,
    &process::MAX_FDS,
    &process::VIRTUAL_MEMORY,
    &process::RESIDENT_MEMORY,
    &process::THREADS,
];

/// NVML call failures, by (function, error kind): cumulative counts.
pub type ErrorCounts = BTreeMap<(&'static str, &'static str), u64>;

/// The self-metric families of one collection: [`Self::record`] and
/// [`Self::record_inventory`] build them, [`Self::gather`] hands them out.
pub struct SelfMetrics {
    build_info: Family,
    /// `--profile fleet`: only a state other than ok that a GPU is in,
    /// collectors while they fail, and none of [`FLEET_LEFT_OUT`].
    fleet: bool,
    footprint: process::Footprint,
    families: Vec<Family>,
}

/// A series about the node with `labels` (keys in sorted order).
fn node(desc: &Desc, labels: Labels, value: f64) -> Family {
    Family::of(desc).with(Subject::Node, labels, value)
}

impl SelfMetrics {
    pub fn new() -> Self {
        let build = vec![
            (
                "revision",
                option_env!("GPUSCALE_REVISION").unwrap_or("unknown").into(),
            ),
            (
                "rustc_version",
                option_env!("GPUSCALE_RUSTC_VERSION")
                    .unwrap_or("unknown")
                    .into(),
            ),
            ("version", env!("CARGO_PKG_VERSION").into()),
        ];
        Self {
            build_info: node(&BUILD_INFO, build, 1.0),
            fleet: false,
            footprint: process::Footprint::default(),
            families: Vec::new(),
        }
    }

    /// Serves the GPU state families as `profile` asks.
    #[must_use]
    pub fn with_profile(mut self, profile: crate::collectors::profile::Profile) -> Self {
        self.fleet = profile == crate::collectors::profile::Profile::Fleet;
        self
    }

    /// The families of the loop's state. Before the first collection with
    /// NVML down only build and `nvml_up` are served.
    pub fn record(
        &mut self,
        stats: &LoopStats,
        errors: &ErrorCounts,
        gpus: &BTreeMap<u32, GpuState>,
    ) {
        self.families.clear();
        self.families.push(self.build_info.clone());
        let nvml_up = flag(stats.nvml_up);
        self.families.push(node(&NVML_UP, Vec::new(), nvml_up));
        if !stats.nvml_up && stats.collections_total == 0 {
            return;
        }
        self.families
            .push(node(&GPUS, Vec::new(), gpus.len() as f64));
        self.families.push(self.gpu_states(gpus));
        let mut duration = Family::of(&COLLECTOR_DURATION);
        let mut success = Family::of(&COLLECTOR_SUCCESS);
        for (name, run) in &stats.collectors {
            let labels = vec![("collector", (*name).to_owned())];
            duration.push(Subject::Node, labels.clone(), run.duration_seconds);
            success.push(Subject::Node, labels, flag(run.success));
        }
        let mut nvml_errors = Family::of(&NVML_ERRORS);
        for ((function, kind), n) in errors {
            let labels = vec![
                ("error", (*kind).to_owned()),
                ("function", (*function).to_owned()),
            ];
            nvml_errors.push(Subject::Node, labels, *n as f64);
        }
        self.families.extend([
            duration,
            success,
            nvml_errors,
            node(&COLLECTION_DURATION, Vec::new(), stats.last_duration),
            node(&COLLECTIONS, Vec::new(), stats.collections_total as f64),
        ]);
        if stats.last_success_unix > 0.0 {
            let last = stats.last_success_unix;
            self.families.push(node(&LAST_COLLECTION, Vec::new(), last));
        }
    }

    /// `gpuscale_exporter_gpu_state`: each GPU's state (and, unless only the
    /// current one is served, its other states as 0).
    fn gpu_states(&self, gpus: &BTreeMap<u32, GpuState>) -> Family {
        let mut family = Family::of(&GPU_STATE);
        for (index, s) in gpus {
            let uuid = s.uuid.as_deref().unwrap_or("");
            for health in GpuHealth::ALL {
                // Fleet: the state a GPU is in, unless ok (its gpu_info says so).
                if self.fleet && (s.state != health || health == GpuHealth::Ok) {
                    continue;
                }
                let labels = state_labels(*index, health.as_str(), uuid);
                family.push(Subject::Node, labels, flag(s.state == health));
            }
        }
        family
    }

    /// The state file's view, after [`Self::record`]: GPUs it remembers
    /// that NVML no longer reports are `missing`.
    pub fn record_inventory(&mut self, view: &crate::inventory::View) {
        if let Some(n) = view.expected {
            self.families
                .push(node(&GPUS_EXPECTED, Vec::new(), n as f64));
        }
        if let Some(ok) = view.file_ok {
            self.families
                .push(node(&STATE_FILE_OK, Vec::new(), flag(ok)));
        }
        if view.missing.is_empty() {
            return;
        }
        let mut missing = Family::of(&GPU_STATE);
        for m in &view.missing {
            missing.push(
                Subject::Node,
                state_labels(m.index, "missing", &m.uuid),
                1.0,
            );
        }
        self.families.push(missing);
    }

    /// The recorded families and the process's footprint, sorted by name,
    /// series sorted by their label values.
    pub fn gather(&mut self) -> Vec<Family> {
        let mut all = std::mem::take(&mut self.families);
        all.extend(self.footprint.families());
        all.sort_by_key(|f| f.name);
        // Two parts of one family (the GPU states and the missing GPUs) become one.
        all.dedup_by(|later, first| {
            let same = later.name == first.name;
            if same {
                first.samples.append(&mut later.samples);
            }
            same
        });
        for f in &mut all {
            f.samples
                .sort_by(|a, b| label_values(a).cmp(label_values(b)));
        }
        if self.fleet {
            fleet_trim(&mut all);
        }
        all
    }
}

/// What `--profile fleet` leaves of the self-metrics: no
/// [`FLEET_LEFT_OUT`], and a collector's success only while it fails (the
/// alert reads `== 0`).
fn fleet_trim(all: &mut Vec<Family>) {
    all.retain(|f| !FLEET_LEFT_OUT.iter().any(|d| d.name == f.name));
    for f in all.iter_mut().filter(|f| f.name == COLLECTOR_SUCCESS.name) {
        f.samples.retain(|s| s.value == 0.0);
    }
}

impl Default for SelfMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn label_values(s: &crate::metrics::Sample) -> impl Iterator<Item = &String> {
    s.labels.iter().map(|(_, v)| v)
}

fn state_labels(index: u32, state: &str, uuid: &str) -> Labels {
    vec![
        ("gpu", index.to_string()),
        ("state", state.to_owned()),
        ("uuid", uuid.to_owned()),
    ]
}

/// A self-metric family as it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDoc {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub labels: Vec<String>,
}

/// Every self-metric family (`process_*` included) with every label key it
/// is served with (`node` first): what the docs and dashboard tests compare
/// docs/metrics.md and the panels with.
pub fn describe() -> Vec<FamilyDoc> {
    FAMILIES
        .iter()
        .map(|d| {
            let own = d.labels.iter().filter(|l| **l != "node");
            FamilyDoc {
                name: d.name.to_owned(),
                help: d.help.to_owned(),
                kind: d.kind,
                labels: std::iter::once("node")
                    .chain(own.copied())
                    .map(str::to_owned)
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::NoPods;
    use crate::metrics::encode::{Format, encode};

    fn one_gpu_recorded() -> SelfMetrics {
        let mut m = SelfMetrics::new();
        let run = |success| CollectorRun {
            duration_seconds: 0.25,
            success,
        };
        let stats = LoopStats {
            nvml_up: true,
            collections_total: 3,
            last_duration: 0.5,
            last_success_unix: 1.7e9,
            collectors: BTreeMap::from([("power", run(true)), ("info", run(false))]),
        };
        let errors = ErrorCounts::from([(("nvmlDeviceGetPowerUsage", "unknown"), 2)]);
        let state = GpuState {
            uuid: Some("GPU-a".into()),
            state: GpuHealth::Ok,
        };
        m.record(
            &stats,
            &errors,
            &BTreeMap::from([(10, state.clone()), (2, state)]),
        );
        m.record_inventory(&crate::inventory::View {
            expected: Some(3),
            file_ok: Some(true),
            missing: vec![crate::inventory::Missing {
                index: 1,
                uuid: "GPU-z".into(),
            }],
        });
        m
    }

    fn text(m: &mut SelfMetrics, format: Format) -> String {
        let families = m.gather();
        String::from_utf8(encode(&families, "n\"1", &NoPods, format)).expect("UTF-8")
    }

    /// What a registry with a `node` common label wrote: families by name,
    /// series by label values, label keys sorted, then `node`.
    #[test]
    fn series_are_in_registry_order_with_node_last() {
        let out = text(&mut one_gpu_recorded(), Format::Text);
        let own: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("gpuscale_exporter_"))
            .filter(|l| !l.starts_with("gpuscale_exporter_build_info"))
            .collect();
        let n = "node=\"n\\\"1\"";
        let expected = [
            format!("gpuscale_exporter_collection_duration_seconds{{{n}}} 0.5"),
            format!("gpuscale_exporter_collections_total{{{n}}} 3"),
            format!("gpuscale_exporter_collector_duration_seconds{{collector=\"info\",{n}}} 0.25"),
            format!("gpuscale_exporter_collector_duration_seconds{{collector=\"power\",{n}}} 0.25"),
            format!("gpuscale_exporter_collector_success{{collector=\"info\",{n}}} 0"),
            format!("gpuscale_exporter_collector_success{{collector=\"power\",{n}}} 1"),
            format!(
                "gpuscale_exporter_gpu_state{{gpu=\"1\",state=\"missing\",uuid=\"GPU-z\",{n}}} 1"
            ),
            format!(
                "gpuscale_exporter_gpu_state{{gpu=\"10\",state=\"error\",uuid=\"GPU-a\",{n}}} 0"
            ),
            format!(
                "gpuscale_exporter_gpu_state{{gpu=\"10\",state=\"lost\",uuid=\"GPU-a\",{n}}} 0"
            ),
            format!("gpuscale_exporter_gpu_state{{gpu=\"10\",state=\"ok\",uuid=\"GPU-a\",{n}}} 1"),
            format!(
                "gpuscale_exporter_gpu_state{{gpu=\"2\",state=\"error\",uuid=\"GPU-a\",{n}}} 0"
            ),
            format!("gpuscale_exporter_gpu_state{{gpu=\"2\",state=\"lost\",uuid=\"GPU-a\",{n}}} 0"),
            format!("gpuscale_exporter_gpu_state{{gpu=\"2\",state=\"ok\",uuid=\"GPU-a\",{n}}} 1"),
            format!("gpuscale_exporter_gpus{{{n}}} 2"),
            format!("gpuscale_exporter_gpus_expected{{{n}}} 3"),
            format!("gpuscale_exporter_last_collection_timestamp_seconds{{{n}}} 1700000000"),
            format!(
                "gpuscale_exporter_nvml_errors_total{{error=\"unknown\",function=\"nvmlDeviceGetPowerUsage\",{n}}} 2"
            ),
            format!("gpuscale_exporter_nvml_up{{{n}}} 1"),
            format!("gpuscale_exporter_state_file_ok{{{n}}} 1"),
        ];
        assert_eq!(own, expected);
        assert!(out.contains("\n# HELP gpuscale_exporter_gpu_state 1 for the GPU's current state"));
        assert!(out.contains("\n# TYPE gpuscale_exporter_nvml_errors_total counter\n"));
        let processes = out.find("\nprocess_").expect("process families");
        assert!(processes > out.rfind("\ngpuscale_exporter_").unwrap_or(0));
    }

    #[test]
    fn every_series_has_node_and_every_family_is_described() {
        let mut m = one_gpu_recorded();
        let families = m.gather();
        let served: Vec<&str> = families.iter().map(|f| f.name).collect();
        let described: Vec<&str> = FAMILIES.iter().map(|d| d.name).collect();
        for name in &described {
            assert!(served.contains(name), "{name} not served");
        }
        for f in &families {
            assert!(described.contains(&f.name), "{} not described", f.name);
            assert!(
                f.samples.iter().all(|s| s.subject == Subject::Node),
                "{}",
                f.name
            );
        }
        assert!(describe().iter().all(|d| d.labels[0] == "node"));
    }

    #[test]
    fn openmetrics_counters_drop_total_from_the_family_name() {
        let mut m = SelfMetrics::new();
        m.record(&LoopStats::default(), &ErrorCounts::new(), &BTreeMap::new());
        let out = text(&mut m, Format::OpenMetrics);
        assert!(out.contains("gpuscale_exporter_nvml_up{node=\"n\\\"1\"} 0\n"));
        assert!(
            !out.contains("gpuscale_exporter_gpus"),
            "NVML never up: {out}"
        );
        assert!(out.contains("# TYPE process_cpu_seconds counter\n"));
        assert!(out.contains("\nprocess_cpu_seconds_total{node="));
        let mut m = one_gpu_recorded();
        let out = text(&mut m, Format::OpenMetrics);
        assert!(out.contains("# TYPE gpuscale_exporter_collections counter\n"));
        assert!(out.contains("gpuscale_exporter_collections_total{node=\"n\\\"1\"} 3\n"));
    }
}
