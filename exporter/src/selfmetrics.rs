//! The exporter's own health: build, NVML state, collector timings, errors,
//! and the process's footprint, kept in a `prometheus` registry.
//!
//! The GPU families do not go through the registry: they are rebuilt whole
//! each cycle and pre-encoded in both formats (docs/architecture.md). The
//! registry's families are gathered once per cycle and appended to those
//! bytes by [`write`], in the same format.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use tracing::error;

use crate::metrics::encode::{Format, escape_help, escape_value, write_value};
use crate::metrics::{Desc, Family, Kind, Subject};

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

/// Every family of the exporter's own health.
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
];

/// NVML call failures, by (function, error kind): cumulative counts.
pub type ErrorCounts = BTreeMap<(&'static str, &'static str), u64>;

/// The self-metric families, registered from their descriptors in a
/// registry of their own whose `node` label goes on every series (process
/// metrics included).
pub struct SelfMetrics {
    registry: Registry,
    nvml_up: IntGaugeVec,
    gpus: IntGaugeVec,
    gpu_state: IntGaugeVec,
    collector_duration: GaugeVec,
    collector_success: IntGaugeVec,
    collection_duration: GaugeVec,
    collections: IntCounterVec,
    last_collection: GaugeVec,
    nvml_errors: IntCounterVec,
    gpus_expected: IntGaugeVec,
    state_file_ok: IntGaugeVec,
    /// `--profile fleet`: only the state each GPU is in, not its 0 states.
    current_state_only: bool,
}

/// Registration fails only on a duplicate or malformed name, fixed in code:
/// a test builds the registry.
fn register<C: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: C) -> C {
    if let Err(e) = r.register(Box::new(c.clone())) {
        error!(error = %e, "self-metric not registered");
    }
    c
}

/// The descriptor's options and label keys; `node` is the registry's own.
fn opts(d: &Desc) -> (Opts, Vec<&'static str>) {
    let labels = d.labels.iter().copied().filter(|l| *l != "node");
    (Opts::new(d.name, d.help), labels.collect())
}

fn gauge(r: &Registry, d: &Desc) -> GaugeVec {
    let (o, labels) = opts(d);
    register(r, GaugeVec::new(o, &labels).expect("valid self-metric"))
}

fn int_gauge(r: &Registry, d: &Desc) -> IntGaugeVec {
    let (o, labels) = opts(d);
    register(r, IntGaugeVec::new(o, &labels).expect("valid self-metric"))
}

fn counter(r: &Registry, d: &Desc) -> IntCounterVec {
    let (o, labels) = opts(d);
    register(
        r,
        IntCounterVec::new(o, &labels).expect("valid self-metric"),
    )
}

const NONE: &[&str] = &[];

