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

pub use crate::bins::repo_root;
