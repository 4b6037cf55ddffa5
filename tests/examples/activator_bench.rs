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

/// CPU time of process `pid` so far (all its threads), in ms.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line, in clock ticks (100 a second).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<f64>().ok())
        .sum();
    ticks * 10.0
}

/// A target of the warm comparison: its URL, and the process whose CPU
/// time per request is shown (the proxy; the backend when direct).
struct Target {
    name: &'static str,
    url: String,
    pid: u32,
}

/// wrk at `conns` connections against each target, alternated `rounds`
/// times; medians, and the activator's ratios to the others.
fn compare(targets: &[Target], secs: u64, rounds: usize, threads: u32, conns: u32) {
    let mut runs: Vec<[Vec<f64>; 3]> = vec![[vec![], vec![], vec![]]; targets.len()];
    for _ in 0..rounds {
        for (t, [rps, p99, cpu]) in targets.iter().zip(runs.iter_mut()) {
            let before = cpu_ms(t.pid);
            let (r, p) = wrk(&t.url, secs, threads, conns);
            rps.push(r);
            p99.push(p);
            cpu.push((cpu_ms(t.pid) - before) * 1000.0 / (r * secs as f64));
        }
    }
    println!(
        "warm, wrk -t{threads} -c{conns}, median of {rounds} runs of {secs} s each, alternated \
         (CPU: the proxy's, the backend's when direct, per request):"
    );
    let medians: Vec<[f64; 3]> = runs
        .iter_mut()
        .map(|[r, p, c]| [median(r), median(p), median(c)])
        .collect();
    let [ar, ap, _] = medians[medians.len() - 1];
    for (t, [r, p, c]) in targets.iter().zip(&medians) {
        println!(
            "  {:<18} {r:>8.0} req/s, p99 {p:.3} ms, CPU {c:.1} us  (activator: throughput x{:.2}, p99 x{:.2}, {:+.3} ms)",
            t.name,
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
    let rounds = env("ROUNDS", 3);
    let bin = std::env::var("ACTIVATOR_BIN").expect("ACTIVATOR_BIN: the activator binary");
    let dir = tempfile::tempdir().unwrap();
    let fake = KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: Arc::new(|_: &Value| (true, String::new())),
    });
    let with_nginx = has("nginx");
    let (_tests_backend, _nginx_backend, backend) = start_backend(dir.path(), with_nginx);
    fake.put(&deployments(), deployment("inference", "chat", 0));
    fake.put(&slices(), slice("inference", "chat", backend, false));
    let routes = "routes:\n- name: chat\n  service: {namespace: inference, name: chat, port: http}\n  target: {kind: Deployment, name: chat}\n";
    let config = gpuscale_e2e::write_file(dir.path(), "routes.yaml", routes);
    let kubeconfig = gpuscale_e2e::write_file(dir.path(), "kubeconfig", &fake.kubeconfig());
    let flags = [
        format!("--config={}", config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--queue-length={}", held + 10),
    ];
    let (proc, port, mport) = activator(&bin, "activator", dir.path(), &flags);
    // An earlier build, to compare a change in the same run.
    let base = std::env::var("ACTIVATOR_BASE_BIN")
        .ok()
        .map(|b| activator(&b, "activator-base", dir.path(), &flags));
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
    let backend_pid = match (&_tests_backend, &_nginx_backend) {
        (_, Some(n)) => n.child.id(),
        _ => std::process::id(),
    };
    let url = |port: u16| format!("http://127.0.0.1:{port}/");
    let mut targets = vec![Target {
        name: "direct",
        url: url(backend),
        pid: backend_pid,
    }];
    targets.extend(baselines.iter().map(|(name, u, p)| Target {
        name,
        url: u.clone(),
        pid: p.child.id(),
    }));
    if let Some((p, bport, _)) = &base {
        targets.push(Target {
            name: "activator (base)",
            url: url(*bport),
            pid: p.child.id(),
        });
    }
    targets.push(Target {
        name: "activator",
        url: url(port),
        pid: proc.child.id(),
    });
    for (threads, conns) in [(1, 32), (1, 1)] {
        compare(&targets, secs, rounds, threads, conns);
    }
    drop(baselines);
    drop(base);

    held_rss(&fake, port, mport, backend, held, pid, idle);
    drop(proc);
}

/// The activator `bin` on its own ports with `flags`, serving once its
/// route's series show: (process, proxy port, metrics port).
fn activator(bin: &str, name: &str, dir: &std::path::Path, flags: &[String]) -> (Proc, u16, u16) {
    let (port, mport) = (gpuscale_e2e::free_port(), gpuscale_e2e::free_port());
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--metrics-listen=127.0.0.1:{mport}"))
        .args(flags)
        .env("RUST_LOG", "warn");
    let proc = Proc::spawn(name, cmd, &dir.join(format!("{name}.log")));
    let pending = "gpuscale_activator_pending_requests{namespace=\"inference\",route=\"chat\"}";
    wait(name, 20, || scrape(mport, pending).is_some());
    (proc, port, mport)
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

/// The backend every target reaches: nginx's own `return 200` (one
/// worker) when nginx is installed, else the tests' backend; its port.
fn start_backend(dir: &std::path::Path, with_nginx: bool) -> (Option<Backend>, Option<Proc>, u16) {
    if with_nginx {
        let port = gpuscale_e2e::free_port();
        let server =
            format!("server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }}");
        let n = nginx(dir, "nginx-backend", &server);
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
    }
}
