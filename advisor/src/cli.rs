//! The command line (docs/right-sizing.md documents every flag).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Output format.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Per workload: what limits it, what it costs per million tokens, and
/// which GPU, MIG slice or neighbour it should have.
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    /// Prometheus (or Thanos, Mimir) base URL.
    #[arg(long, env = "GPUSCALE_PROMETHEUS_URL")]
    pub prometheus: String,
    /// History to read, back from --end (PromQL duration).
    #[arg(long, default_value = "7d")]
    pub range: String,
    /// Sample step of the history (PromQL duration).
    #[arg(long, default_value = "5m")]
    pub step: String,
    /// End of the range, Unix seconds (default: now).
    #[arg(long)]
    pub end: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub output: Format,
    /// Spec-and-price table replacing the built-in one (same format).
    #[arg(long)]
    pub gpu_table: Option<PathBuf>,
    /// MIG profile table replacing the built-in one (same format).
    #[arg(long)]
    pub mig_table: Option<PathBuf>,
    /// Timeout of one Prometheus query, seconds.
    #[arg(long, default_value_t = 120)]
    pub query_timeout: u64,
}
