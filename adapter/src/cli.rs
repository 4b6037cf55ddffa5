//! Command-line flags (documented in docs/adapter.md; a test keeps the two
//! in step).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

fn duration(s: &str) -> Result<Duration, String> {
    gpuscale_util::duration::parse(s).map_err(|e| e.to_string())
}

fn budget(s: &str) -> Result<f64, String> {
    let min = crate::prometheus::cache::MIN_BUDGET;
    match s.parse::<f64>() {
        Ok(v) if v == 0.0 || (v.is_finite() && v >= min) => Ok(v),
        _ => Err(format!(
            "invalid query budget {s:?} (queries per second, at least {min}; 0 turns the budget off)"
        )),
    }
}

/// A size in bytes: a whole number, optionally with Ki, Mi or Gi.
fn bytes(s: &str) -> Result<usize, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => s.split_at(at),
        None => (s, ""),
    };
    let scale: usize = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => 0,
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n >= 1 << 20)
        .ok_or_else(|| format!("invalid size {s:?} (bytes, or with Ki, Mi, Gi; at least 1Mi)"))
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Kubernetes external-metrics API server for GPU inference workloads.
#[derive(Debug, Clone, Parser)]
#[command(name = "gpuscale-adapter", version, after_help = ENVIRONMENT)]
pub struct Args {
    /// What to do; `serve` when none is given.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Address of the HTTPS API.
    #[arg(long, global = true, default_value = "0.0.0.0:6443")]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP self-metrics endpoint (/metrics).
    #[arg(long, global = true, default_value = "0.0.0.0:9102")]
    pub metrics_listen: SocketAddr,
    /// Serving certificate (PEM); reloaded when the file changes. `serve` needs it with --tls-key-file, or --self-signed-tls-secret, or --dev.
    #[arg(long, global = true, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM); reloaded when the file changes.
    #[arg(long, global = true, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub self_signed_tls: crate::tls::self_managed::Flags,
    /// How often the certificate files (or the --self-signed-tls-secret Secret) are checked for changes.
    #[arg(long, global = true, default_value = "10s", value_parser = duration)]
    pub tls_reload_interval: Duration,
    /// Development mode: self-signed certificate, NO authentication or authorization, binds 127.0.0.1 only.
    #[arg(long, global = true)]
    pub dev: bool,
    /// Metrics config file (YAML); without it the built-in presets are served.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Deprecated: `gpuscale-adapter check-config`.
    #[arg(long, global = true, hide = true)]
    pub check_config: bool,
    /// Deprecated: `gpuscale-adapter check-prometheus`.
    #[arg(long, global = true, hide = true)]
    pub check_prometheus: bool,
    /// Deprecated: `gpuscale-adapter wake-parked`.
    #[arg(long, global = true, hide = true)]
    pub wake_parked: bool,
    /// Deprecated: `gpuscale-adapter doctor`.
    #[arg(long, global = true, hide = true)]
    pub doctor: bool,
    /// The namespace gpuscale is to be installed in, for `doctor`.
    #[arg(long, global = true, default_value = "gpuscale")]
    pub doctor_namespace: String,
    /// `doctor`'s report format.
    #[arg(short = 'o', long, global = true, value_enum, default_value = "text")]
    pub output: crate::doctor::Output,
    /// Prometheus-compatible base URL (Prometheus, Thanos, Mimir with its path prefix).
    #[arg(long, global = true, default_value = "http://127.0.0.1:9090")]
    pub prometheus_url: String,
    /// File holding a bearer token for Prometheus; re-read for every query.
    #[arg(long, global = true)]
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// CA bundle (PEM) to verify an https Prometheus URL.
    #[arg(long, global = true)]
    pub prometheus_ca_file: Option<PathBuf>,
    /// Extra header for Prometheus queries, `Name: value` (repeatable), e.g. `X-Scope-OrgID: team-a`.
    #[arg(long, global = true)]
    pub prometheus_header: Vec<String>,
    /// Timeout of one Prometheus query.
    #[arg(long, global = true, default_value = "5s", value_parser = duration)]
    pub prometheus_timeout: Duration,
    /// Prometheus queries in flight at once.
    #[arg(long, global = true, default_value_t = 8)]
    pub prometheus_max_concurrency: usize,
    /// How often each recently requested (metric, namespace, selector) is re-read.
    #[arg(long, global = true, default_value = "5s", value_parser = duration)]
    pub poll_interval: Duration,
    /// A (metric, namespace, selector) not requested for this long stops being polled.
    #[arg(long, global = true, default_value = "10m", value_parser = duration)]
    pub idle_expiry: Duration,
    /// Keys (metric, namespace, selector) the poll cache holds at most; a new one beyond gets 503.
    #[arg(long, global = true, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_cached_queries: u32,
    /// Bytes the poll cache holds at most (keys and values, estimated); a new key beyond gets 503.
    #[arg(long, global = true, default_value = "64Mi", value_parser = bytes)]
    pub max_cached_bytes: usize,
    /// Re-reads per second sent to Prometheus at most; with more keys the poll interval stretches (0: no budget).
    #[arg(long, global = true, default_value_t = 500.0, value_parser = budget)]
    pub prometheus_query_budget: f64,
    /// Keys the poll cache re-reads in one Prometheus request at most (1: each alone).
    #[arg(long, global = true, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub prometheus_batch_size: u32,
    /// Connections served at once on each listener; more wait in the backlog.
    #[arg(long, global = true, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// A connection with no request in flight for this long is closed
    /// (HTTP/2: GOAWAY), on the API and the metrics port.
    #[arg(long, global = true, default_value = "90s", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Time a client has to finish the TLS handshake.
    #[arg(long, global = true, default_value = "10s", value_parser = duration)]
    pub tls_handshake_timeout: Duration,
    /// Run the scale-to-zero controller (ScaleToZeroPolicy resources): park idle targets at 0, wake them on activation.
    #[arg(long, global = true)]
    pub scale_to_zero: bool,
    /// Namespace of the controller's leader Lease (default: the pod's namespace, env POD_NAMESPACE).
    #[arg(long, global = true, env = "POD_NAMESPACE")]
    pub scale_to_zero_lease_namespace: Option<String>,
    /// Name of the controller's leader Lease.
    #[arg(long, global = true, default_value = "gpuscale-scale-to-zero")]
    pub scale_to_zero_lease_name: String,
    /// This replica's identity in the Lease (default: the pod name).
    #[arg(long, global = true, env = "POD_NAME")]
    pub scale_to_zero_identity: Option<String>,
    /// A Lease holder that has not renewed for this long loses it.
    #[arg(long, global = true, default_value = "15s", value_parser = duration)]
    pub scale_to_zero_lease_duration: Duration,
    /// A leader that has not renewed the Lease for this long stops acting (shorter than the lease duration; default 2/3 of it).
    #[arg(long, global = true, value_parser = duration)]
    pub scale_to_zero_lease_renew_deadline: Option<Duration>,
    /// How often the Lease is renewed or tried (shorter than the renew deadline; default 2/15 of the lease duration).
    #[arg(long, global = true, value_parser = duration)]
    pub scale_to_zero_lease_retry_period: Option<Duration>,
    /// How often parked targets' activation is checked (from the poll cache).
    #[arg(long, global = true, default_value = "2s", value_parser = duration)]
    pub scale_to_zero_wake_interval: Duration,
    /// How often running targets' idle windows are advanced.
    #[arg(long, global = true, default_value = "10s", value_parser = duration)]
    pub scale_to_zero_check_interval: Duration,
    /// How long a round that changes nothing trusts the target as last read (parks, wakes and Waking targets read it afresh).
    #[arg(long, global = true, default_value = "2m", value_parser = duration)]
    pub scale_to_zero_resync_interval: Duration,
    /// Let ScaleToZeroPolicies give a PromQL `query` instead of a configured metric (it can read any namespace).
    #[arg(long, global = true)]
    pub scale_to_zero_allow_queries: bool,
    /// Most policies reconciled at once (each round's API calls hold one connection).
    #[arg(long, global = true, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub scale_to_zero_concurrency: u16,
    /// Kubeconfig for the Kubernetes API (default: in-cluster config or $KUBECONFIG).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// CA for client certificates (instead of client-ca-file from the extension-apiserver-authentication ConfigMap).
    #[arg(long, global = true)]
    pub client_ca_file: Option<PathBuf>,
    /// CA of the front proxy (instead of requestheader-client-ca-file from the ConfigMap).
    #[arg(long, global = true)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names allowed to send X-Remote-* headers (comma-separated; empty allows any name signed by the CA).
    #[arg(long, global = true, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers holding the user name.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "X-Remote-User"
    )]
    pub requestheader_username_headers: Vec<String>,
    /// Headers holding the groups.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "X-Remote-Group"
    )]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers holding extra user attributes.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "X-Remote-Extra-"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// How often the extension-apiserver-authentication ConfigMap is re-read (CA rotation).
    #[arg(long, global = true, default_value = "1m", value_parser = duration)]
    pub authentication_config_refresh: Duration,
    /// How long TokenReview results are cached.
    #[arg(long, global = true, default_value = "10s", value_parser = duration)]
    pub authentication_cache_ttl: Duration,
    /// How long SubjectAccessReview results are cached.
    #[arg(long, global = true, default_value = "10s", value_parser = duration)]
    pub authorization_cache_ttl: Duration,
    /// Address of the KEDA external-scaler gRPC listener (off unless set).
    #[arg(long, global = true)]
    pub keda_listen: Option<SocketAddr>,
    /// CA (PEM) that KEDA's client certificate must chain to; required with --keda-listen unless --keda-allow-any-client or --dev.
    #[arg(long, global = true, requires = "keda_listen")]
    pub keda_client_ca_file: Option<PathBuf>,
    /// Let the KEDA listener accept clients without a certificate (anyone who reaches the port reads any namespace's metrics); logged as a warning at start.
    #[arg(
        long,
        global = true,
        requires = "keda_listen",
        conflicts_with = "keda_client_ca_file"
    )]
    pub keda_allow_any_client: bool,
    /// Keys the poll cache holds for push streams alone at most (their own budget, apart from --max-cached-queries).
    #[arg(long, global = true, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub keda_max_stream_keys: u32,
    /// StreamIsActive streams one client (source address) holds open at most, over all its connections.
    #[arg(long, global = true, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub keda_max_streams_per_client: u32,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter, e.g. info, debug, gpuscale_adapter=debug,kube=info.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,
    /// Threads serving requests and polling Prometheus.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub worker_threads: u16,
}

