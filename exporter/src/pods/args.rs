//! Command-line flags of the pod mapper.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Pod identity: which pod, namespace, container and workload holds each GPU.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Pod mapping")]
pub struct PodArgs {
    /// Disable pod mapping (no pod-resources, kube API or /proc reads).
    #[arg(long, env = "GPUSCALE_NO_PODS")]
    pub no_pods: bool,

    /// kubelet pod-resources socket [default: /var/lib/kubelet/pod-resources/kubelet.sock].
    /// Mount its directory, so a kubelet restart (new socket) is survived.
    #[arg(long, env = "GPUSCALE_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,

    /// Extra device-plugin resource names to read, e.g. nvidia.com/gpu.shared
    /// (nvidia.com/gpu and nvidia.com/mig-* are always read). Repeatable.
    #[arg(
        long = "resource-name",
        env = "GPUSCALE_RESOURCE_NAMES",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub resource_names: Vec<String>,

    /// DRA drivers whose claimed devices are GPUs or MIG instances, mapped to
    /// UUIDs through the node's ResourceSlices. Repeatable.
    #[arg(
        long = "dra-driver",
        env = "GPUSCALE_DRA_DRIVERS",
        value_delimiter = ',',
        value_name = "NAME",
        default_value = DEFAULT_DRA_DRIVER,
        value_parser = parse_driver
    )]
    pub dra_drivers: Vec<String>,

    /// Host /proc, for /proc/<pid>/cgroup of GPU processes [default: /proc].
    #[arg(long, env = "GPUSCALE_PROC_ROOT", value_name = "PATH")]
    pub proc_root: Option<PathBuf>,

    /// Pod label to copy onto metrics as label_<sanitized key>. Repeatable.
    #[arg(long = "pod-label", env = "GPUSCALE_POD_LABELS", value_delimiter = ',', value_name = "KEY", value_parser = super::labels::parse_pod_label)]
    pub pod_labels: Vec<String>,

    /// Hourly price of a GPU model (the gpu_info model label), e.g.
    /// "NVIDIA H100 80GB HBM3=4.50". Repeatable; wins over --gpu-price-file.
    #[arg(long = "gpu-price", env = "GPUSCALE_GPU_PRICES", value_delimiter = ';', value_name = "MODEL=USD_PER_HOUR", value_parser = parse_price)]
    pub gpu_prices: Vec<(String, f64)>,

    /// YAML map of GPU model → USD per hour.
    #[arg(long, env = "GPUSCALE_GPU_PRICE_FILE", value_name = "PATH", value_parser = parse_price_file)]
    pub gpu_price_file: Option<PriceFile>,

    /// How often the kubelet pod-resources API is read (never per scrape).
    #[arg(long, env = "GPUSCALE_POD_REFRESH_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub pod_refresh_interval: Duration,

    /// kubeconfig for the pod watch [default: in-cluster service account, else
    /// $KUBECONFIG / ~/.kube/config].
    #[arg(
        long,
        env = "GPUSCALE_KUBECONFIG",
        value_name = "PATH",
        conflicts_with = "kube_api_url"
    )]
    pub kubeconfig: Option<PathBuf>,

    /// Node label that names the node's pool (gpu_node_info's node_pool), the
    /// first one the node carries wins. Repeatable.
    #[arg(
        long = "node-pool-label",
        env = "GPUSCALE_NODE_POOL_LABELS",
        value_delimiter = ',',
        value_name = "KEY",
        default_values_t = super::node::DEFAULT_POOL_LABELS.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>(),
        value_parser = parse_label_key
    )]
    pub node_pool_labels: Vec<String>,

    /// Plain-HTTP Kubernetes API URL without credentials (tests, --simulate).
    #[arg(long, env = "GPUSCALE_KUBE_API_URL", value_name = "URL", value_parser = parse_url)]
    pub kube_api_url: Option<String>,

    #[command(flatten)]
    pub node_facts: crate::node::NodeFactsArgs,
}

/// Prices read from `--gpu-price-file`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceFile(pub BTreeMap<String, f64>);

/// NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu).
pub const DEFAULT_DRA_DRIVER: &str = "gpu.nvidia.com";
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
pub const DEFAULT_PROC_ROOT: &str = "/proc";

impl PodArgs {
    pub fn socket(&self) -> PathBuf {
        self.pod_resources_socket
            .clone()
            .unwrap_or_else(|| DEFAULT_SOCKET.into())
    }

