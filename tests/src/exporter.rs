//! Running the real exporter binary and reading what it serves.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bins;

pub use crate::free_port;

/// A running `gpuscale-exporter`, killed on drop.
pub struct Exporter {
    child: Child,
    pub port: u16,
    log: tempfile::NamedTempFile,
    /// Set for an exporter owned by a static (see [`Exporter::simulate_shared`]).
    watchdog: Option<Child>,
}

impl Exporter {
    /// Starts the exporter with `args` (plus `--listen`), not waiting for readiness.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_with_probe(args, true)
    }

    /// As [`Exporter::spawn`]; `probe` waits for plain-HTTP /healthz (off for TLS).
    pub fn spawn_with_probe(args: &[&str], probe: bool) -> Self {
        Self::start(Command::new(bins::exporter()), args, probe)
    }

    /// As [`Exporter::spawn`], with the open-file limit (`ulimit -n`) lowered.
    pub fn spawn_with_fd_limit(args: &[&str], nofile: u32) -> Self {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(bins::exporter());
        Self::start(cmd, args, true)
    }

    fn start(mut cmd: Command, args: &[&str], probe: bool) -> Self {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let listen = format!("127.0.0.1:{port}");
        let child = cmd
            .args(args)
            .args(["--listen", &listen, "--simulator-lib"])
            .arg(bins::simulator_lib())
            .env_remove("GPUSCALE_SIM_SCENARIO")
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log handle"))
            .spawn()
            .expect("start gpuscale-exporter");
        let me = Self {
            child,
            port,
            log,
            watchdog: None,
        };
        if probe {
            me.wait_http();
        }
        me
    }

    /// Starts the exporter on a scenario file and waits until /readyz says ready.
    pub fn simulate(scenario: &Path, extra: &[&str]) -> Self {
        let s = scenario.to_str().expect("utf-8 path");
        let mut args = vec!["--simulate", s, "--collect-interval", "200ms"];
        args.extend_from_slice(extra);
        let me = Self::spawn(&args);
        me.wait_ready();
        me
    }

    /// As [`Exporter::simulate`], with `env` set for the exporter (e.g. the
    /// NVML simulator's live processes' directory).
    pub fn simulate_env(scenario: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Self {
        let s = scenario.to_str().expect("utf-8 path");
        let mut args = vec!["--simulate", s, "--collect-interval", "200ms"];
        args.extend_from_slice(extra);
        let mut cmd = Command::new(bins::exporter());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let me = Self::start(cmd, &args, true);
        me.wait_ready();
        me
    }

    /// As [`Exporter::simulate`], for an exporter several tests share from a
    /// static: killed (and its log removed) when the test process exits.
    pub fn simulate_shared(scenario: &Path, extra: &[&str]) -> Self {
        let mut me = Self::simulate(scenario, extra);
        me.watchdog = crate::procs::watchdog(me.child.id(), Some(me.log.path()));
        me
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    fn wait_http(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if ureq::get(&self.url("/healthz")).call().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("exporter did not serve /healthz; log:\n{}", self.log());
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if ureq::get(&self.url("/readyz"))
                .call()
                .is_ok_and(|r| r.status() == 200)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("exporter never became ready; log:\n{}", self.log());
    }

    /// Status code of a GET (errors included).
    pub fn status(&self, path: &str) -> u16 {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        agent
            .get(&self.url(path))
            .call()
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    }

    /// The text exposition.
    pub fn scrape_text(&self) -> String {
        ureq::get(&self.url("/metrics"))
            .call()
            .expect("scrape")
            .body_mut()
            .read_to_string()
            .expect("body")
    }

    /// The OpenMetrics exposition, as Prometheus 3 negotiates it first.
    pub fn scrape_openmetrics(&self) -> String {
        ureq::get(&self.url("/metrics"))
            .header("Accept", "application/openmetrics-text;version=1.0.0")
            .call()
            .expect("scrape")
            .body_mut()
            .read_to_string()
            .expect("body")
    }

    /// Both expositions pass the strict checks of [`crate::exposition`].
    pub fn assert_strict_expositions(&self) {
        let text = self.scrape_text();
        crate::exposition::assert_unique_family_names(&text);
        crate::exposition::assert_promtool_accepts(&text);
        crate::exposition::assert_strict_openmetrics(&self.scrape_openmetrics());
    }

    pub fn scrape(&self) -> Metrics {
        Metrics::parse(&self.scrape_text())
    }

    /// Scrapes until `pred` holds (collections run every 200 ms in tests).
    pub fn scrape_until(&self, what: &str, pred: impl Fn(&Metrics) -> bool) -> Metrics {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let m = self.scrape();
            if pred(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(self.log.path()).and_then(|mut f| f.read_to_string(&mut s));
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(w) = &mut self.watchdog {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed text exposition.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub samples: Vec<Sample>,
    /// Family name → (type, help).
    pub families: BTreeMap<String, (String, String)>,
}

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let mut m = Metrics::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                m.families.entry(name.to_string()).or_default().1 = help.to_string();
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                m.families.entry(name.to_string()).or_default().0 = kind.to_string();
            } else if !line.starts_with('#') && !line.is_empty() {
                m.samples.push(parse_sample(line));
            }
        }
        m
    }

    /// Samples of `name` whose labels include all of `labels`.
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The single sample's value; panics if there is not exactly one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.find(name, labels);
        assert_eq!(
            found.len(),
            1,
            "expected one {name}{labels:?}, found {found:?}"
        );
        found[0].value
    }

    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found = self.find(name, labels);
        (found.len() == 1).then(|| found[0].value)
    }

    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

fn parse_sample(line: &str) -> Sample {
    let (head, value) = line.rsplit_once(' ').expect("sample line has a value");
    let value = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
    };
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (
            n,
            parse_labels(rest.strip_suffix('}').expect("closing brace")),
        ),
        None => (head, BTreeMap::new()),
    };
    Sample {
        name: name.to_string(),
        labels,
        value,
    }
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut chars = s.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'));
        let mut val = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => val.push('\n'),
                    Some(c) => val.push(c),
                    None => break,
                },
                '"' => break,
                c => val.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').to_string(), val);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    out
}