impl SelfMetrics {
    pub fn new(node: &str) -> Self {
        let labels = HashMap::from([("node".to_string(), node.to_string())]);
        let r = Registry::new_custom(None, Some(labels)).unwrap_or_default();
        int_gauge(&r, &BUILD_INFO)
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                option_env!("GPUSCALE_REVISION").unwrap_or("unknown"),
                option_env!("GPUSCALE_RUSTC_VERSION").unwrap_or("unknown"),
            ])
            .set(1);
        #[cfg(target_os = "linux")]
        if let Err(e) = r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )) {
            error!(error = %e, "process metrics not registered");
        }
        Self {
            nvml_up: int_gauge(&r, &NVML_UP),
            gpus: int_gauge(&r, &GPUS),
            gpu_state: int_gauge(&r, &GPU_STATE),
            collector_duration: gauge(&r, &COLLECTOR_DURATION),
            collector_success: int_gauge(&r, &COLLECTOR_SUCCESS),
            collection_duration: gauge(&r, &COLLECTION_DURATION),
            collections: counter(&r, &COLLECTIONS),
            last_collection: gauge(&r, &LAST_COLLECTION),
            nvml_errors: counter(&r, &NVML_ERRORS),
            gpus_expected: int_gauge(&r, &GPUS_EXPECTED),
            state_file_ok: int_gauge(&r, &STATE_FILE_OK),
            registry: r,
            current_state_only: false,
        }
    }

    /// Serves the GPU state families as `profile` asks.
    #[must_use]
    pub fn with_profile(mut self, profile: crate::collectors::profile::Profile) -> Self {
        self.current_state_only = profile == crate::collectors::profile::Profile::Fleet;
        self
    }

    /// Brings the registry up to the loop's state. Before the first
    /// collection with NVML down only build and `nvml_up` are served.
    pub fn record(&self, stats: &LoopStats, errors: &ErrorCounts, gpus: &BTreeMap<u32, GpuState>) {
        self.nvml_up
            .with_label_values(NONE)
            .set(stats.nvml_up.into());
        if !stats.nvml_up && stats.collections_total == 0 {
            return;
        }
        self.gpus.with_label_values(NONE).set(gpus.len() as i64);
        // A GPU that left the node leaves no stale series.
        self.gpu_state.reset();
        for (index, s) in gpus {
            let (gpu, uuid) = (index.to_string(), s.uuid.as_deref().unwrap_or(""));
            for health in GpuHealth::ALL {
                if self.current_state_only && s.state != health {
                    continue;
                }
                let labels = [gpu.as_str(), uuid, health.as_str()];
                let g = self.gpu_state.with_label_values(&labels);
                g.set((s.state == health).into());
            }
        }
        for (name, run) in &stats.collectors {
            let d = self.collector_duration.with_label_values(&[name]);
            d.set(run.duration_seconds);
            let ok = self.collector_success.with_label_values(&[name]);
            ok.set(run.success.into());
        }
        self.collection_duration
            .with_label_values(NONE)
            .set(stats.last_duration);
        catch_up(&self.collections, NONE, stats.collections_total);
        if stats.last_success_unix > 0.0 {
            let last = self.last_collection.with_label_values(NONE);
            last.set(stats.last_success_unix);
        }
        for ((function, kind), n) in errors {
            catch_up(&self.nvml_errors, &[function, kind], *n);
        }
    }

    /// The state file's view, after [`Self::record`] (which clears the GPU
    /// states): GPUs it remembers that NVML no longer reports are `missing`.
    pub fn record_inventory(&self, view: &crate::inventory::View) {
        if let Some(n) = view.expected {
            self.gpus_expected.with_label_values(NONE).set(n as i64);
        }
        if let Some(ok) = view.file_ok {
            self.state_file_ok.with_label_values(NONE).set(ok.into());
        }
        for m in &view.missing {
            let labels = [m.index.to_string(), m.uuid.to_string(), "missing".into()];
            self.gpu_state.with_label_values(&labels).set(1);
        }
    }

    pub fn gather(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }
}

/// Moves a counter up to a cumulative total kept by the loop.
fn catch_up(c: &IntCounterVec, labels: &[&str], total: u64) {
    let c = c.with_label_values(labels);
    c.inc_by(total.saturating_sub(c.get()));
}

/// A self-metric family as the registry serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyDoc {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub labels: Vec<String>,
}

/// Every self-metric family (`process_*` included), read from a fresh
/// registry where each one has a series: what the docs and dashboard tests
/// compare docs/metrics.md and the panels with.
pub fn describe() -> Vec<FamilyDoc> {
    let m = SelfMetrics::new("node");
    let run = CollectorRun {
        duration_seconds: 0.1,
        success: true,
    };
    let stats = LoopStats {
        nvml_up: true,
        collections_total: 1,
        last_duration: 0.1,
        last_success_unix: 1.0,
        collectors: BTreeMap::from([("power", run)]),
    };
    let errors = ErrorCounts::from([(("nvmlDeviceGetPowerUsage", "unknown"), 1)]);
    let state = GpuState {
        uuid: None,
        state: GpuHealth::Ok,
    };
    m.record(&stats, &errors, &BTreeMap::from([(0, state)]));
    m.record_inventory(&crate::inventory::View {
        expected: Some(1),
        file_ok: Some(true),
        missing: Vec::new(),
    });
    m.gather().iter().map(family_doc).collect()
}