    pub fn proc_root(&self) -> PathBuf {
        self.proc_root
            .clone()
            .unwrap_or_else(|| DEFAULT_PROC_ROOT.into())
    }

    /// Model → price; `--gpu-price` wins over the file.
    pub fn prices(&self) -> BTreeMap<String, f64> {
        let mut prices = self.gpu_price_file.clone().map(|f| f.0).unwrap_or_default();
        prices.extend(self.gpu_prices.iter().cloned());
        prices
    }

    /// Fills the flags the user left unset from `defaults` (the simulated
    /// node's servers), so explicit flags always win.
    pub fn or_defaults(mut self, defaults: &PodArgs) -> Self {
        self.pod_resources_socket = self
            .pod_resources_socket
            .or_else(|| defaults.pod_resources_socket.clone());
        self.proc_root = self.proc_root.or_else(|| defaults.proc_root.clone());
        if self.kubeconfig.is_none() {
            self.kube_api_url = self.kube_api_url.or_else(|| defaults.kube_api_url.clone());
        }
        self
    }
}

/// A Kubernetes label key: `[prefix/]name`, name 1–63 characters of
/// `[A-Za-z0-9._-]` starting and ending alphanumeric, prefix a DNS subdomain.
fn parse_label_key(s: &str) -> Result<String, String> {
    let (prefix, name) = s.rsplit_once('/').unwrap_or(("", s));
    let alnum_ends = |t: &str| {
        t.starts_with(|c: char| c.is_ascii_alphanumeric())
            && t.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let name_ok = (1..=63).contains(&name.len())
        && alnum_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let prefix_ok = prefix.is_empty()
        || (prefix.len() <= 253
            && prefix.split('.').all(|p| {
                !p.is_empty()
                    && alnum_ends(p)
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            }));
    if (s.contains('/') && prefix.is_empty()) || !name_ok || !prefix_ok {
        return Err(format!(
            "{s:?} is not a Kubernetes label key ([prefix/]name, e.g. cloud.google.com/gke-nodepool)"
        ));
    }
    Ok(s.to_owned())
}

fn parse_price(s: &str) -> Result<(String, f64), String> {
    let (model, price) = s.rsplit_once('=').ok_or_else(|| {
        format!("{s:?}: expected MODEL=USD_PER_HOUR, e.g. \"NVIDIA H100 80GB HBM3=4.50\"")
    })?;
    let model = model.trim();
    if model.is_empty() {
        return Err(format!("{s:?}: empty GPU model"));
    }
    Ok((
        model.to_owned(),
        check_price(
            price
                .trim()
                .parse::<f64>()
                .map_err(|e| format!("{s:?}: {e}"))?,
        )?,
    ))
}

fn check_price(p: f64) -> Result<f64, String> {
    if p.is_finite() && p >= 0.0 {
        Ok(p)
    } else {
        Err(format!("price {p} must be a finite number ≥ 0"))
    }
}

fn parse_price_file(path: &str) -> Result<PriceFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let map: BTreeMap<String, f64> = yaml_serde::from_str(&text)
        .map_err(|e| format!("{path}: expected a map of GPU model to USD per hour: {e}"))?;
    for (model, price) in &map {
        check_price(*price).map_err(|e| format!("{path}: {model}: {e}"))?;
    }
    Ok(PriceFile(map))
}

/// `--pod-refresh-interval`: 10ms to 24h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s, Duration::from_millis(10), Duration::from_secs(86_400))
}

/// A DRA driver name is a DNS subdomain (`gpu.nvidia.com`).
fn parse_driver(s: &str) -> Result<String, String> {
    let ok = s.contains('.')
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?}: expected a DRA driver name (a DNS subdomain such as gpu.nvidia.com)"
        ))
    }
}

