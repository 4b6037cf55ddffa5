//! `gpuscale-sim`: the simulated cluster of a scenario file: its Kubernetes
//! API (HTTPS, a kubeconfig written where asked), its simulated node
//! (kubelet pod-resources socket, `/proc` tree) with workloads that run,
//! until SIGINT or SIGTERM. Prints the exporter flags for the node.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use gpuscale_nvml_sim::scenario::{self, Scenario};
use gpuscale_sim::kubeapi::{Cluster, KubeFake};
use gpuscale_sim::node::SimNode;
use gpuscale_sim::node::workloads::Workloads;

const SIMULATOR_FILE: &str = "libgpuscale_nvml_sim.so";

/// The environment variables the simulator reads, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  RUST_LOG  the log filter (--log-level)
  NO_COLOR  no colour codes in the log (none either off a terminal)
  TMPDIR    where the temporary --dir is made";

#[derive(Debug, Parser)]
#[command(
    name = "gpuscale-sim",
    version,
    about = "A simulated GPU cluster: Kubernetes API, a GPU node, workloads that run",
    after_help = ENVIRONMENT
)]
struct Cli {
    /// Scenario file (the NVML simulator's format); default the built-in 8-GPU node.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Where to write the kubeconfig for kubectl and the exporter.
    #[arg(long, value_name = "PATH")]
    kubeconfig_out: PathBuf,
    /// Directory for the node's socket and /proc tree (default: a temporary one).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where to serve `/metrics` with the demand set by the
    /// `sim.gpuscale.dev/pending-requests` annotation of Deployments.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    metrics_addr: std::net::SocketAddr,
    /// Label the node with an instance and capacity type and add CPU-only
    /// pods with each reason the node autoscalers keep a node for, their
    /// PodDisruptionBudgets and a parked GPU Deployment (docs/node-economics.md).
    #[arg(long)]
    node_economics: bool,
    /// Log filter, e.g. info, debug, gpuscale_sim=debug.
    #[arg(long, env = "RUST_LOG", default_value = "info", value_parser = gpuscale_util::log::filter)]
    log_level: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Colours only on a terminal, and never with NO_COLOR set.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_env_filter(
            // --log-level (or RUST_LOG) was checked when the command line was read.
            tracing_subscriber::EnvFilter::try_new(&cli.log_level)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpuscale-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let scenario = match &cli.scenario {
        Some(path) => scenario::load(path).map_err(|e| format!("--scenario: {e}"))?,
        None => scenario::default_scenario(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let api = Arc::new(KubeFake::start_bare(Cluster::default()).map_err(|e| e.to_string())?);
    api.write_kubeconfig(&cli.kubeconfig_out)
        .map_err(|e| format!("--kubeconfig-out {}: {e}", cli.kubeconfig_out.display()))?;
    let dir = cli.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("gpuscale-sim-{}", std::process::id()))
    });
    let node = SimNode::start_in(
        &scenario,
        rt.handle(),
        api.clone(),
        dir.join(&scenario.node),
    )
    .map_err(|e| e.to_string())?;
    if cli.node_economics {
        gpuscale_sim::node::economics::apply(&api, &scenario.node);
    }
    let node = Arc::new(node);
    let workloads = Workloads::start(
        node.clone(),
        Duration::from_secs_f64(scenario.cold_start_seconds),
    );
    let demand = rt
        .block_on(gpuscale_sim::demand::serve(api.clone(), cli.metrics_addr))
        .map_err(|e| format!("--metrics-addr {}: {e}", cli.metrics_addr))?;
    println!("{}", instructions(cli, &scenario, &node));
    println!("  demand (held requests) on http://{demand}/metrics\n");
    let waited = rt.block_on(wait_for_signal());
    drop(workloads);
    drop(node);
    let _ = std::fs::remove_file(&cli.kubeconfig_out);
    if cli.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    waited.map_err(|e| format!("cannot wait for signals: {e}"))
}

/// How to point kubectl and the exporter at the cluster.
fn instructions(cli: &Cli, scenario: &Scenario, node: &SimNode) -> String {
    let kubeconfig = absolute(&cli.kubeconfig_out);
    let lib = simulator_lib().map_or_else(
        || format!("<{SIMULATOR_FILE}: cargo build -p gpuscale-nvml-sim>"),
        |p| p.display().to_string(),
    );
    let env = cli.scenario.as_deref().map_or_else(String::new, |s| {
        format!("GPUSCALE_SIM_SCENARIO={} ", absolute(s).display())
    });
    format!(
        "gpuscale-sim: node {node_name} is up; Ctrl-C stops it.\n\
         \n  kubectl --kubeconfig {kc} get nodes,pods -A\n\
         \n  {env}gpuscale-exporter --listen 127.0.0.1:9400 --nvml-lib {lib} --node-name {node_name} \\\n    \
         --pod-resources-socket {sock} --proc-root {proc} --kubeconfig {kc}\n",
        node_name = scenario.node,
        kc = kubeconfig.display(),
        sock = node.socket().display(),
        proc = node.proc_root().display(),
    )
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

/// The NVML simulator library cargo built beside this binary.
fn simulator_lib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join(SIMULATOR_FILE),
        dir.join("deps").join(SIMULATOR_FILE),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// SIGTERM or SIGINT; an error when the handlers cannot be installed.
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    Ok(())
}
