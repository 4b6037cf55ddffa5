//! The exporter's own health: build, NVML state, collector timings, errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metrics::{Desc, Family, Subject, flag};
use crate::nvml::Reader;

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
    "1 for the GPU's current state (ok, lost, error).",
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
];

pub fn families(
    stats: &LoopStats,
    reader: &Reader,
    gpus: &BTreeMap<u32, GpuState>,
    node: &str,
) -> Vec<Family> {
    let g = Subject::Global;
    let build = Family::of(&BUILD_INFO).with(
        g.clone(),
        vec![
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            (
                "revision",
                option_env!("GPUSCALE_REVISION")
                    .unwrap_or("unknown")
                    .to_string(),
            ),
            (
                "rustc_version",
                option_env!("GPUSCALE_RUSTC_VERSION")
                    .unwrap_or("unknown")
                    .to_string(),
            ),
        ],
        1.0,
    );
    let up = Family::of(&NVML_UP).with(g.clone(), vec![], flag(stats.nvml_up));
    let mut out = vec![build, up];
    if !stats.nvml_up && stats.collections_total == 0 {
        return out;
    }
    out.push(Family::of(&GPUS).with(
        g.clone(),
        vec![("node", node.to_string())],
        gpus.len() as f64,
    ));
    let mut state = Family::of(&GPU_STATE);
    for (index, s) in gpus {
        for health in GpuHealth::ALL {
            state.push(
                g.clone(),
                vec![
                    ("node", node.to_string()),
                    ("gpu", index.to_string()),
                    ("uuid", s.uuid.as_deref().unwrap_or("").to_string()),
                    ("state", health.as_str().to_string()),
                ],
                flag(s.state == health),
            );
        }
    }
    out.push(state);
    let mut dur = Family::of(&COLLECTOR_DURATION);
    let mut ok = Family::of(&COLLECTOR_SUCCESS);
    for (name, run) in &stats.collectors {
        let labels = vec![("collector", name.to_string())];
        dur.push(g.clone(), labels.clone(), run.duration_seconds);
        ok.push(g.clone(), labels, flag(run.success));
    }
    out.extend([dur, ok]);
    out.push(Family::of(&COLLECTION_DURATION).with(g.clone(), vec![], stats.last_duration));
    out.push(Family::of(&COLLECTIONS).with(g.clone(), vec![], stats.collections_total as f64));
    if stats.last_success_unix > 0.0 {
        let last = Family::of(&LAST_COLLECTION).with(g.clone(), vec![], stats.last_success_unix);
        out.push(last);
    }
    let mut errors = Family::of(&NVML_ERRORS);
    for ((function, kind), n) in reader.errors() {
        errors.push(
            g.clone(),
            vec![
                ("function", function.to_string()),
                ("error", kind.to_string()),
            ],
            *n as f64,
        );
    }
    out.push(errors);
    out
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
