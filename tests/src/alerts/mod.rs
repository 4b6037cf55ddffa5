//! Helpers of the alerts, recording rules and dashboards tests
//! (`tests/tests/alerts.rs`, and gpuscale-lint's static
//! `alerts_and_dashboards`): the rule files and their test-only copy with
//! shortened durations, a PromQL metric-name scanner, the Grafana dashboards'
//! queries, real Prometheus and Alertmanager processes, and a tiny HTTP
//! server for the Alertmanager webhook and for fake scrape targets.

pub mod dashboards;
pub mod http;
pub mod procs;
pub mod promql;
pub mod rules;
pub mod stack;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}
