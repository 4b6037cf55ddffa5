//! The exporter's own health: build, NVML state, collector timings, errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metrics::{Family, Subject};
use crate::nvml::Reader;

#[derive(Debug, Default)]
pub struct LoopStats {
    pub nvml_up: bool,
    pub collections_total: u64,
    pub last_duration: f64,
    pub last_success_unix: f64,
    /// Per collector: duration of the last run (seconds) and whether it succeeded.
    pub collectors: BTreeMap<&'static str, (f64, bool)>,
}

#[derive(Debug, Clone)]
pub struct GpuState {
    pub uuid: Option<Arc<str>>,
    pub state: &'static str,
}

const STATES: [&str; 3] = ["ok", "lost", "error"];

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

pub fn families(
    stats: &LoopStats,
    reader: &Reader,
    gpus: &BTreeMap<u32, GpuState>,
    node: &str,
) -> Vec<Family> {
    let g = Subject::Global;
    let build = Family::gauge(
        "gpuscale_exporter_build_info",
        "Build of the exporter; the value is always 1.",
    )
    .with(
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
    let up = Family::gauge(
        "gpuscale_exporter_nvml_up",
        "1 while NVML is initialised and answering, else 0.",
    )
    .with(g.clone(), vec![], flag(stats.nvml_up));
    let mut out = vec![build, up];
    if !stats.nvml_up && stats.collections_total == 0 {
        return out;
    }
    out.push(
        Family::gauge("gpuscale_exporter_gpus", "GPUs NVML reports on this node.").with(
            g.clone(),
            vec![("node", node.to_string())],
            gpus.len() as f64,
        ),
    );
    let mut state = Family::gauge(
        "gpuscale_exporter_gpu_state",
        "1 for the GPU's current state (ok, lost, error).",
    );
    for (index, s) in gpus {
        for name in STATES {
            state.push(
                g.clone(),
                vec![
                    ("node", node.to_string()),
                    ("gpu", index.to_string()),
                    ("uuid", s.uuid.as_deref().unwrap_or("").to_string()),
                    ("state", name.to_string()),
                ],
                flag(s.state == name),
            );
        }
    }
    out.push(state);
    let mut dur = Family::gauge(
        "gpuscale_exporter_collector_duration_seconds",
        "Duration of the collector's last run.",
    );
    let mut ok = Family::gauge(
        "gpuscale_exporter_collector_success",
        "1 when the collector's last run had no error.",
    );
    for (name, (d, success)) in &stats.collectors {
        dur.push(g.clone(), vec![("collector", name.to_string())], *d);
        ok.push(
            g.clone(),
            vec![("collector", name.to_string())],
            flag(*success),
        );
    }
    out.extend([dur, ok]);
    out.push(
        Family::gauge(
            "gpuscale_exporter_collection_duration_seconds",
            "Duration of the last whole collection cycle.",
        )
        .with(g.clone(), vec![], stats.last_duration),
    );
    out.push(
        Family::counter(
            "gpuscale_exporter_collections_total",
            "Collection cycles run.",
        )
        .with(g.clone(), vec![], stats.collections_total as f64),
    );
    if stats.last_success_unix > 0.0 {
        out.push(
            Family::gauge(
                "gpuscale_exporter_last_collection_timestamp_seconds",
                "Unix time of the last successful collection.",
            )
            .with(g.clone(), vec![], stats.last_success_unix),
        );
    }
    let mut errors = Family::counter(
        "gpuscale_exporter_nvml_errors_total",
        "NVML calls that failed, by function and error kind.",
    );
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
