//! Command-line flags; each also reads a `GPUSCALE_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::collectors;
use crate::metrics::dcgm::{Exposition, Options};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Which metric names `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compat {
    /// The native `gpu_*` families only.
    Off,
    /// dcgm-exporter's `DCGM_FI_*` families beside the native ones.
    Dcgm,
    /// dcgm-exporter's families instead of the native ones.
    DcgmOnly,
}

/// The environment variables the exporter reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GPUSCALE_*          each flag but --node-name (shown with it, e.g. GPUSCALE_COLLECT_INTERVAL)
  GPUSCALE_LOG_LEVEL  the log filter (--log-level)
  NODE_NAME           this node's name (--node-name), from the downward API
  KUBECONFIG          the Kubernetes API without --kubeconfig, outside a cluster
  NO_COLOR            no colour codes in the log (none either off a terminal)";

#[derive(Debug, Parser)]
#[command(
    name = "gpuscale-exporter",
    version,
    about = "Prometheus exporter for NVIDIA GPUs, joined to Kubernetes pods",
    after_help = ENVIRONMENT
)]
pub struct Cli {
    /// Address to serve /metrics on [default: 0.0.0.0:9400; with
    /// --simulate 127.0.0.1:9400, a local try stays on loopback].
    #[arg(long, env = "GPUSCALE_LISTEN")]
    pub listen: Option<SocketAddr>,

    /// Time between collections (100ms to 1h), e.g. 5s, 500ms, 1m.
    #[arg(long, env = "GPUSCALE_COLLECT_INTERVAL", default_value = "5s", value_parser = parse_interval,
          allow_hyphen_values = true)]
    pub collect_interval: Duration,

    /// NVML library to load instead of the system's libnvidia-ml.so.1.
    #[arg(
        long,
        env = "GPUSCALE_NVML_LIB",
        value_name = "PATH",
        conflicts_with = "simulate"
    )]
    pub nvml_lib: Option<PathBuf>,

    /// Run on a simulated GPU node: the NVML simulator driven by SCENARIO
    /// (a YAML file), or the built-in 8-GPU node when no file is given.
    #[arg(long, env = "GPUSCALE_SIMULATE", value_name = "SCENARIO", num_args = 0..=1, default_missing_value = "")]
    pub simulate: Option<String>,

    /// Path of the NVML simulator library (default: found next to the executable).
    #[arg(long, env = "GPUSCALE_SIMULATOR_LIB", value_name = "PATH")]
    pub simulator_lib: Option<PathBuf>,

    /// DCGM host engine (nv-hostengine, HOST:PORT, port 5555 when left out)
    /// to read SM, tensor and DRAM activity from for GPUs without GPM;
    /// unset = no DCGM reader.
    #[arg(long, env = "GPUSCALE_DCGM_HOSTENGINE", value_name = "HOST:PORT")]
    pub dcgm_hostengine: Option<String>,

    /// DCGM library the reader loads (with --dcgm-hostengine); the exporter
    /// serves NVML without it when it cannot be loaded.
    #[arg(
        long,
        env = "GPUSCALE_DCGM_LIB",
        value_name = "PATH",
        default_value = "libdcgm.so.4"
    )]
    pub dcgm_lib: PathBuf,

    /// Collectors to run, comma-separated.
    #[arg(long, env = "GPUSCALE_COLLECTORS", value_delimiter = ',', default_values_t = collectors::names().map(str::to_string).collect::<Vec<_>>(), value_parser = clap::builder::PossibleValuesParser::new(collectors::names()))]
    pub collectors: Vec<String>,

    /// Collectors to switch off, comma-separated (applied after --collectors).
    #[arg(long, env = "GPUSCALE_DISABLE_COLLECTORS", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(collectors::names()))]
    pub disable_collectors: Vec<String>,

    /// One NVLink traffic series per link (18 per H100) instead of one per GPU.
    #[arg(long, env = "GPUSCALE_NVLINK_PER_LINK")]
    pub nvlink_per_link: bool,

    /// Series to serve: full (every series) or fleet (the label values rules
    /// and dashboards read; flags and error counters only while non-zero).
    #[arg(long, env = "GPUSCALE_PROFILE", value_enum, default_value = "full")]
    pub profile: collectors::profile::Profile,

    /// File that keeps each GPU's UUID, model and PCI bus ID across restarts,
    /// so a GPU lost from the bus keeps its identity and a node that comes
    /// up short is seen; empty = none. The DaemonSet puts it on a hostPath.
    #[arg(long, env = "GPUSCALE_STATE_FILE", value_name = "PATH")]
    pub state_file: Option<PathBuf>,

    /// Also (dcgm) or only (dcgm-only) serve dcgm-exporter's metric and label names.
    #[arg(long, env = "GPUSCALE_COMPAT", value_enum, default_value = "off")]
    pub compat: Compat,

    /// Host label of the dcgm-exporter families: Hostname (its releases) or hostname (its next).
    #[arg(long, env = "GPUSCALE_COMPAT_HOSTNAME_LABEL", default_value = "Hostname",
          value_parser = clap::builder::PossibleValuesParser::new(["Hostname", "hostname"]))]
    pub compat_hostname_label: String,

    /// Pod labels of the dcgm-exporter families in its old-namespace spelling: pod_name, pod_namespace, container_name.
    #[arg(long, env = "GPUSCALE_COMPAT_OLD_POD_LABELS")]
    pub compat_old_pod_labels: bool,

    /// Node name put in the `node` label (default: the host name).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// TLS and basic-auth settings, in the Prometheus exporter-toolkit web config format.
    #[arg(long, env = "GPUSCALE_WEB_CONFIG_FILE", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,

    /// Connections served at once; more wait in the listen backlog.
    #[arg(long, env = "GPUSCALE_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// Time a client has to send a complete request header, from connecting
    /// or from its previous response (so idle keep-alive connections close too).
    #[arg(long, env = "GPUSCALE_READ_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_interval,
          allow_hyphen_values = true)]
    pub read_header_timeout: Duration,

    /// Time a client has to complete the TLS handshake.
    #[arg(long, env = "GPUSCALE_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_interval,
          allow_hyphen_values = true)]
    pub tls_handshake_timeout: Duration,

    /// Once a write blocks, time a client has to take the responses it asked
    /// for; a client that does not read is closed after it.
    #[arg(long, env = "GPUSCALE_WRITE_TIMEOUT", default_value = "5s", value_parser = parse_interval,
          allow_hyphen_values = true)]
    pub write_timeout: Duration,

    /// Requests answered from one read of a client's bytes (pipelined); the
    /// next gets 429 and the connection closes.
    #[arg(long, env = "GPUSCALE_MAX_PIPELINED_REQUESTS", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_pipelined_requests: u64,

    /// Time a request may wait for its turn of the password checker
    /// (basic auth); after it, 503.
    #[arg(long, env = "GPUSCALE_AUTH_QUEUE_TIMEOUT", default_value = "5s", value_parser = parse_interval,
          allow_hyphen_values = true)]
    pub auth_queue_timeout: Duration,

    /// Threads serving HTTP and the pod mapping (1-64); collection has its own.
    #[arg(long, env = "GPUSCALE_WORKER_THREADS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub worker_threads: u16,

    /// Log format.
    #[arg(long, env = "GPUSCALE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log filter, e.g. info, debug, gpuscale_exporter=debug.
    #[arg(long, env = "GPUSCALE_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    #[command(flatten)]
    pub pods: crate::pods::PodArgs,
}

impl Cli {
    pub fn limits(&self) -> crate::server::accept::Limits {
        crate::server::accept::Limits {
            max_connections: self.max_connections as usize,
            read_header_timeout: self.read_header_timeout,
            tls_handshake_timeout: self.tls_handshake_timeout,
            write_timeout: self.write_timeout,
            max_pipelined: self.max_pipelined_requests,
            auth_queue_timeout: self.auth_queue_timeout,
        }
    }

    pub fn enabled_collectors(&self) -> Vec<String> {
        self.collectors
            .iter()
            .filter(|c| !self.disable_collectors.contains(c))
            .cloned()
            .collect()
    }

    /// The families to serve, from `--compat` and its options.
    /// `--state-file`, unless empty.
    pub fn state_file(&self) -> Option<PathBuf> {
        self.state_file
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
    }

    pub fn exposition(&self) -> Exposition {
        let dcgm = Options {
            hostname_label: if self.compat_hostname_label == "hostname" {
                "hostname"
            } else {
                "Hostname"
            },
            old_pod_labels: self.compat_old_pod_labels,
        };
        Exposition {
            native: self.compat != Compat::DcgmOnly,
            dcgm: (self.compat != Compat::Off).then_some(dcgm),
        }
    }
}

/// `--collect-interval` and the connection timeouts: 100ms to 1h.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s, Duration::from_millis(100), Duration::from_secs(3600))
}

impl Cli {
    /// `--listen`, or the default: every interface on a node (the
    /// DaemonSet), loopback for a simulated node.
    pub fn listen_addr(&self) -> SocketAddr {
        let ip = if self.simulate.is_some() {
            std::net::Ipv4Addr::LOCALHOST
        } else {
            std::net::Ipv4Addr::UNSPECIFIED
        };
        self.listen.unwrap_or(SocketAddr::from((ip, 9400)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_interval("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(
            parse_interval("50ms")
                .unwrap_err()
                .contains("between 100ms and 1h")
        );
        assert!(parse_interval("5").unwrap_err().contains("no unit"));
        assert!(parse_interval("5x").unwrap_err().contains("unknown unit"));
        // `d` is a unit (Prometheus's), and a day is past this range.
        assert!(parse_interval("1d").unwrap_err().contains("between"));
    }
}
