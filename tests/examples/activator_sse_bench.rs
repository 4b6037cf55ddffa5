//! Figures of gpuscale-activator with many server-sent event streams open
//! (bench/activator-sse.sh): STREAMS streaming chat completions through
//! the activator to a model server that sends one chunk a second and never
//! ends, and the activator's RSS idle, with every stream open, and after
//! they closed. Each mode is `client/upstream`: the clients' protocol
//! (`h1`: a connection per stream; `h2`: 250 streams per connection) and
//! the route's `upstreamProtocol` (`http1`, `h2c`). The activator is
//! `$ACTIVATOR_BIN`, the model server `$SSE_BACKEND_BIN`, the clients
//! `$SSE_CLIENT_BIN`; the Kubernetes API is the tests' fake.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuscale_e2e::activator::{deployment, deployments, slice, slices};
use gpuscale_e2e::kubeapi::{Cluster, KubeFake};
use gpuscale_e2e::procs::Proc;
use serde_json::Value;

const IN_FLIGHT: &str =
    "gpuscale_activator_in_flight_requests{namespace=\"inference\",route=\"chat\"}";

fn bin(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var}: a binary"))
}

fn scrape(port: u16, series: &str) -> Option<f64> {
    let body = ureq::get(format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

fn wait(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rss_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// This process's descriptor limit (the children inherit it).
fn nofile() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

fn main() {
    let streams: usize = std::env::var("STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let modes = std::env::var("MODES").unwrap_or_else(|_| "h1/http1 h2/http1 h2/h2c".into());
    let dir = tempfile::tempdir().unwrap();
    let backend_port = gpuscale_e2e::free_port();
    let mut cmd = Command::new(bin("SSE_BACKEND_BIN"));
    cmd.arg(format!("127.0.0.1:{backend_port}")).arg("1s");
    let _backend = Proc::spawn("sse-backend", cmd, &dir.path().join("backend.log"));
    wait("the model server", 20, || {
        std::net::TcpStream::connect(("127.0.0.1", backend_port)).is_ok()
    });
    println!("descriptor limit {}", nofile());
    for mode in modes.split_whitespace() {
        let (client, upstream) = mode.split_once('/').expect("mode: client/upstream");
        run(dir.path(), backend_port, streams, client, upstream);
    }
}

/// One mode: a fresh activator, `streams` streams opened, RSS read. With
/// a connection per stream, as many as the activator serves within the
/// descriptor limit (`activator/src/fds.rs`: 256 kept back, two each).
fn run(dir: &std::path::Path, backend: u16, streams: usize, client: &str, upstream: &str) {
    let room = (nofile().saturating_sub(256) / 2).saturating_sub(100);
    let streams = if client == "h1" && streams > room {
        println!(
            "h1: {room} streams, not {streams}: a connection each within the descriptor limit"
        );
        room
    } else {
        streams
    };
    let name = format!("activator-{client}-{upstream}");
    let (_fake, activator, port, mport) = start(dir, &name, backend, streams, upstream);
    let pid = activator.child.id();
    let idle = rss_kib(pid);

    let mut cmd = Command::new(bin("SSE_CLIENT_BIN"));
    cmd.arg(format!("127.0.0.1:{port}"))
        .arg(streams.to_string())
        .arg(client);
    let started = Instant::now();
    let clients = Proc::spawn("sse-clients", cmd, &dir.join(format!("{name}.clients.log")));
    let open = format!("open {streams}\n");
    wait("every stream's first event", 300, || {
        clients.log_text().contains(&open)
    });
    let opened = started.elapsed();
    // Every stream open and streaming; let a few events pass.
    std::thread::sleep(Duration::from_secs(5));
    let in_flight = scrape(mport, IN_FLIGHT).unwrap_or(f64::NAN);
    let full = rss_kib(pid);
    let last = clients
        .log_text()
        .lines()
        .rev()
        .find(|l| l.starts_with("events"))
        .map(str::to_string);
    let capped = activator.log_text().contains("--max-connections lowered");
    drop(clients);
    wait("the streams to close", 120, || {
        scrape(mport, IN_FLIGHT) == Some(0.0)
    });
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib(pid);
    println!(
        "{client} clients, {upstream} upstream: {streams} streams open in {:.1} s, in flight {in_flight}; \
         RSS idle {:.1} MiB, open {:.1} MiB ({:.1} KiB per stream), after {:.1} MiB{}; clients: {}",
        opened.as_secs_f64(),
        idle / 1024.0,
        full / 1024.0,
        (full - idle) / streams as f64,
        after / 1024.0,
        if capped {
            " (--max-connections lowered)"
        } else {
            ""
        },
        last.unwrap_or_default()
    );
}

/// A fresh activator with one model route to `backend`, room for
/// `streams` connections, serving once its endpoint is ready: the fake API
/// it reads (kept alive by the caller), the process and its two ports.
fn start(
    dir: &std::path::Path,
    name: &str,
    backend: u16,
    streams: usize,
    upstream: &str,
) -> (KubeFake, Proc, u16, u16) {
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    });
    fake.put(&deployments(), deployment("inference", "chat", 1));
    fake.put(&slices(), slice("inference", "chat", backend, true));
    let routes = format!(
        "routes:\n- name: chat\n  model: chat\n  service: {{namespace: inference, name: chat, port: http}}\n  \
         target: {{kind: Deployment, name: chat}}\n  upstreamProtocol: {upstream}\n"
    );
    let config = gpuscale_e2e::write_file(dir, &format!("{name}.yaml"), &routes);
    let kubeconfig =
        gpuscale_e2e::write_file(dir, &format!("{name}.kubeconfig"), &fake.kubeconfig());
    let (port, mport) = (gpuscale_e2e::free_port(), gpuscale_e2e::free_port());
    let mut cmd = Command::new(bin("ACTIVATOR_BIN"));
    cmd.arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--metrics-listen=127.0.0.1:{mport}"))
        .arg(format!("--config={}", config.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--max-connections={}", streams + 100))
        .env("RUST_LOG", "warn");
    let log = dir.join(format!("{name}.log"));
    let activator = Proc::spawn(name, cmd, &log);
    let ready = "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}";
    wait("the activator's endpoint", 30, || {
        scrape(mport, ready) == Some(1.0)
    });
    (fake, activator, port, mport)
}
