//! The command line (every flag documented in docs/top.md).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "gpuscale-top",
    version,
    about = "GPUs and the pods that hold them, from an exporter's /metrics or a Prometheus",
    after_help = ENVIRONMENT
)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["exporter", "prometheus"])))]
pub struct Cli {
    /// An exporter's URL (`/metrics` is appended unless given): one node.
    #[arg(long, value_name = "URL")]
    pub exporter: Option<String>,

    /// A Prometheus or VictoriaMetrics base URL: every node it scrapes.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// Only this node's GPUs.
    #[arg(long)]
    pub node: Option<String>,

    /// Only the GPUs of nodes in this node pool (`gpu_node_info`'s `node_pool`).
    #[arg(long)]
    pub node_pool: Option<String>,

    /// Only GPUs held by pods of this namespace, and its workloads.
    #[arg(long)]
    pub namespace: Option<String>,

    /// Basic-auth user name (the exporter's `basic_auth_users`, or a Prometheus behind a proxy).
    #[arg(long, requires = "password_file")]
    pub username: Option<String>,

    /// File holding the basic-auth password (a trailing newline is dropped).
    #[arg(long, value_name = "PATH", requires = "username")]
    pub password_file: Option<PathBuf>,

    /// PEM file of the CA that signed the source's certificate (`https://`);
    /// default: the system's trust store.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,

    /// PEM client certificate, for an exporter that verifies its clients.
    #[arg(long, value_name = "PATH", requires = "key_file")]
    pub cert_file: Option<PathBuf>,

    /// PEM private key of `--cert-file`.
    #[arg(long, value_name = "PATH", requires = "cert_file")]
    pub key_file: Option<PathBuf>,

    /// Do not check the source's certificate (a port-forward to a pod whose
    /// certificate names its Service): encrypted, but not authenticated.
    #[arg(long)]
    pub insecure_skip_verify: bool,

    /// Time between refreshes (500ms to 1h), with a unit: 2s, 1m.
    #[arg(long, default_value = "2s", value_parser = interval)]
    pub interval: Duration,

    /// Time a read of the source may take, with a unit.
    #[arg(long, default_value = "5s", value_parser = timeout)]
    pub timeout: Duration,

    /// Print one snapshot and exit (non-zero when the source cannot be read).
    #[arg(long)]
    pub once: bool,

    /// Output of `--once`: text or json.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,

    /// Log filter, e.g. warn, info, gpuscale_top=debug.
    #[arg(long, env = "RUST_LOG", default_value = "warn", value_parser = gpuscale_util::log::filter)]
    pub log_level: String,
}

/// The environment variables top reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  RUST_LOG  the log filter (--log-level)
  NO_COLOR  no colours in the view";

#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

fn interval(s: &str) -> Result<Duration, String> {
    gpuscale_util::duration::parse_within(s, Duration::from_millis(500), Duration::from_secs(3600))
        .map_err(|e| e.to_string())
}

fn timeout(s: &str) -> Result<Duration, String> {
    gpuscale_util::duration::parse_within(s, Duration::from_millis(100), Duration::from_secs(600))
        .map_err(|e| e.to_string())
}