/// The environment variables the adapter reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  RUST_LOG        the log filter (--log-level)
  POD_NAMESPACE   the scale-to-zero Lease's namespace (--scale-to-zero-lease-namespace)
  POD_NAME        this replica's Lease identity (--scale-to-zero-identity)
  HOSTNAME        the Lease identity when POD_NAME is unset
  KUBECONFIG      the Kubernetes API without --kubeconfig, outside a cluster
  NO_COLOR        no colour codes in the log (none either off a terminal)";

/// What the adapter does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Serve the metrics APIs (and, when enabled, KEDA's external scaler and the scale-to-zero controller) until SIGTERM. The default.
    Serve,
    /// Before an install: report what in the cluster (--kubeconfig) would conflict with the chart's defaults — who serves each metrics APIService, whether KEDA, prometheus-adapter, cert-manager and the Prometheus Operator run, the kubelet's pod-resources directory, the namespace's Pod Security level — suggest the chart values and exit (non-zero on a conflict or a failed read).
    Doctor,
    /// Before an uninstall: wake every target a ScaleToZeroPolicy parked (and orphans carrying the parked annotation), remove gpuscale's finalizers from the policies, print what was done and exit (non-zero if any wake failed).
    WakeParked,
    /// Validate the metrics config (--config, else the presets), print the served metrics and exit.
    CheckConfig,
    /// Ask Prometheus whether the joined metrics' series carry namespace and pod and the pod metadata series exist; print what was found and exit (non-zero on a problem).
    CheckPrometheus,
}

