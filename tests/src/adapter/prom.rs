//! A real Prometheus (Debian package) scraping a test target that serves
//! the scripted cluster of [`fleet`] every second. One instance is shared
//! by a test binary.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::{fleet, procs};
use crate::procs::Proc;

/// What the target serves at `path` on its `n`th scrape (n = 1, 2, …).
pub fn exposition(path: &str, n: u64) -> Option<String> {
    match path {
        "/exporter" => Some(fleet::exporter_exposition()),
        "/kube-state-metrics" => Some(fleet::kube_state_metrics_exposition()),
        _ => {
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
            let mut buf = [0u8; 4096];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => req.extend_from_slice(&buf[..k]),
                }
            }
            let head = String::from_utf8_lossy(&req);
            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
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
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{}",
                fleet::scrape_configs(target_port)
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
