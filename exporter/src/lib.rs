//! gpuscale-exporter: NVML metrics of every GPU, joined to the pods that hold them.

pub mod backoff;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod collect;
pub mod collectors;
pub mod dcgm;
pub mod duration;
pub mod inventory;
pub mod logging;
pub mod metrics;
pub mod node;
pub mod nvml;
pub mod pods;
pub mod selfmetrics;
pub mod server;
pub mod simulate;
pub mod snapshot;
