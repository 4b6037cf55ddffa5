//! gpuscale-exporter: NVML metrics of every GPU, joined to the pods that hold them.

pub mod metrics;
