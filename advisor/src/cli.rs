//! The command line (docs/right-sizing.md documents every flag).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// The environment variables the advisor reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GPUSCALE_PROMETHEUS_URL  the Prometheus base URL (--prometheus)
  RUST_LOG                 the log filter (--log-level)
  NO_COLOR                 no colour codes in the log (none either off a terminal)";

/// Output format.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Markdown,
}

/// Per workload: what limits it, what it costs per million tokens, and
/// which GPU, MIG slice or neighbour it should have.
#[derive(Parser)]
#[command(version, about, after_help = ENVIRONMENT)]
pub struct Cli {
    /// Prometheus (or Thanos, Mimir) base URL.
    #[arg(long, env = "GPUSCALE_PROMETHEUS_URL")]
    pub prometheus: String,
    /// History to read, back from --end (a duration: 7d, 36h).
    #[arg(long, default_value = "7d")]
    pub range: String,
    /// Sample step of the history (a duration: 5m).
    #[arg(long, default_value = "5m")]
    pub step: String,
    /// End of the range: RFC 3339 (2026-11-30T00:00:00Z) or Unix seconds
    /// (default: now).
    #[arg(long)]
    pub end: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Format,
    /// Spec-and-price table replacing the built-in one (same format).
    #[arg(long)]
    pub gpu_table: Option<PathBuf>,
    /// MIG profile table replacing the built-in one (same format).
    #[arg(long)]
    pub mig_table: Option<PathBuf>,
    /// Timeout of one Prometheus query (a duration: 120s, 5m).
    #[arg(long, default_value = "120s")]
    pub query_timeout: String,
    /// The tier of a namespace's workloads, NAMESPACE=TIER (repeatable);
    /// a pod's own gpuscale.dev/tier wins.
    #[arg(long = "tier", value_name = "NAMESPACE=TIER")]
    pub tiers: Vec<String>,
    /// Tier of a workload with none on its pods, in --tier or on its
    /// namespace.
    #[arg(long, default_value = "production")]
    pub default_tier: String,
    /// Let production workloads be time-sliced with each other (by default
    /// they share a GPU only as MIG instances).
    #[arg(long)]
    pub time_slice_production: bool,
    /// Log filter, e.g. warn, info, gpuscale_advisor=debug.
    #[arg(long, env = "RUST_LOG", default_value = "warn", value_parser = gpuscale_util::log::filter)]
    pub log_level: String,
}
