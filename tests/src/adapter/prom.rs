//! A real Prometheus (Debian package) scraping a test target that serves
//! known series every second. One instance is shared by a test binary.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::procs;
use crate::procs::Proc;

/// What the target serves at scrape `n` (n = 1, 2, …). Counters grow by a
/// fixed step per scrape, so rates, ratios and quantiles are exact
/// whatever the scrape timing.
pub fn exposition(n: u64) -> String {
    let mut s = String::new();
    let ns = |ns: &str, pod: &str, wl: &str| {
        format!(
            "namespace=\"{ns}\",pod=\"{pod}\",container=\"server\",workload=\"{wl}\",workload_kind=\"Deployment\""
        )
    };
    // vLLM queue depth: chat = 3 + 4, embed = 10; another namespace has 100.
    s.push_str("# TYPE vllm:num_requests_waiting gauge\n");
    for (n_, pod, wl, v) in [
        ("inference", "chat-0", "chat", "3"),
        ("inference", "chat-1", "chat", "4"),
        ("inference", "embed-0", "embed", "10"),
        ("other", "chat-0", "chat", "100"),
        // A pod name that exists in `inference` without a series there.
        ("other", "ghost-0", "ghost", "50"),
        ("broken", "x-0", "nan", "NaN"),
        ("broken", "y-0", "inf", "+Inf"),
    ] {
        s.push_str(&format!(
            "vllm:num_requests_waiting{{{},model_name=\"m\"}} {v}\n",
            ns(n_, pod, wl)
        ));
    }
    // Per Service (the custom metrics API's objects): the gateway's pending
    // requests, 12 here and 99 in another namespace.
    s.push_str("# TYPE gateway_requests_pending gauge\n");
    for (n_, v) in [("inference", "12"), ("other", "99")] {
        s.push_str(&format!(
            "gateway_requests_pending{{namespace=\"{n_}\",service=\"gateway\"}} {v}\n"
        ));
    }
    // KV cache: chat 0.5 and 0.7 → 0.6.
    s.push_str("# TYPE vllm:kv_cache_usage_perc gauge\n");
    s.push_str(&format!(
        "vllm:kv_cache_usage_perc{{{}}} 0.5\n",
        ns("inference", "chat-0", "chat")
    ));
    s.push_str(&format!(
        "vllm:kv_cache_usage_perc{{{}}} 0.7\n",
        ns("inference", "chat-1", "chat")
    ));
    // TTFT histogram: per scrape +5 ≤0.1 s, +8 ≤0.25, +9 ≤0.5, +10 ≤1 → p95 = 0.75 s.
    histogram(
        &mut s,
        "vllm:time_to_first_token_seconds",
        &ns("inference", "chat-0", "chat"),
        n,
        &[("0.1", 5), ("0.25", 8), ("0.5", 9), ("1", 10), ("+Inf", 10)],
    );
    // E2E histogram: per scrape +2 ≤1 s, +6 ≤2.5, +9 ≤5, +10 ≤10 → p95 = 7.5 s.
    histogram(
        &mut s,
        "vllm:e2e_request_latency_seconds",
        &ns("inference", "chat-0", "chat"),
        n,
        &[("1", 2), ("2.5", 6), ("5", 9), ("10", 10), ("+Inf", 10)],
    );
    // TGI queue: 5.
    s.push_str("# TYPE tgi_queue_size gauge\n");
    s.push_str(&format!(
        "tgi_queue_size{{{}}} 5\n",
        ns("inference", "tgi-0", "tgi")
    ));
    // Triton: +50 000 µs of queue time per 10 successes → 5 ms.
    s.push_str("# TYPE nv_inference_queue_duration_us counter\n");
    s.push_str(&format!(
        "nv_inference_queue_duration_us{{{},model=\"m\"}} {}\n",
        ns("inference", "triton-0", "triton"),
        50_000 * n
    ));
    s.push_str("# TYPE nv_inference_request_success counter\n");
    s.push_str(&format!(
        "nv_inference_request_success{{{},model=\"m\"}} {}\n",
        ns("inference", "triton-0", "triton"),
        10 * n
    ));
    // Exporter GPU series: chat-0 max(0.9, 0.4, 40/80) = 0.9;
    // chat-1 max(0.3, 0.2, 60/80) = 0.75 → average 0.825.
    for (gpu, pod, util, dram, used) in [
        ("0", "chat-0", "0.9", "0.4", "40"),
        ("1", "chat-1", "0.3", "0.2", "60"),
    ] {
        let l = format!(
            "node=\"sim-node\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}\",{},label_app_kubernetes_io_name=\"chat\"",
            ns("inference", pod, "chat")
        );
        s.push_str(&format!("gpu_utilization_ratio{{{l}}} {util}\n"));
        s.push_str(&format!("gpu_dram_active_ratio{{{l}}} {dram}\n"));
        s.push_str(&format!("gpu_memory_used_bytes{{{l}}} {used}e9\n"));
        s.push_str(&format!("gpu_memory_total_bytes{{{l}}} 80e9\n"));
    }
    // Per-pod SM utilization (the exporter's gpu_pod_* family): equal to the
    // device's for a GPU held alone; two tts pods share GPU 2 at 0.35 and 0.45.
    for (gpu, pod, wl, util) in [
        ("0", "chat-0", "chat", "0.9"),
        ("1", "chat-1", "chat", "0.3"),
        ("2", "tts-0", "tts", "0.35"),
        ("2", "tts-1", "tts", "0.45"),
    ] {
        s.push_str(&format!(
            "gpu_pod_sm_utilization_ratio{{node=\"sim-node\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}\",mig_uuid=\"\",{}}} {util}\n",
            ns("inference", pod, wl)
        ));
    }
    // A gateway queue in front of a namespace with no pods (scaled to zero).
    s.push_str("# TYPE gateway_requests_waiting gauge\n");
    s.push_str("gateway_requests_waiting{namespace=\"idle\",service=\"chat\"} 5\n");
    // A shared GPU carries no pod labels on device series; it must never
    // count for a namespace.
    s.push_str("gpu_utilization_ratio{node=\"sim-node\",gpu=\"2\",uuid=\"GPU-2\"} 1\n");
    s
}