fn family_doc(f: &MetricFamily) -> FamilyDoc {
    let labels = f.get_metric().first().map(|m| m.get_label());
    FamilyDoc {
        name: f.name().to_string(),
        help: f.help().to_string(),
        kind: match f.get_field_type() {
            MetricType::COUNTER => Kind::Counter,
            _ => Kind::Gauge,
        },
        labels: labels
            .unwrap_or_default()
            .iter()
            .map(|l| l.name().to_string())
            .collect(),
    }
}

/// Appends gathered families to an exposition in `format`. The registry
/// holds gauges and counters only.
pub fn write(out: &mut String, families: &[MetricFamily], format: Format) {
    for f in families {
        let kind = match f.get_field_type() {
            MetricType::COUNTER => "counter",
            MetricType::GAUGE => "gauge",
            other => {
                error!(family = f.name(), kind = ?other, "self-metric type not encoded");
                continue;
            }
        };
        let name = f.name();
        // OpenMetrics names a counter family without its `_total` suffix.
        let family = match (format, kind) {
            (Format::OpenMetrics, "counter") => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        out.push_str("# HELP ");
        out.push_str(family);
        out.push(' ');
        escape_help(out, f.help());
        out.push_str(&format!("\n# TYPE {family} {kind}\n"));
        for m in f.get_metric() {
            out.push_str(name);
            for (i, l) in m.get_label().iter().enumerate() {
                out.push(if i == 0 { '{' } else { ',' });
                out.push_str(l.name());
                out.push_str("=\"");
                escape_value(out, l.value());
                out.push('"');
            }
            if !m.get_label().is_empty() {
                out.push('}');
            }
            out.push(' ');
            let v = match kind {
                "counter" => m.get_counter().get_value(),
                _ => m.get_gauge().get_value(),
            };
            write_value(out, v);
            out.push('\n');
        }
    }
}

/// Adds `node` to the exporter's own series (health, pod mapping) that lack
/// it, so an alert on them names the node, not a pod IP, and node-filtered
/// dashboard panels can select them.
pub fn label_node(families: &mut [Family], node: &str) {
    let own = families
        .iter_mut()
        .filter(|f| f.name.starts_with("gpuscale_exporter_"));
    for f in own {
        for s in &mut f.samples {
            if matches!(s.subject, Subject::Global) && !s.labels.iter().any(|(k, _)| *k == "node") {
                s.labels.push(("node", node.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_node_and_process_metrics_are_there() {
        let docs = describe();
        assert!(docs.iter().all(|d| d.labels.iter().any(|l| l == "node")));
        for name in [
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(docs.iter().any(|d| d.name == name), "{name}");
        }
    }

    #[test]
    fn the_registry_serves_exactly_the_descriptors() {
        let served: Vec<(String, Kind)> = describe()
            .into_iter()
            .filter(|d| d.name.starts_with("gpuscale_exporter_"))
            .map(|d| (d.name, d.kind))
            .collect();
        let mut described: Vec<(String, Kind)> = FAMILIES
            .iter()
            .map(|d| (d.name.to_string(), d.kind))
            .collect();
        described.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(served, described);
    }

    #[test]
    fn openmetrics_counters_drop_total_from_the_family_name() {
        let m = SelfMetrics::new("n\"1");
        m.record(&LoopStats::default(), &ErrorCounts::new(), &BTreeMap::new());
        m.collections.with_label_values(NONE).inc();
        let mut out = String::new();
        write(&mut out, &m.gather(), Format::OpenMetrics);
        assert!(out.contains("# TYPE gpuscale_exporter_collections counter\n"));
        assert!(out.contains("gpuscale_exporter_collections_total{node=\"n\\\"1\"} 1\n"));
        assert!(out.contains("gpuscale_exporter_nvml_up{node=\"n\\\"1\"} 0\n"));
    }
}