impl Command {
    /// The subcommand as typed.
    pub fn name(self) -> &'static str {
        match self {
            Command::Serve => "serve",
            Command::Doctor => "doctor",
            Command::WakeParked => "wake-parked",
            Command::CheckConfig => "check-config",
            Command::CheckPrometheus => "check-prometheus",
        }
    }
}

/// The run mode the command line asks for, and the deprecated flag it was
/// asked with, if so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub command: Command,
    pub deprecated: Option<&'static str>,
}

/// Who may call the KEDA listener (outside --dev).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KedaClients {
    /// No listener, or client certificates of --keda-client-ca-file.
    Certified,
    /// Any client: --keda-allow-any-client.
    Any,
    /// A listener with neither: refused at start.
    Unset,
}

impl Args {
    /// The subcommand, or the one an old mode flag (`--doctor`...) stands
    /// for; an old flag with a subcommand or with another is refused.
    pub fn mode(&self) -> Result<Mode, String> {
        let old = [
            (self.wake_parked, "--wake-parked", Command::WakeParked),
            (self.doctor, "--doctor", Command::Doctor),
            (self.check_config, "--check-config", Command::CheckConfig),
            (
                self.check_prometheus,
                "--check-prometheus",
                Command::CheckPrometheus,
            ),
        ];
        let given: Vec<(&'static str, Command)> =
            old.iter().filter(|o| o.0).map(|o| (o.1, o.2)).collect();
        match (self.command, given.as_slice()) {
            (c, []) => Ok(Mode {
                command: c.unwrap_or(Command::Serve),
                deprecated: None,
            }),
            (None, [(flag, c)]) => Ok(Mode {
                command: *c,
                deprecated: Some(flag),
            }),
            (Some(c), [(flag, _), ..]) => Err(format!(
                "{flag} is the old form of a subcommand and cannot be given with `{}`",
                c.name()
            )),
            (None, many) => Err(format!(
                "{} are run modes of their own: give one subcommand ({})",
                many.iter().map(|m| m.0).collect::<Vec<_>>().join(", "),
                many.iter()
                    .map(|m| m.1.name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )),
        }
    }

    pub fn keda_clients(&self) -> KedaClients {
        if self.keda_listen.is_none() || self.keda_client_ca_file.is_some() {
            KedaClients::Certified
        } else if self.keda_allow_any_client {
            KedaClients::Any
        } else {
            KedaClients::Unset
        }
    }

    pub fn limits(&self) -> gpuscale_conn::Limits {
        gpuscale_conn::Limits {
            max_connections: self.max_connections as usize,
            idle_timeout: self.idle_timeout,
            handshake_timeout: self.tls_handshake_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keda_listener_needs_a_client_ca_or_an_explicit_opening() {
        let args = |extra: &[&str]| {
            let base = [
                "gpuscale-adapter",
                "--tls-cert-file=/c",
                "--tls-key-file=/k",
            ];
            Args::try_parse_from(base.iter().chain(extra))
        };
        let clients = |extra: &[&str]| args(extra).map(|a| a.keda_clients());
        assert_eq!(clients(&[]).ok(), Some(KedaClients::Certified));
        let listen = "--keda-listen=0.0.0.0:9443";
        assert_eq!(clients(&[listen]).ok(), Some(KedaClients::Unset));
        let ca = "--keda-client-ca-file=/ca.crt";
        assert_eq!(clients(&[listen, ca]).ok(), Some(KedaClients::Certified));
        let any = "--keda-allow-any-client";
        assert_eq!(clients(&[listen, any]).ok(), Some(KedaClients::Any));
        assert!(args(&[listen, any, ca]).is_err(), "one or the other");
        assert!(args(&[any]).is_err(), "no listener to open");
    }

    #[test]
    fn old_mode_flags_stand_for_their_subcommands() {
        let mode = |argv: &[&str]| {
            let argv = ["gpuscale-adapter"].iter().chain(argv);
            Args::try_parse_from(argv)
                .map_err(|e| e.to_string())?
                .mode()
        };
        let new = |c| {
            Ok(Mode {
                command: c,
                deprecated: None,
            })
        };
        assert_eq!(mode(&[]), new(Command::Serve));
        assert_eq!(mode(&["doctor", "-o", "json"]), new(Command::Doctor));
        assert_eq!(
            mode(&["--kubeconfig=/k", "wake-parked"]),
            new(Command::WakeParked)
        );
        assert_eq!(
            mode(&["check-config", "--config=/c"]),
            new(Command::CheckConfig)
        );
        let old = mode(&["--check-prometheus"]);
        assert_eq!(
            old,
            Ok(Mode {
                command: Command::CheckPrometheus,
                deprecated: Some("--check-prometheus"),
            })
        );
        assert!(mode(&["doctor", "--wake-parked"]).is_err());
        assert!(mode(&["--doctor", "--check-config"]).is_err());
        assert!(mode(&["serve", "--dev"]).is_ok());
    }

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(bytes("64Mi"), Ok(64 << 20));
        assert_eq!(bytes("1Gi"), Ok(1 << 30));
        assert_eq!(bytes("2048Ki"), Ok(2 << 20));
        assert_eq!(bytes("1048576"), Ok(1 << 20));
        for bad in [
            "",
            "64M",
            "1Ki",
            "-1Mi",
            "Mi",
            "99999999999999999999Gi",
            "1.5Mi",
        ] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
    }
}