fn histogram(s: &mut String, name: &str, labels: &str, n: u64, buckets: &[(&str, u64)]) {
    s.push_str(&format!("# TYPE {name} histogram\n"));
    for (le, step) in buckets {
        s.push_str(&format!(
            "{name}_bucket{{{labels},le=\"{le}\"}} {}\n",
            step * n
        ));
    }
    let count = buckets.last().map_or(0, |b| b.1) * n;
    s.push_str(&format!("{name}_sum{{{labels}}} {}\n", count));
    s.push_str(&format!("{name}_count{{{labels}}} {count}\n"));
}

/// Serve [`exposition`] on a free port; returns the port.
pub fn start_target() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind target");
    let port = listener.local_addr().expect("addr").port();
    let scrapes = AtomicU64::new(0);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            read_request(&mut conn);
            let n = scrapes.fetch_add(1, Ordering::SeqCst) + 1;
            let body = exposition(n);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Read a request up to the end of its headers.
fn read_request(conn: &mut std::net::TcpStream) {
    let mut buf = [0u8; 4096];
    let mut req = Vec::new();
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => req.extend_from_slice(&buf[..k]),
        }
    }
}

/// Serve a gateway queue that a test switches: while `waiting` is 0 the
/// series is absent (no traffic yet), else it has that value. Returns the port.
pub fn start_switch_target(waiting: std::sync::Arc<AtomicU64>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind target");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            read_request(&mut conn);
            let mut body = String::from("# TYPE gateway_up gauge\ngateway_up 1\n");
            let n = waiting.load(Ordering::SeqCst);
            if n > 0 {
                body.push_str(&format!(
                    "gateway_requests_waiting{{namespace=\"wake\",service=\"chat\"}} {n}\n"
                ));
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A running Prometheus.
pub struct Prometheus {
    pub url: String,
    pub guard: Proc,
    pub dir: PathBuf,
}

impl Prometheus {
    /// Start Prometheus scraping `target_port` every second.
    pub fn start(target_port: u16) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuscale-adapter-prom-")
            .tempdir()
            .expect("tempdir")
            .keep();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: apps\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .expect("write config");
        let port = procs::free_port();
        let cmd = crate::procs::prometheus(&config, &dir, port);
        let guard = Proc::spawn_watched("prometheus", cmd, &dir.join("prometheus.log"), Some(&dir));
        Self {
            url: format!("http://127.0.0.1:{port}"),
            guard,
            dir,
        }
    }

    /// Instant query result as JSON text (None while Prometheus is not up).
    pub fn query(&self, q: &str) -> Option<serde_json::Value> {
        let url = format!("{}/api/v1/query?query={}", self.url, encode(q));
        let (status, body) = procs::get(&url)?;
        (status == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    }

    /// Wait until the histograms have at least three samples, so that
    /// every preset has data.
    pub fn wait_for_data(&self) {
        procs::eventually(
            "Prometheus to hold three scrapes of the test target",
            || {
                let v =
                    self.query("count_over_time(vllm:time_to_first_token_seconds_count[5m])")?;
                let n: f64 = v["data"]["result"][0]["value"][1].as_str()?.parse().ok()?;
                (n >= 3.0).then_some(())
            },
        );
    }
}

/// Percent-encode a query parameter.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The Prometheus shared by all tests of a binary, with data.
pub fn shared() -> &'static Prometheus {
    static PROM: OnceLock<Prometheus> = OnceLock::new();
    PROM.get_or_init(|| {
        let p = Prometheus::start(start_target());
        p.wait_for_data();
        p
    })
}
