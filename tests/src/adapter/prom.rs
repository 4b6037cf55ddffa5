//! A real Prometheus (Debian package) scraping a test target that serves
//! the scripted cluster of [`fleet`] every second. One instance is shared
//! by a test binary.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{fleet, procs};
use crate::procs::Proc;

/// What the target serves at `path` on its `n`th scrape (n = 1, 2, …).
pub fn exposition(path: &str, n: u64) -> Option<String> {
    match path {
        "/exporter" => Some(fleet::exporter_exposition()),
        "/kube-state-metrics" => Some(fleet::kube_state_metrics_exposition()),
        "/edge-gateway" => Some(fleet::edge_gateway_exposition()),
        _ => {
            if let Some(rest) = path.strip_prefix("/services/") {
                let (ns, name) = rest.split_once('/')?;
                return fleet::service_exposition(ns, name);
            }
            let (ns, pod) = path.strip_prefix("/pods/")?.split_once('/')?;
            fleet::server_exposition(ns, pod, n)
        }
    }
}

/// Serve [`exposition`] on a free port; returns the port.
pub fn start_target() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind target");
    let port = listener.local_addr().expect("addr").port();
    let mut scrapes: HashMap<String, u64> = HashMap::new();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let path = read_request(&mut conn);
            let n = scrapes.entry(path.clone()).or_default();
            *n += 1;
            let (status, body) = match exposition(&path, *n) {
                Some(body) => ("200 OK", body),
                None => ("404 Not Found", String::new()),
            };
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Read a request up to the end of its headers; returns its path.
fn read_request(conn: &mut std::net::TcpStream) -> String {
    let mut buf = [0u8; 4096];
    let mut req = Vec::new();
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => req.extend_from_slice(&buf[..k]),
        }
    }
    let head = String::from_utf8_lossy(&req);
    head.split(' ').nth(1).unwrap_or("/").to_string()
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
    /// Start Prometheus scraping one target at `target_port` every second
    /// (honor_labels: the target's own labels are kept as served).
    pub fn start(target_port: u16) -> Self {
        Self::start_with(&format!(
            "scrape_configs:\n  - job_name: apps\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
        ))
    }

    /// Start Prometheus scraping the [`fleet`] that [`start_target`] serves
    /// at `target_port`, every second, as a cluster's Prometheus would.
    pub fn start_fleet(target_port: u16) -> Self {
        Self::start_with(&fleet::scrape_configs(target_port))
    }

    fn start_with(scrape_configs: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuscale-adapter-prom-")
            .tempdir()
            .expect("tempdir")
            .keep();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{}",
                scrape_configs
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
        let p = Prometheus::start_fleet(start_target());
        p.wait_for_data();
        p
    })
}
