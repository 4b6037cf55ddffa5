//! Figures of the scale-to-zero controller, on the real adapter binary, a
//! real Prometheus and the in-memory Kubernetes API (run through
//! `bench/scale-to-zero-load.sh`):
//!
//! 1. wake latency: WAKES parked targets are woken one after the other; for
//!    each, the time from the first Prometheus sample above the activation
//!    threshold (its scrape timestamp) to the scale patch the API accepted;
//! 2. CPU, RSS and API requests: the adapter with `--scale-to-zero` and no
//!    policy, then with POLICIES (half running with an open idle window,
//!    half parked), then POLICIES busy (every queue depth changing each
//!    second), each measured over DURATION seconds at the adapter's default
//!    intervals; the API server counts the requests it receives.
//!
//! Environment: WAKES (20), POLICIES (500), DURATION (60, seconds), POLL
//! (1s) and WAKE_INTERVAL (1s) for the wake phase, STEADY=0 to measure
//! only the busy policies, ADAPTER_ARGS (flags added to the adapter's in
//! every phase, split on spaces).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpuscale_e2e::adapter::client::Adapter;
use gpuscale_e2e::adapter::procs::eventually;
use gpuscale_e2e::adapter::prom::Prometheus;
use gpuscale_e2e::adapter::series::Series;
use gpuscale_e2e::kubeapi::{Cluster, Gvr, KubeFake};
use serde_json::{Value, json};

