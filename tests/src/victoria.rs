//! VictoriaMetrics as the query engine (Debian package `victoria-metrics`):
//! a single node started on 127.0.0.1 with a temp dir, ingesting with its
//! own Prometheus-compatible scraper (`-promscrape.config`, the same scrape
//! jobs as the tests' Prometheus), and `vmalert` evaluating the rule files
//! against it and writing recorded series and alert state back to it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::adapter::{fleet, procs, prom};
use crate::procs::Proc;

/// `-search.latencyOffset` of the test instance. VictoriaMetrics evaluates
/// an instant query for "now" at now minus this offset (30s by default), so
/// that the newest samples of every series have arrived; at 1s scrapes the
/// tests use 1s (docs/operations.md, "Thanos, Mimir, VictoriaMetrics").
pub const LATENCY_OFFSET: &str = "1s";

/// A running VictoriaMetrics single node.
pub struct VictoriaMetrics {
    pub url: String,
    pub guard: Proc,
    pub dir: PathBuf,
}

impl VictoriaMetrics {
    /// Starts VictoriaMetrics scraping `scrape_configs` (a Prometheus
    /// `scrape_configs:` section) every second; waits until it is healthy.
    pub fn start(scrape_configs: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuscale-victoriametrics-")
            .tempdir()
            .expect("tempdir")
            .keep();
        let config = crate::write_file(
            &dir,
            "scrape.yml",
            &format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n{scrape_configs}"),
        );
        require("victoria-metrics");
        let port = procs::free_port();
        let mut cmd = Command::new("victoria-metrics");
        cmd.arg(format!("-storageDataPath={}", dir.join("data").display()))
            .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            .arg(format!("-promscrape.config={}", config.display()))
            .arg("-retentionPeriod=1d")
            .arg(format!("-search.latencyOffset={LATENCY_OFFSET}"))
            .arg("-memory.allowedBytes=256MiB")
            .arg("-loggerLevel=WARN");
        let mut guard = Proc::spawn_watched(
            "victoria-metrics",
            cmd,
            &dir.join("victoria-metrics.log"),
            Some(&dir),
        );
        let url = format!("http://127.0.0.1:{port}");
        procs::eventually("VictoriaMetrics to be healthy", || {
            guard.assert_running();
            procs::get(&format!("{url}/health")).and_then(|(s, _)| (s == 200).then_some(()))
        });
        Self { url, guard, dir }
    }

    /// Starts VictoriaMetrics scraping the adapter tests' [`fleet`] served by
    /// [`prom::start_target`] at `target_port`.
    pub fn start_fleet(target_port: u16) -> Self {
        Self::start(&fleet::scrape_configs(target_port))
    }

    /// The JSON answer of an instant query (None unless it succeeded).
    pub fn query(&self, q: &str) -> Option<Value> {
        let url = format!("{}/api/v1/query?query={}", self.url, prom::encode(q));
        let (status, body) = procs::get(&url)?;
        let v: Value = serde_json::from_str(&body).ok()?;
        (status == 200 && v["status"] == "success").then_some(v)
    }

    /// The instant vector of `q` (an error names the query and the answer).
    pub fn vector(&self, q: &str) -> Result<Vec<Value>, String> {
        let v = self
            .query(q)
            .ok_or_else(|| format!("{q}: no successful answer"))?;
        v["data"]["result"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("{q}: no result in {v}"))
    }

    /// Waits until the histograms have at least three samples, so that
    /// every preset has data (as [`prom::Prometheus::wait_for_data`]).
    pub fn wait_for_data(&self) {
        procs::eventually(
            "VictoriaMetrics to hold three scrapes of the test target",
            || {
                let v =
                    self.query("count_over_time(vllm:time_to_first_token_seconds_count[5m])")?;
                let n: f64 = v["data"]["result"][0]["value"][1].as_str()?.parse().ok()?;
                (n >= 3.0).then_some(())
            },
        );
    }

    /// Instant-query requests VictoriaMetrics has served, by its own counter.
    pub fn query_requests(&self) -> f64 {
        let (_, text) =
            procs::get(&format!("{}/metrics", self.url)).expect("VictoriaMetrics /metrics");
        text.lines()
            .filter(|l| {
                l.starts_with("vm_http_requests_total{") && l.contains("path=\"/api/v1/query\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// The VictoriaMetrics shared by all tests of a binary, scraping the
/// [`fleet`], with data.
pub fn shared() -> &'static VictoriaMetrics {
    static VM: OnceLock<VictoriaMetrics> = OnceLock::new();
    VM.get_or_init(|| {
        let vm = VictoriaMetrics::start_fleet(prom::start_target());
        vm.wait_for_data();
        vm
    })
}

/// Panics with what to install when `bin` is not on PATH.
fn require(bin: &str) {
    assert!(
        crate::alerts::procs::on_path(bin),
        "`{bin}` is not on PATH: install the Debian package victoria-metrics (`bash .ci/run` does)"
    );
}

/// `vmalert -dryRun` on one rule file: Ok, or its output.
pub fn dry_run(rule_file: &Path) -> Result<(), String> {
    require("vmalert");
    let out = Command::new("vmalert")
        .arg("-dryRun")
        .arg(format!("-rule={}", rule_file.display()))
        .arg("-loggerLevel=WARN")
        .output()
        .expect("run vmalert");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A running vmalert: rules evaluated every second against `datasource`,
/// recorded series and alert state written back to it, alerts sent to
/// `notifier` (an Alertmanager).
pub struct Vmalert {
    pub url: String,
    pub guard: Proc,
}

impl Vmalert {
    pub fn start(dir: &Path, rule_files: &[PathBuf], datasource: &str, notifier: &str) -> Self {
        require("vmalert");
        let port = procs::free_port();
        let mut cmd = Command::new("vmalert");
        for f in rule_files {
            cmd.arg(format!("-rule={}", f.display()));
        }
        cmd.arg(format!("-datasource.url={datasource}"))
            .arg(format!("-remoteWrite.url={datasource}"))
            .arg("-remoteWrite.flushInterval=1s")
            .arg(format!("-notifier.url={notifier}"))
            .arg("-evaluationInterval=1s")
            .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            .arg("-loggerLevel=WARN");
        let mut guard = Proc::spawn("vmalert", cmd, &dir.join("vmalert.log"));
        let url = format!("http://127.0.0.1:{port}");
        procs::eventually("vmalert to listen", || {
            guard.assert_running();
            procs::get(&format!("{url}/health")).and_then(|(s, _)| (s == 200).then_some(()))
        });
        Self { url, guard }
    }

    /// The alerts vmalert holds (`/api/v1/alerts`, Prometheus' shape).
    pub fn alerts(&self) -> Vec<Value> {
        procs::get(&format!("{}/api/v1/alerts", self.url))
            .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
            .and_then(|v| v["data"]["alerts"].as_array().cloned())
            .unwrap_or_default()
    }
}
