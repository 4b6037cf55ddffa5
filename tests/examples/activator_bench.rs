//! Figures of gpuscale-activator (bench/activator.sh): the wake signal's
//! latency (request held → scale patch accepted by the Kubernetes API) over
//! WAKES parks and wakes, the cost in the path when warm (wrk against the
//! same backend directly, through a bare hyper reverse proxy, through nginx
//! as a reverse proxy and through the activator, alternated in one run),
//! and its RSS idle and with HELD requests held. The activator binary is
//! `$ACTIVATOR_BIN`, the bare proxy `$BARE_PROXY_BIN` (bench/activator.sh
//! builds both in release); the backend is nginx's own `return 200` (one
//! worker) when `nginx` is installed, else the tests' backend; the fake
//! Kubernetes API is the tests' own.

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

/// wrk at `conns` connections against each target, alternated three
/// times; medians, and the activator's ratios to the others.
fn compare(targets: &[(&str, String)], secs: u64, threads: u32, conns: u32) {
    let mut runs: Vec<(Vec<f64>, Vec<f64>)> = vec![(vec![], vec![]); targets.len()];
    for _ in 0..3 {
        for ((_, url), (rps, p99)) in targets.iter().zip(runs.iter_mut()) {
            let (r, p) = wrk(url, secs, threads, conns);
            rps.push(r);
            p99.push(p);
        }
    }
    println!("warm, wrk -t{threads} -c{conns}, median of 3 runs of {secs} s each, alternated:");
    let medians: Vec<(f64, f64)> = runs
        .iter_mut()
        .map(|(r, p)| (median(r), median(p)))
        .collect();
    let (ar, ap) = medians[medians.len() - 1];
    for ((name, _), (r, p)) in targets.iter().zip(&medians) {
        println!(
            "  {name:<18} {r:>8.0} req/s, p99 {p:.3} ms  (activator: throughput x{:.2}, p99 x{:.2}, {:+.3} ms)",
            ar / r,
            ap / p,
            ap - p
        );
    }
}

/// nginx with one worker serving `server` (a `server { … }` block) on its
/// own prefix in `dir`; ended when dropped.
fn nginx(dir: &std::path::Path, name: &str, server: &str) -> Proc {
    let prefix = dir.join(name);
    std::fs::create_dir_all(&prefix).unwrap();
    let p = prefix.display();
    let conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n  {server}\n}}\n"
    );
    let file = gpuscale_e2e::write_file(&prefix, "nginx.conf", &conf);
    let mut cmd = Command::new("nginx");
    cmd.arg("-p").arg(&prefix).arg("-c").arg(&file);
    Proc::spawn(name, cmd, &prefix.join("stderr.log"))
}

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn answers(url: &str) -> bool {
    ureq::get(url).call().is_ok_and(|r| r.status() == 200)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let wakes = env("WAKES", 20);
    let held = env("HELD", 9_000);
    let secs = env("WRK_SECONDS", 10) as u64;
    let bin = std::env::var("ACTIVATOR_BIN").expect("ACTIVATOR_BIN: the activator binary");
    let dir = tempfile::tempdir().unwrap();
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    });
    let with_nginx = has("nginx");
    let (_tests_backend, _nginx_backend, backend) = if with_nginx {
        let port = gpuscale_e2e::free_port();
        let server =
            format!("server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}");
        let n = nginx(dir.path(), "nginx-backend", &server);
        wait("the nginx backend", 10, || {
            answers(&format!("http://127.0.0.1:{port}/"))
        });
        println!("backend: nginx return 200, one worker");
        (None, Some(n), port)
    } else {
        let b = Backend::start("chat");
        let port = b.port;
        println!("backend: the tests' backend (nginx not installed)");
        (Some(b), None, port)
    };
    fake.put(&deployments(), deployment("inference", "chat", 0));
    fake.put(&slices(), slice("inference", "chat", backend, false));
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

    wake_signal(&fake, port, mport, backend, wakes);

    // Warm: the same backend directly, through the baselines and through
    // the activator, alternated.
    wait("ready", 10, || {
        scrape(
            mport,
            "gpuscale_activator_ready_endpoints{namespace=\"inference\",route=\"chat\"}",
        ) == Some(1.0)
    });
    let baselines = baselines(dir.path(), backend, with_nginx);
    let mut targets = vec![("direct", format!("http://127.0.0.1:{backend}/"))];
    targets.extend(baselines.iter().map(|(n, u, _)| (*n, u.clone())));
    targets.push(("activator", format!("http://127.0.0.1:{port}/")));
    for (threads, conns) in [(1, 32), (1, 1)] {
        compare(&targets, secs, threads, conns);
    }
    drop(baselines);

    held_rss(&fake, port, mport, backend, held, pid, idle);
    drop(proc);
}

/// The bare hyper proxy (`$BARE_PROXY_BIN`) and, when installed, nginx as a
/// reverse proxy (one worker, upstream keep-alive) in front of `backend`.
fn baselines(
    dir: &std::path::Path,
    backend: u16,
    with_nginx: bool,
) -> Vec<(&'static str, String, Proc)> {
    let mut out = Vec::new();
    if let Ok(bare) = std::env::var("BARE_PROXY_BIN") {
        let port = gpuscale_e2e::free_port();
        let mut cmd = Command::new(bare);
        cmd.arg(format!("127.0.0.1:{port}"))
            .arg(format!("127.0.0.1:{backend}"));
        let p = Proc::spawn("bare-proxy", cmd, &dir.join("bare-proxy.log"));
        let url = format!("http://127.0.0.1:{port}/");
        wait("the bare proxy", 10, || answers(&url));
        out.push(("bare hyper proxy", url, p));
    }
    if with_nginx {
        let port = gpuscale_e2e::free_port();
        let server = format!(
            "upstream backend {{ server 127.0.0.1:{backend}; keepalive 64; }}\n  \
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://backend; \
             proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}"
        );
        let p = nginx(dir, "nginx-proxy", &server);
        let url = format!("http://127.0.0.1:{port}/");
        wait("the nginx proxy", 10, || answers(&url));
        out.push(("nginx proxy", url, p));
    }
    out
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