const NS: &str = "bench";
const CONFIG: &str = "metrics:\n  - name: queue_depth\n    query: sum(vllm:num_requests_waiting{${matchers}})\n  - name: gateway_pending\n    query: sum(gateway_requests_pending{${matchers}})\n";

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_str(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn gvr(g: &str, v: &str, r: &str) -> Gvr {
    (g.into(), v.into(), r.into())
}

/// Queue depth of every server and pending requests at every gateway;
/// `pending` lists the gateways with one request waiting.
fn exposition(n: usize, pending: &[usize]) -> String {
    queues(n, pending, |_| 0)
}

/// As [`exposition`], with server `i`'s queue depth `depth(i)`.
fn queues(n: usize, pending: &[usize], depth: impl Fn(usize) -> u64) -> String {
    let mut s = String::from("# TYPE vllm:num_requests_waiting gauge\n");
    for i in 0..n {
        s.push_str(&format!(
            "vllm:num_requests_waiting{{namespace=\"{NS}\",pod=\"s{i}-0\"}} {}\n",
            depth(i)
        ));
    }
    s.push_str("# TYPE gateway_requests_pending gauge\n");
    for i in 0..n {
        let v = u8::from(pending.contains(&i));
        s.push_str(&format!(
            "gateway_requests_pending{{namespace=\"{NS}\",service=\"g{i}\"}} {v}\n"
        ));
    }
    s
}

/// Target `s{i}` (parked: 0 replicas, recorded 1) and its policy.
fn world(kube: &KubeFake, i: usize, parked: bool) {
    let replicas = i32::from(!parked);
    kube.put(
        &gvr("apps", "v1", "deployments"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("s{i}"), "namespace": NS},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "readyReplicas": replicas}}),
    );
    // A parked one as this controller leaves it: the record in its status.
    let status = if parked {
        json!({"phase": "Parked", "parked": {"replicas": 1, "at": "2026-12-01T10:00:00Z",
            "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("s{i}")}}})
    } else {
        json!({})
    };
    kube.put(
        &gvr("gpuscale.dev", "v1alpha1", "scaletozeropolicies"),
        json!({"apiVersion": "gpuscale.dev/v1alpha1", "kind": "ScaleToZeroPolicy",
        "metadata": {"name": format!("s{i}"), "namespace": NS, "generation": 1},
        "spec": {
            "target": {"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("s{i}")},
            "idle": {"metric": "queue_depth", "labelSelector": format!("pod=s{i}-0"), "for": "1h"},
            "activation": {"metric": "gateway_pending", "labelSelector": format!("service=g{i}")},
        },
        "status": status}),
    );
}

fn fake() -> KubeFake {
    KubeFake::start(Cluster {
        auth_configmap: Default::default(),
        tokens: Default::default(),
        sar: std::sync::Arc::new(|_: &Value| (true, String::new())),
    })
}

fn adapter(kube: &KubeFake, prom: &str, dir: &std::path::Path, extra: &[String]) -> Adapter {
    let kc = gpuscale_e2e::write_file(dir, "kubeconfig", &kube.kubeconfig());
    let cfg = gpuscale_e2e::write_file(dir, "metrics.yaml", CONFIG);
    let mut args = vec![
        "--dev".to_string(),
        format!("--kubeconfig={}", kc.display()),
        format!("--config={}", cfg.display()),
        format!("--prometheus-url={prom}"),
        "--scale-to-zero".into(),
        "--scale-to-zero-identity=bench".into(),
        "--scale-to-zero-lease-namespace=gpuscale".into(),
    ];
    args.extend_from_slice(extra);
    let more = std::env::var("ADAPTER_ARGS").unwrap_or_default();
    args.extend(more.split_whitespace().map(String::from));
    Adapter::start(&args, dir.join("adapter.log"))
}

/// Policies whose status the controller has written with every rule read
/// (a first round can run before the poll cache has the rule's series:
/// `ReadUnknown`, rewritten once it has), and, given `reason`, says it.
fn decided(kube: &KubeFake, reason: Option<&str>) -> usize {
    kube.list(&gvr("gpuscale.dev", "v1alpha1", "scaletozeropolicies"), NS)
        .iter()
        .filter(|p| p["status"]["observedGeneration"].is_number())
        .filter(|p| p["status"]["reason"] != "ReadUnknown")
        .filter(|p| reason.is_none_or(|r| p["status"]["reason"] == r))
        .count()
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The scrape timestamp of the first sample of gateway `g{i}` above 0.
fn first_active_sample(prom: &Prometheus, i: usize) -> Option<f64> {
    let r = prom.query(&format!("gateway_requests_pending{{service=\"g{i}\"}}[5m]"))?;
    r["data"]["result"][0]["values"]
        .as_array()?
        .iter()
        .find(|v| v[1].as_str().and_then(|s| s.parse::<f64>().ok()) > Some(0.0))
        .and_then(|v| v[0].as_f64())
}

fn wake_latency(wakes: usize, dir: &std::path::Path) -> Vec<f64> {
    let (series, port) = Series::serve(&exposition(wakes, &[]));
    let prom = Prometheus::start(port);
    let kube = fake();
    for i in 0..wakes {
        world(&kube, i, true);
    }
    let extra = [
        format!("--poll-interval={}", env_str("POLL", "1s")),
        format!(
            "--scale-to-zero-wake-interval={}",
            env_str("WAKE_INTERVAL", "1s")
        ),
    ];
    let _adapter = adapter(&kube, &prom.url, dir, &extra);
    eventually("every policy decided", || {
        (decided(&kube, None) == wakes).then_some(())
    });
    let mut latencies = Vec::new();
    let mut pending = Vec::new();
    for i in 0..wakes {
        pending.push(i);
        series.set(&exposition(wakes, &pending));
        let name = format!("s{i}");
        let patch = eventually("the wake's scale patch", || {
            kube.scale_patches().into_iter().find(|p| p.name == name)
        });
        let sample = eventually("the first active sample in Prometheus", || {
            first_active_sample(&prom, i)
        });
        let latency = unix(patch.at) - sample;
        eprintln!("wake {i}: {latency:.3} s");
        latencies.push(latency);
        // Let the next wake start at an arbitrary point of the intervals.
        std::thread::sleep(Duration::from_millis(300 + 137 * (i as u64 % 7)));
    }
    latencies
}

/// (utime + stime in seconds, RSS in MiB) of `pid`.
fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    (ticks / clock_ticks(), rss_kib / 1024.0)
}

/// RSS split as the kernel counts it now: anonymous (heap, stacks) and
/// file-backed (the binary's code and data pages), MiB.
fn split(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    format!(
        "anonymous {:.1} MiB, file-backed {:.1} MiB",
        kib("RssAnon:") / 1024.0,
        kib("RssFile:") / 1024.0
    )
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// What a window measured: CPU (% of one core), the median and max RSS
/// sampled each second (MiB), and the requests per second the API server
/// received: writes (POST, PUT, PATCH, DELETE) and all.
struct Window {
    cpu: f64,
    rss: f64,
    rss_max: f64,
    writes: f64,
    requests: f64,
}

/// The writes among `requests` (as the API server logs them) counted by
/// method and resource: `PATCH scaletozeropolicies/status: 3, PUT leases: 30`.
fn writes_by_resource(requests: &[String]) -> String {
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    for r in requests.iter().filter(|r| !r.starts_with("GET ")) {
        let (method, rest) = r.split_once(' ').unwrap_or((r, ""));
        let path = rest.split('?').next().unwrap_or("");
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let at = parts
            .iter()
            .position(|p| *p == "namespaces")
            .map_or(0, |i| i + 2);
        let resource = match parts.get(at..).unwrap_or_default() {
            [res, _name, sub, ..] => format!("{res}/{sub}"),
            [res, ..] => (*res).to_string(),
            [] => path.to_string(),
        };
        *by.entry(format!("{method} {resource}")).or_default() += 1;
    }
    let all: Vec<String> = by.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    all.join(", ")
}

/// (writes, all requests) the API server has received.
fn requests(kube: &KubeFake) -> (u64, u64) {
    let counts = kube.request_counts();
    let writes = ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .map(|m| counts.get(*m).copied().unwrap_or(0))
        .sum();
    (writes, counts.values().sum())
}

/// A window of `secs` seconds; `tick` runs once a second (a load that changes).
fn measure(pid: u32, kube: &KubeFake, secs: u64, mut tick: impl FnMut(u64)) -> Window {
    let (cpu0, _) = usage(pid);
    let (w0, r0) = requests(kube);
    let t0 = Instant::now();
    let mut rss = Vec::new();
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(1));
        n += 1;
        tick(n);
        rss.push(usage(pid).1);
    }
    let (cpu1, _) = usage(pid);
    let (w1, r1) = requests(kube);
    let elapsed = t0.elapsed().as_secs_f64();
    Window {
        cpu: 100.0 * (cpu1 - cpu0) / elapsed,
        rss: median(&mut rss),
        rss_max: rss.iter().copied().fold(0.0, f64::max),
        writes: (w1 - w0) as f64 / elapsed,
        requests: (r1 - r0) as f64 / elapsed,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn steady_state(policies: usize, secs: u64, dir: &std::path::Path) {
    let (_series, port) = Series::serve(&exposition(policies, &[]));
    let prom = Prometheus::start(port);
    let kube = fake();
    let a = adapter(&kube, &prom.url, dir, &[]);
    let pid = a.guard.child.id();
    std::thread::sleep(Duration::from_secs(5));
    let idle = measure(pid, &kube, secs, |_| ());
    println!(
        "no policy: adapter CPU {:.2} % of a core, RSS median {:.1} MiB over {secs} s (at its end {})",
        idle.cpu,
        idle.rss,
        split(pid)
    );
    for i in 0..policies {
        world(&kube, i, i % 2 == 1);
    }
    eventually("every policy decided", || {
        (decided(&kube, None) == policies).then_some(())
    });
    // One poll of every key and one round of every policy before measuring.
    std::thread::sleep(Duration::from_secs(15));
    let w = measure(pid, &kube, secs, |_| ());
    println!(
        "{policies} policies ({} parked): adapter CPU {:.2} % of a core (+{:.2} over no policy), RSS median {:.1} MiB, max {:.1} MiB, API writes {:.2}/s, requests {:.2}/s over {secs} s (at its end {})",
        policies / 2,
        w.cpu,
        w.cpu - idle.cpu,
        w.rss,
        w.rss_max,
        w.writes,
        w.requests,
        split(pid)
    );
}

/// POLICIES running targets whose idle rule reads busy, each server's
/// queue depth changing every second: what a status with live values would
/// write every round.
fn busy(policies: usize, secs: u64, dir: &std::path::Path) {
    let depth = |t: u64| move |i: usize| 1 + (t + i as u64) % 5;
    let (series, port) = Series::serve(&queues(policies, &[], depth(0)));
    let prom = Prometheus::start(port);
    let kube = fake();
    let a = adapter(&kube, &prom.url, dir, &[]);
    for i in 0..policies {
        world(&kube, i, false);
    }
    eventually("every policy read busy", || {
        (decided(&kube, Some("Busy")) == policies).then_some(())
    });
    std::thread::sleep(Duration::from_secs(15));
    let pid = a.guard.child.id();
    let before = kube.requests().len();
    let w = measure(pid, &kube, secs, |t| {
        series.set(&queues(policies, &[], depth(t)));
    });
    println!(
        "{policies} busy policies (queue depths changing every second): adapter CPU {:.2} % of a core, RSS median {:.1} MiB, API writes {:.2}/s, requests {:.2}/s over {secs} s (at its end {})",
        w.cpu,
        w.rss,
        w.writes,
        w.requests,
        split(pid)
    );
    let log = kube.requests();
    println!(
        "  its writes: {}",
        writes_by_resource(log.get(before..).unwrap_or_default())
    );
}

fn main() {
    let wakes = env("WAKES", 20) as usize;
    let policies = env("POLICIES", 500) as usize;
    let secs = env("DURATION", 60);
    let dir = tempfile::Builder::new()
        .prefix("gpuscale-stz-load-")
        .tempdir()
        .expect("tempdir");
    let wake_dir = dir.path().join("wake");
    let load_dir = dir.path().join("load");
    for d in [&wake_dir, &load_dir] {
        std::fs::create_dir_all(d).expect("work dir");
    }
    if wakes > 0 {
        let mut l = wake_latency(wakes, &wake_dir);
        let max = l.iter().copied().fold(0.0, f64::max);
        println!(
            "wake latency (first sample above the threshold → scale patch) over {wakes} wakes: median {:.3} s, max {max:.3} s (1 s scrape, --poll-interval={}, --scale-to-zero-wake-interval={})",
            median(&mut l),
            env_str("POLL", "1s"),
            env_str("WAKE_INTERVAL", "1s"),
        );
    }
    if policies > 0 {
        if env("STEADY", 1) == 1 {
            steady_state(policies, secs, &load_dir);
        }
        let busy_dir = dir.path().join("busy");
        std::fs::create_dir_all(&busy_dir).expect("work dir");
        busy(policies, secs, &busy_dir);
    }
}
