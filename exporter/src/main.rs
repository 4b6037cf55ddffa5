//! gpuscale-exporter: see `gpuscale_exporter` (lib) and docs/.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use gpuscale_exporter::cli::Cli;
use gpuscale_exporter::collect::{self, Config};
use gpuscale_exporter::logging;
use gpuscale_exporter::nvml::library::LibSource;
use gpuscale_exporter::pods::PodMapper;
use gpuscale_exporter::server::Server;
use gpuscale_exporter::server::webconfig::WebConfig;
use gpuscale_exporter::simulate::{self, Simulated};
use gpuscale_exporter::snapshot::Store;
use gpuscale_util::memory;
use tracing::{error, info, warn};

/// When start-up is over: NVML is initialised, the inventory read, the pod
/// mapper's first kubelet refresh and pod list done and several
/// collections made, at any collection interval up to 10 s.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(30);

/// Exit code for bad flags or configuration, as clap uses.
const USAGE: u8 = 2;

fn main() -> ExitCode {
    memory::limit_malloc_arenas();
    let cli = Cli::parse();
    if let Err(e) = logging::init(cli.log_format, &cli.log_level) {
        eprintln!("error: {e}");
        return ExitCode::from(USAGE);
    }
    let (lib, simulated) = match choose_library(&cli) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(USAGE);
        }
    };
    let web = match &cli.web_config_file {
        Some(path) => match WebConfig::load(path) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("error: --web-config-file {e}");
                return ExitCode::from(USAGE);
            }
        },
        None => WebConfig::none(),
    };
    // One worker by default, as node_exporter runs with GOMAXPROCS=1: a node
    // daemon should take as little of the node as it can, and on a loaded
    // node a second worker mostly adds preemption (docs/performance.md).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(cli.worker_threads))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    memory::release_after_startup(STARTUP);
    let code = runtime.block_on(run(cli, lib, web, simulated));
    // A collection stuck in the driver must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// Picks the NVML library. Under `--simulate` the scenario is validated here,
/// so a bad file is reported with its line and field before anything starts.
fn choose_library(cli: &Cli) -> Result<(LibSource, Option<Simulated>), String> {
    if let Some((lib, simulated)) = simulate::library(cli)? {
        return Ok((lib, Some(simulated)));
    }
    let lib = cli
        .nvml_lib
        .clone()
        .map(LibSource::Path)
        .unwrap_or(LibSource::System);
    Ok((lib, None))
}

