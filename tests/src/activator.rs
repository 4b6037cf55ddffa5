//! The activator's world: a model backend on real HTTP (plain requests,
//! keep-alive, and server-sent events token by token), raw HTTP/1.1 clients
//! that can hang up mid-wait, the parked Deployment and its EndpointSlice on
//! the fake Kubernetes API, and the activator binary itself.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kubeapi::{Gvr, KubeFake};
use crate::procs::Proc;

pub fn deployments() -> Gvr {
    ("apps".into(), "v1".into(), "deployments".into())
}

pub fn slices() -> Gvr {
    (
        "discovery.k8s.io".into(),
        "v1".into(),
        "endpointslices".into(),
    )
}

/// A Deployment at `replicas`.
pub fn deployment(ns: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas}, "status": {"replicas": replicas}})
}

/// The EndpointSlice of Service `svc`: `ready` endpoints on 127.0.0.1 at
/// `port` when true, none otherwise.
pub fn slice(ns: &str, svc: &str, port: u16, ready: bool) -> Value {
    let endpoints = if ready {
        json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}])
    } else {
        json!([])
    };
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{svc}-abc"), "namespace": ns,
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}]})
}

/// What the backend saw: the `x-seq` header of each request by
/// (connection accepted, request on it), and the headers of the last one.
/// Accept order is the order the activator sent them in while every
/// request has a fresh connection (a slow answer keeps them all busy);
/// the order reader threads get scheduled in is not.
#[derive(Default)]
pub struct Seen {
    pub seqs: Vec<(usize, usize, String)>,
    pub last_headers: String,
}

/// A model server on real HTTP/1.1 (keep-alive): `/sse` streams
/// `tokens` events `gap` apart; anything else answers `ok <name>`.
pub struct Backend {
    pub port: u16,
    pub seen: Arc<Mutex<Seen>>,
}

impl Backend {
    pub fn start(name: &str) -> Self {
        Self::start_with(name, Duration::ZERO)
    }

    /// Answers each plain request after `delay`.
    pub fn start_with(name: &str, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s, name) = (seen.clone(), name.to_string());
        std::thread::spawn(move || {
            for (accepted, conn) in listener.incoming().flatten().enumerate() {
                let (s, name) = (s.clone(), name.clone());
                std::thread::spawn(move || serve(conn, &s, &name, accepted, delay));
            }
        });
        Self { port, seen }
    }

    /// The headers of the last request, lower-cased.
    pub fn last_headers(&self) -> String {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_headers
            .to_ascii_lowercase()
    }

    pub fn seqs(&self) -> Vec<String> {
        let mut seqs = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seqs
            .clone();
        seqs.sort();
        seqs.into_iter().map(|(_, _, s)| s).collect()
    }
}

/// One response in one write, without Nagle: a reply split over several
/// small writes would wait for the peer's delayed ACK (40 ms).
fn serve(conn: TcpStream, seen: &Mutex<Seen>, name: &str, accepted: usize, delay: Duration) {
    let Ok(mut w) = conn.try_clone() else { return };
    let _ = conn.set_nodelay(true);
    let mut r = BufReader::new(conn);
    for nth in 0.. {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (mut len, mut headers) = (0usize, String::new());
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.trim_end().is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if let Some(v) = lower.strip_prefix("x-seq:") {
                let seq = (accepted, nth, v.trim().to_string());
                seen.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .seqs
                    .push(seq);
            }
            headers.push_str(&h);
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap_or_else(|e| e.into_inner()).last_headers = headers;
        let ok = if path == "/sse" {
            sse(&mut w)
        } else {
            std::thread::sleep(delay);
            let text = format!("ok {name}");
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            );
            w.write_all(reply.as_bytes()).is_ok()
        };
        if !ok || path == "/sse" {
            return;
        }
    }
}

/// Six events 150 ms apart, each in its own chunk.
fn sse(w: &mut TcpStream) -> bool {
    if write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    for i in 0..6 {
        let ev = format!("data: tok{i}\n\n");
        if write!(w, "{:x}\r\n{ev}\r\n", ev.len())
            .and_then(|()| w.flush())
            .is_err()
        {
            return false;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    write!(w, "0\r\n\r\n").is_ok()
}

/// Sends one HTTP/1.1 request (`Connection: close`) and returns the open
/// stream; drop it to hang up.
pub fn send(port: u16, path: &str, host: &str, headers: &str, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the activator");
    write!(s, "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}", body.len()).expect("send");
    s
}

/// The whole response: (status, head, body as received).
pub fn response(mut s: TcpStream) -> (u16, String, String) {
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_string(), body.to_string())
}

/// A running activator with its own ports.
pub struct Activator {
    pub port: u16,
    pub metrics_port: u16,
    pub proc: Proc,
}

impl Activator {
    /// Starts the binary against `fake` with `routes` (YAML) and extra flags.
    pub fn start(dir: &Path, name: &str, fake: &KubeFake, routes: &str, flags: &[&str]) -> Self {
        let kubeconfig = crate::write_file(dir, &format!("{name}.kubeconfig"), &fake.kubeconfig());
        let config = crate::write_file(dir, &format!("{name}.routes.yaml"), routes);
        let mut attempt = 1;
        loop {
            let mut a = Self::spawn(dir, name, &kubeconfig, &config, flags);
            let end = Instant::now() + Duration::from_secs(20);
            while a.scrape().is_none() && a.proc.running() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            if a.scrape().is_some() {
                return a;
            }
            let log = a.proc.log_tail(30);
            // A port read back free can be taken by another story's socket
            // before the binary binds it: start again on new ports.
            if attempt < 3 && log.contains("Address already in use") {
                attempt += 1;
                continue;
            }
            panic!("gave up waiting for the activator to serve; log:\n{log}");
        }
    }

    fn spawn(dir: &Path, name: &str, kubeconfig: &Path, config: &Path, flags: &[&str]) -> Self {
        let (port, metrics_port) = (crate::free_port(), crate::free_port());
        let mut cmd = std::process::Command::new(crate::bins::activator());
        cmd.arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics_port}"))
            .arg(format!("--config={}", config.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(flags)
            .env("RUST_LOG", "info,gpuscale_activator=debug");
        let proc = Proc::spawn(name, cmd, &dir.join(format!("{name}.log")));
        Self {
            port,
            metrics_port,
            proc,
        }
    }

    pub fn scrape(&self) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let (code, _, body) = response(s);
        (code == 200).then_some(body)
    }

    /// The value of one series, e.g. `gpuscale_activator_pending_requests{route="chat"}`.
    pub fn value(&self, series: &str) -> Option<f64> {
        let text = self.scrape()?;
        text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Polls `f` every 20 ms for up to 20 s.
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < end,
                "gave up waiting for {what}; log:\n{}",
                self.proc.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `series` reads `want`.
    pub fn wait_value(&self, series: &str, want: f64) {
        self.wait_for(&format!("{series} = {want}"), || {
            (self.value(series) == Some(want)).then_some(())
        });
    }
}

/// A routes file with one route per (name, model) on host `models.test`.
/// The endpoint port is the slice's port named `http`.
pub fn routes(ns: &str, entries: &[(&str, Option<&str>)]) -> String {
    let mut out = String::from("routes:\n");
    for (name, model) in entries {
        out.push_str(&format!("- name: {name}\n  host: models.test\n"));
        if let Some(m) = model {
            out.push_str(&format!("  model: {m}\n"));
        }
        out.push_str(&format!("  service: {{namespace: {ns}, name: {name}, port: http}}\n  target: {{kind: Deployment, name: {name}}}\n"));
    }
    out
}