fn parse_url(s: &str) -> Result<String, String> {
    s.parse::<http::Uri>()
        .ok()
        .filter(|u| {
            u.scheme_str().is_some_and(|s| s == "http" || s == "https") && u.host().is_some()
        })
        .map(|_| s.to_owned())
        .ok_or_else(|| format!("{s:?}: expected an http(s) URL such as http://127.0.0.1:8001"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        pods: PodArgs,
    }

    fn parse(args: &[&str]) -> Result<PodArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.pods)
    }

    #[test]
    fn defaults() -> Result<(), clap::Error> {
        let a = parse(&[])?;
        assert_eq!(a.socket(), PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(a.proc_root(), PathBuf::from("/proc"));
        assert_eq!(a.pod_refresh_interval, Duration::from_secs(10));
        assert!(!a.no_pods);
        assert_eq!(a.dra_drivers, [DEFAULT_DRA_DRIVER]);
        Ok(())
    }

    #[test]
    fn repeatable_flags() -> Result<(), clap::Error> {
        let a = parse(&[
            "--pod-label",
            "team",
            "--pod-label",
            "app.kubernetes.io/name",
            "--gpu-price",
            "NVIDIA H100 80GB HBM3=4.5",
            "--gpu-price",
            "NVIDIA A100-SXM4-80GB=2",
            "--resource-name",
            "nvidia.com/gpu.shared",
            "--pod-refresh-interval",
            "250ms",
            "--dra-driver",
            "gpu.nvidia.com,compute-domain.nvidia.com",
        ])?;
        assert_eq!(
            a.dra_drivers,
            ["gpu.nvidia.com", "compute-domain.nvidia.com"]
        );
        assert_eq!(a.pod_labels, vec!["team", "app.kubernetes.io/name"]);
        assert_eq!(a.prices().get("NVIDIA H100 80GB HBM3"), Some(&4.5));
        assert_eq!(a.prices().len(), 2);
        assert_eq!(a.resource_names, vec!["nvidia.com/gpu.shared"]);
        assert_eq!(a.pod_refresh_interval, Duration::from_millis(250));
        Ok(())
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["--gpu-price", "H100"][..],
            &["--gpu-price", "H100=-1"],
            &["--gpu-price", "=3"],
            &["--pod-label", "bad key"],
            &["--pod-refresh-interval", "fast"],
            &["--pod-refresh-interval", "0s"],
            &["--kube-api-url", "not a url"],
            &["--dra-driver", "nvidia"],
            &["--dra-driver", "GPU.nvidia.com"],
            &["--gpu-price-file", "/nonexistent/prices.yaml"],
            &["--node-pool-label", ""],
            &["--node-pool-label", "pool name"],
            &["--node-pool-label", "/nodepool"],
            &["--node-pool-label", "Example.com/pool"],
            &["--node-pool-label", "a/b/c"],
        ] {
            let err = parse(args).err();
            assert_eq!(err.map(|e| e.exit_code()), Some(2), "{args:?}");
        }
    }

    #[test]
    fn node_pool_labels_default_to_the_managed_pools_and_are_replaced_when_given()
    -> Result<(), clap::Error> {
        let a = parse(&[])?;
        assert_eq!(a.node_pool_labels, super::super::node::DEFAULT_POOL_LABELS);
        let a = parse(&["--node-pool-label", "example.com/pool,pool"])?;
        assert_eq!(a.node_pool_labels, ["example.com/pool", "pool"]);
        Ok(())
    }

    #[test]
    fn explicit_flags_win_over_simulated_defaults() -> Result<(), clap::Error> {
        let sim = PodArgs {
            pod_resources_socket: Some("/tmp/sim.sock".into()),
            proc_root: Some("/tmp/proc".into()),
            kube_api_url: Some("http://127.0.0.1:1".into()),
            ..PodArgs::default()
        };
        let a = parse(&["--pod-resources-socket", "/tmp/mine.sock"])?.or_defaults(&sim);
        assert_eq!(a.socket(), PathBuf::from("/tmp/mine.sock"));
        assert_eq!(a.proc_root(), PathBuf::from("/tmp/proc"));
        assert_eq!(a.kube_api_url.as_deref(), Some("http://127.0.0.1:1"));
        Ok(())
    }

    #[test]
    fn price_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("gpuscale-price-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("prices.yaml");
        std::fs::write(&path, "\"NVIDIA H100 80GB HBM3\": 4.5\nNVIDIA L4: 0.8\n")?;
        let path = path.to_string_lossy().into_owned();
        let a = parse(&["--gpu-price-file", &path, "--gpu-price", "NVIDIA L4=0.7"])?;
        assert_eq!(a.prices().get("NVIDIA L4"), Some(&0.7));
        assert_eq!(a.prices().get("NVIDIA H100 80GB HBM3"), Some(&4.5));
        std::fs::write(dir.join("bad.yaml"), "- a\n")?;
        assert!(parse(&["--gpu-price-file", &dir.join("bad.yaml").to_string_lossy()]).is_err());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