fn node_name(cli: &Cli, simulated: Option<&Simulated>) -> String {
    if let Some(n) = &cli.node_name {
        return n.clone();
    }
    if let Some(s) = simulated {
        return s.node().to_owned();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Binds the scrape port. Accepted sockets inherit the listener's send
/// buffer: one large enough for a whole exposition lets a scrape be written
/// in one call, so the worker never waits for a slow reader's window
/// (110 pods, one worker: p99 at 8 connections 0.62–0.65 ms instead of
/// 0.73–1.40 ms; docs/performance.md).
fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    // Linux caps the request at net.core.wmem_max and doubles it: 416 KiB
    // with the common 208 KiB cap, still above the 222 KB exposition of a
    // node with 110 pods.
    socket.set_send_buffer_size(1 << 20)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn run(cli: Cli, lib: LibSource, web: WebConfig, simulated: Option<Simulated>) -> ExitCode {
    // Caught from here on, so a signal while the simulated node starts
    // still removes its directory.
    let mut signals = Box::pin(wait_for_signal());
    let addr = cli.listen_addr();
    let listener = match listen(addr) {
        Ok(l) => l,
        Err(e) => {
            error!(address = %addr, error = %e, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    let store = Store::new();
    let stop = Arc::new(AtomicBool::new(false));
    let dcgm_flags = gpuscale_exporter::dcgm::Flags {
        hostengine: cli.dcgm_hostengine.as_deref(),
        lib: &cli.dcgm_lib,
        interval: cli.collect_interval,
    };
    let sim_dcgm = simulated.as_ref().is_some_and(Simulated::has_dcgm);
    let (dcgm, _dcgm_sim) = match gpuscale_exporter::dcgm::configure(&dcgm_flags, sim_dcgm) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(USAGE);
        }
    };
    let config = Config {
        lib,
        interval: cli.collect_interval,
        collectors: cli.enabled_collectors(),
        options: gpuscale_exporter::collectors::Options {
            nvlink_per_link: cli.nvlink_per_link,
            profile: cli.profile,
        },
        node: node_name(&cli, simulated.as_ref()),
        exposition: cli.exposition(),
        state_file: cli.state_file(),
        dcgm,
    };
    info!(library = %config.lib.describe(), interval = ?config.interval, collectors = ?config.collectors, "starting");
    let (join, sim_node) = match start_pods(&cli, simulated.as_ref(), &config.node) {
        Ok(started) => started,
        Err(code) => return code,
    };
    if futures::FutureExt::now_or_never(signals.as_mut()).is_some() {
        info!("signal received while starting; exiting");
        return ExitCode::SUCCESS;
    }
    let collector = collect::spawn(config, store.clone(), join, stop.clone());
    let (tx, rx) = tokio::sync::watch::channel(false);
    let limits = cli.limits();
    let server = tokio::spawn(Server { store, web, limits }.run(listener, rx));
    signals.await;
    info!("shutting down");
    stop.store(true, Ordering::Relaxed);
    let _ = tx.send(true);
    let _ = server.await;
    let joined = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::task::spawn_blocking(move || collector.join()),
    )
    .await;
    match joined {
        Ok(Ok(Ok(()))) => {}
        Ok(_) => warn!("collection thread did not stop cleanly"),
        Err(_) => warn!("collection thread still busy after 5 s; exiting without it"),
    }
    drop(sim_node);
    ExitCode::SUCCESS
}

/// Pod identity. Under `--simulate` the scenario's pods are served by a
/// simulated node (kubelet socket, API server, /proc tree) that lives until
/// shutdown; pod flags given explicitly win over its endpoints.
fn start_pods(
    cli: &Cli,
    simulated: Option<&Simulated>,
    node: &str,
) -> Result<(Option<collect::Join>, Option<simulate::Node>), ExitCode> {
    if cli.pods.no_pods {
        info!("pod mapping disabled (--no-pods)");
        return Ok((None, None));
    }
    let rt = tokio::runtime::Handle::current();
    let p = &cli.pods;
    // With every pod endpoint given explicitly there is nothing to simulate.
    let all_explicit = p.pod_resources_socket.is_some()
        && p.proc_root.is_some()
        && (p.kube_api_url.is_some() || p.kubeconfig.is_some());
    let simulated = simulated.filter(|_| !all_explicit);
    let sim_node = match simulated.map(|s| simulate::Node::start(s, &rt)).transpose() {
        Ok(n) => n,
        Err(e) => {
            error!(error = %e, "cannot start the simulated node");
            return Err(ExitCode::FAILURE);
        }
    };
    let args = match &sim_node {
        Some(n) => {
            let sim = n.pod_args();
            info!(
                socket = ?sim.pod_resources_socket,
                api = sim.kube_api_url.as_deref().unwrap_or(""),
                proc_root = ?sim.proc_root,
                "simulated node serving the scenario's pods"
            );
            cli.pods.clone().or_defaults(&sim)
        }
        None => cli.pods.clone(),
    };
    // The simulated pods are bound to the scenario's node.
    let watch_node = sim_node.as_ref().map_or(node, |n| n.node_name());
    match PodMapper::start(&args, watch_node, &rt) {
        Ok(mapper) => Ok((Some(Box::new(move |c| mapper.join(c))), sim_node)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(USAGE))
        }
    }
}

/// SIGTERM or SIGINT. The handlers are installed when this is called, not
/// when it is first polled: a signal from then on is kept until awaited.
fn wait_for_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        match handlers {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}
