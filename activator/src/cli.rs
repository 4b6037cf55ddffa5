//! Command-line flags (documented in docs/activator.md; a test keeps the two
//! in step). Each flag is also a `GPUSCALE_ACTIVATOR_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// A duration above zero (`gpuscale_util::duration`'s grammar).
fn duration(s: &str) -> Result<Duration, String> {
    match gpuscale_util::duration::parse(s) {
        Ok(d) if d.is_zero() => Err(format!("{s:?} must be above zero")),
        read => read.map_err(|e| e.to_string()),
    }
}

/// A size in bytes: a whole number, optionally with Ki or Mi.
pub fn bytes(s: &str) -> Result<usize, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => s.split_at(at),
        None => (s, ""),
    };
    let scale: usize = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        _ => 0,
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("invalid size {s:?} (bytes, or with Ki, Mi)"))
}

/// The environment variables the activator reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GPUSCALE_ACTIVATOR_*  each flag but --log-level (e.g. GPUSCALE_ACTIVATOR_QUEUE_LENGTH)
  RUST_LOG              the log filter (--log-level)
  KUBECONFIG            the Kubernetes API without --kubeconfig, outside a cluster
  NO_COLOR              no colour codes in the log (none either off a terminal)";

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Holds HTTP requests for a model Service at zero replicas, wakes its
/// workload and forwards them once it is Ready.
#[derive(Debug, Clone, Parser)]
#[command(name = "gpuscale-activator", version, after_help = ENVIRONMENT)]
pub struct Args {
    /// What to do; `serve` when none is given.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Address of the proxy (HTTP/1.1 and HTTP/2 cleartext).
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_LISTEN",
        default_value = "0.0.0.0:8080"
    )]
    pub listen: SocketAddr,
    /// Address of the self-metrics endpoint (/metrics, /healthz, /readyz).
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_METRICS_LISTEN",
        default_value = "0.0.0.0:9103"
    )]
    pub metrics_listen: SocketAddr,
    /// Routes file (YAML); required.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Deprecated: `gpuscale-activator check-config`.
    #[arg(long, global = true, hide = true)]
    pub check_config: bool,
    /// Kubeconfig (default: in-cluster config or $KUBECONFIG).
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Requests held per route at most; more get 503 with Retry-After.
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_QUEUE_LENGTH",
        default_value = "1000"
    )]
    pub queue_length: usize,
    /// Longest a request is held; past it, 503 with Retry-After.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_MAX_WAIT", default_value = "5m", value_parser = duration)]
    pub max_wait: Duration,
    /// Largest body of a request that may be held (it is read while held): a larger declared Content-Length, or a body of undeclared length that grows past it while held, gets 413.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_MAX_HELD_BODY", default_value = "1Mi", value_parser = bytes)]
    pub max_held_body: usize,
    /// Most bytes of held bodies read into memory at once, all routes together; a held request whose body would pass it gets 503.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_MAX_HELD_BYTES", default_value = "256Mi", value_parser = bytes)]
    pub max_held_bytes: usize,
    /// Most bytes of a JSON body read to find its `model` field (routes with `model` only); a larger body gets 413.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_MODEL_PEEK_LIMIT", default_value = "1Mi", value_parser = bytes)]
    pub model_peek_limit: usize,
    /// Longest a `model` route may take to receive the body it reads to find the `model`; past it, 408.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_BODY_READ_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub body_read_timeout: Duration,
    /// Seconds sent in Retry-After with a 503.
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_RETRY_AFTER",
        default_value = "10"
    )]
    pub retry_after: u32,
    /// How often a wake is retried while requests are held and the target is still not Ready (the first wake is immediate).
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_WAKE_RETRY", default_value = "5s", value_parser = duration)]
    pub wake_retry: Duration,
    /// Connections served at once on each listener.
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_MAX_CONNECTIONS",
        default_value = "20000"
    )]
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_IDLE_TIMEOUT", default_value = "90s", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Time to connect to a Ready endpoint.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_CONNECT_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub connect_timeout: Duration,
    /// Longest a forwarded request waits for its upstream's response head (time to first byte); past it, 504.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_UPSTREAM_TTFB_TIMEOUT", default_value = "300s", value_parser = duration)]
    pub upstream_ttfb_timeout: Duration,
    /// Prometheus that scrapes gpuscale-exporter (http://host:port[/prefix]): with it, waking a sleeping model whose VRAM does not fit its GPU's free memory first puts least recently used idle neighbours on that GPU to sleep.
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// Most neighbours put to sleep on one GPU in any 60 s to make room for wakes; past it a wake waits.
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_GPU_NEIGHBOUR_SLEEPS",
        default_value = "4"
    )]
    pub gpu_neighbour_sleeps: usize,
    /// How often the VRAM readings are refreshed from Prometheus (each model's need is remembered from its readings while awake).
    #[arg(long, global = true, env = "GPUSCALE_ACTIVATOR_VRAM_REFRESH", default_value = "10s", value_parser = duration)]
    pub vram_refresh: Duration,
    /// Log format.
    #[arg(
        long,
        global = true,
        env = "GPUSCALE_ACTIVATOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter, e.g. info, debug, gpuscale_activator=debug,kube=info.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info", value_parser = gpuscale_util::log::filter)]
    pub log_level: String,
}

/// What the activator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Hold, wake and forward the routes' requests until SIGTERM. The default.
    Serve,
    /// Validate the routes file (--config), print the routes and exit.
    CheckConfig,
}

impl Command {
    /// The subcommand as typed.
    pub fn name(self) -> &'static str {
        match self {
            Command::Serve => "serve",
            Command::CheckConfig => "check-config",
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

impl Args {
    /// The subcommand, or `check-config` for the old `--check-config`
    /// flag; the flag with a subcommand is refused.
    pub fn mode(&self) -> Result<Mode, String> {
        match (self.command, self.check_config) {
            (c, false) => Ok(Mode {
                command: c.unwrap_or(Command::Serve),
                deprecated: None,
            }),
            (None, true) => Ok(Mode {
                command: Command::CheckConfig,
                deprecated: Some("--check-config"),
            }),
            (Some(c), true) => Err(format!(
                "--check-config is the old form of a subcommand and cannot be given with `{}`",
                c.name()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(args: &[&str]) -> Result<Mode, String> {
        let argv = std::iter::once("gpuscale-activator").chain(args.iter().copied());
        Args::try_parse_from(argv)
            .map_err(|e| e.to_string())
            .and_then(|a| a.mode())
    }

    #[test]
    fn the_old_flag_stands_for_check_config() {
        let new = |command| {
            Ok(Mode {
                command,
                deprecated: None,
            })
        };
        assert_eq!(mode(&["--config", "r.yaml"]), new(Command::Serve));
        assert_eq!(mode(&["serve", "--config", "r.yaml"]), new(Command::Serve));
        assert_eq!(
            mode(&["--config", "r.yaml", "check-config"]),
            new(Command::CheckConfig)
        );
        assert_eq!(
            mode(&["--check-config", "--config", "r.yaml"]),
            Ok(Mode {
                command: Command::CheckConfig,
                deprecated: Some("--check-config"),
            })
        );
        let both = mode(&["serve", "--check-config"]).err().unwrap_or_default();
        assert!(both.contains("cannot be given with `serve`"), "{both}");
    }
}
