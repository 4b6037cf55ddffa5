//! Figures of gpuscale-activator (bench/activator.sh): the wake signal's
//! latency (request held → scale patch accepted by the Kubernetes API) over
//! WAKES parks and wakes, the cost in the path when warm (wrk against the
//! same backend directly and through the activator, alternated in one run),
//! and its RSS idle and with HELD requests held. The activator binary is
//! `$ACTIVATOR_BIN` (bench/activator.sh builds it in release); the fake
//! Kubernetes API and the backend are the tests' own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gpuscale_e2e::activator::{Backend, deployment, deployments, send, slice, slices};
use gpuscale_e2e::kubeapi::{Cluster, KubeFake};
use gpuscale_e2e::procs::Proc;
use serde_json::Value;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

/// wrk's (requests/s, p99 ms) against `url`.
fn wrk(url: &str, secs: u64, threads: u32, conns: u32) -> (f64, f64) {
    let out = Command::new("wrk")
        .args([
            &format!("-t{threads}"),
            &format!("-c{conns}"),
            &format!("-d{secs}s"),
            "--latency",
            url,
        ])
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk output: {text}"));
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .map(|v| {
            let v = v.trim();
            let (num, unit) =
                v.split_at(v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len()));
            let n: f64 = num.parse().unwrap_or(f64::NAN);
            match unit {
                "us" => n / 1000.0,
                "s" => n * 1000.0,
                _ => n,
            }
        })
        .unwrap_or(f64::NAN);
    (rps, p99)
}

/// wrk at `conns` connections against the backend directly and through
/// the activator, alternated three times; medians.
fn compare(direct: &str, via: &str, secs: u64, threads: u32, conns: u32) {
    let (mut d_rps, mut d_p99, mut v_rps, mut v_p99) = (vec![], vec![], vec![], vec![]);
    for _ in 0..3 {
        let (r, p) = wrk(direct, secs, threads, conns);
        d_rps.push(r);
        d_p99.push(p);
        let (r, p) = wrk(via, secs, threads, conns);
        v_rps.push(r);
        v_p99.push(p);
    }
    let (dr, dp) = (median(&mut d_rps), median(&mut d_p99));
    let (vr, vp) = (median(&mut v_rps), median(&mut v_p99));
    println!("warm, wrk -t{threads} -c{conns}, median of 3 runs of {secs} s each, alternated:");
    println!("  direct:  {dr:.0} req/s, p99 {dp:.3} ms");
    println!(
        "  through: {vr:.0} req/s, p99 {vp:.3} ms  (throughput ratio {:.2}, p99 {:+.3} ms)",
        vr / dr,
        vp - dp
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let wakes = env("WAKES", 20);
    let held = env("HELD", 10_000);
    let secs = env("WRK_SECONDS", 10) as u64;
    let bin = std::env::var("ACTIVATOR_BIN").expect("ACTIVATOR_BIN: the activator binary");
    let dir = tempfile::tempdir().unwrap();
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    });
    let backend = Backend::start("chat");
    fake.put(&deployments(), deployment("inference", "chat", 0));
    fake.put(&slices(), slice("inference", "chat", backend.port, false));
    let routes = "routes:\n- name: chat\n  service: {namespace: inference, name: chat, port: http}\n  target: {kind: Deployment, name: chat}\n";
    let config = gpuscale_e2e::write_file(dir.path(), "routes.yaml", routes);
    let kubeconfig = gpuscale_e2e::write_file(dir.path(), "kubeconfig", &fake.kubeconfig());
    let (port, mport) = (gpuscale_e2e::free_port(), gpuscale_e2e::free_port());
    let mut cmd = Command::new(&bin);
    cmd.arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--metrics-listen=127.0.0.1:{mport}"))
        .arg(format!("--config={}", config.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--queue-length={}", held + 10))
        .env("RUST_LOG", "warn");
    let proc = Proc::spawn("activator", cmd, &dir.path().join("activator.log"));
    let pending = "gpuscale_activator_pending_requests{namespace=\"inference\",route=\"chat\"}";
    wait("the activator", 20, || scrape(mport, pending).is_some());
    let pid = proc.child.id();
    let idle = rss_mib(pid);

    wake_signal(&fake, port, mport, backend.port, wakes);

    // Warm: the same backend directly and through the activator, alternated.
    wait("ready", 10, || {
        scrape(
            mport,
            "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}",
        ) == Some(1.0)
    });
    let (direct_url, via_url) = (
        format!("http://127.0.0.1:{}/", backend.port),
        format!("http://127.0.0.1:{port}/"),
    );
    for (threads, conns) in [(2, 32), (1, 1)] {
        compare(&direct_url, &via_url, secs, threads, conns);
    }

    held_rss(&fake, port, mport, backend.port, held, pid, idle);
    drop(proc);
}

/// Park, hold one request, time the scale patch; `wakes` times.
fn wake_signal(fake: &KubeFake, port: u16, mport: u16, backend: u16, wakes: usize) {
    // Wake signal: park, hold one request, time the scale patch.
    let mut lat = Vec::new();
    for i in 0..wakes {
        fake.put(&deployments(), deployment("inference", "chat", 0));
        fake.put(&slices(), slice("inference", "chat", backend, false));
        wait("not ready", 10, || {
            scrape(
                mport,
                "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}",
            ) == Some(0.0)
        });
        let before = fake.scale_patches().len();
        let sent = SystemTime::now();
        let s = send(port, "/", "chat", &format!("x-seq: {i}\r\n"), "{}");
        wait("the scale patch", 10, || {
            fake.scale_patches().len() > before
        });
        let at = fake.scale_patches()[before].at;
        lat.push(at.duration_since(sent).unwrap_or_default().as_secs_f64() * 1000.0);
        fake.put(&slices(), slice("inference", "chat", backend, true));
        let (code, _, _) = gpuscale_e2e::activator::response(s);
        assert_eq!(code, 200);
    }
    if !lat.is_empty() {
        let max = lat.iter().copied().fold(0.0, f64::max);
        println!(
            "wake signal (request held -> scale patch accepted) over {wakes}: median {:.1} ms, max {max:.1} ms",
            median(&mut lat)
        );
    }
}

/// RSS with `held` requests held on as many connections.
fn held_rss(
    fake: &KubeFake,
    port: u16,
    mport: u16,
    backend: u16,
    held: usize,
    pid: u32,
    idle: f64,
) {
    let pending = "gpuscale_activator_pending_requests{namespace=\"inference\",route=\"chat\"}";
    // RSS with HELD requests held.
    fake.put(&deployments(), deployment("inference", "chat", 0));
    fake.put(&slices(), slice("inference", "chat", backend, false));
    wait("not ready", 10, || {
        scrape(
            mport,
            "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}",
        ) == Some(0.0)
    });
    let mut conns = Vec::with_capacity(held);
    for i in 0..held {
        conns.push(send(port, "/", "chat", &format!("x-seq: h{i}\r\n"), "{}"));
    }
    wait("all held", 120, || {
        scrape(mport, pending) == Some(held as f64)
    });
    let full = rss_mib(pid);
    println!(
        "RSS: idle {idle:.1} MiB; with {held} requests held {full:.1} MiB ({:.1} KiB per held request)",
        (full - idle) * 1024.0 / held as f64
    );
    drop(conns);
}
