//! A KEDA-like client of the adapter's external scaler: the Python script
//! `tests/python/keda_client.py` (grpcio, stubs generated from the adapter's
//! `.proto` at start), run in the test venv.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::Adapter;
use crate::bins::repo_root;

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct KedaClient {
    pub port: u16,
    /// Serving CA; `None` for plaintext (`--dev`).
    pub ca: Option<PathBuf>,
    /// Client certificate and key, as KEDA's `tlsClientCert`/`tlsClientKey`.
    pub cert: Option<(PathBuf, PathBuf)>,
}

impl KedaClient {
    /// Starts the adapter in `--dev` mode with `args` and its KEDA listener
    /// (plaintext) on a free port; KEDA's client for it.
    pub fn dev_adapter(args: &[String], log: PathBuf) -> (Adapter, Self) {
        let port = crate::free_port();
        let mut args = args.to_vec();
        args.extend(["--dev".into(), format!("--keda-listen=127.0.0.1:{port}")]);
        let client = Self {
            port,
            ca: None,
            cert: None,
        };
        (Adapter::start(&args, log), client)
    }
}

/// A ScaledObject's reference with its trigger metadata.
pub fn scaled_object(namespace: &str, metadata: &[(&str, &str)]) -> Value {
    let meta: serde_json::Map<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"name": "chat", "namespace": namespace, "metadata": meta})
}

impl KedaClient {
    fn command(&self, cmd: &str, arg: &Value, options: &[&str]) -> Command {
        let root = repo_root();
        let mut c = crate::python::command();
        c.arg(root.join("tests/python/keda_client.py"))
            .arg(format!(
                "--proto={}",
                root.join("adapter/keda/proto").display()
            ))
            .arg(format!("--target=127.0.0.1:{}", self.port));
        if let Some(ca) = &self.ca {
            c.arg(format!("--ca={}", ca.display()));
        }
        if let Some((cert, key)) = &self.cert {
            c.arg(format!("--cert={}", cert.display()))
                .arg(format!("--key={}", key.display()));
        }
        c.args(options).arg(cmd).arg(arg.to_string());
        c
    }

    fn run(&self, cmd: &str, arg: &Value, options: &[&str]) -> String {
        let out = self
            .command(cmd, arg, options)
            .output()
            .expect("run keda_client.py");
        assert!(
            out.status.success(),
            "keda_client.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One call: `{"ok": {...}}` or `{"code": ..., "details": ...}`.
    pub fn call(&self, rpc: &str, so: &Value) -> Value {
        self.calls(&[(rpc, so.clone())]).remove(0)
    }

    /// Several calls over one channel.
    pub fn calls(&self, calls: &[(&str, Value)]) -> Vec<Value> {
        let list: Vec<Value> = calls
            .iter()
            .map(|(rpc, so)| {
                let mut c = so.clone();
                c["rpc"] = json!(rpc);
                c
            })
            .collect();
        let out = self.run("calls", &json!(list), &[]);
        match serde_json::from_str(out.trim()) {
            Ok(Value::Array(v)) => v,
            _ => panic!("keda_client.py printed no JSON list: {out}"),
        }
    }

    /// KEDA's poll loop: `rounds` of GetMetrics + IsActive after GetMetricSpec.
    pub fn poll(&self, so: &Value, rounds: u32, interval: &str) -> Vec<Value> {
        let out = self.run(
            "poll",
            so,
            &[
                &format!("--rounds={rounds}"),
                &format!("--interval={interval}"),
            ],
        );
        out.lines()
            .map(|l| serde_json::from_str(l).expect("poll line"))
            .collect()
    }

    /// Open `StreamIsActive` (external-push).
    pub fn stream(&self, so: &Value) -> PushStream {
        let mut child = self
            .command("stream", so, &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start keda_client.py stream");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send((Instant::now(), v)).is_err()
                {
                    break;
                }
            }
        });
        let s = PushStream { child, rx };
        let first = s.next(Duration::from_secs(30)).expect("the client starts");
        assert_eq!(first.1["opened"], true, "{first:?}");
        s
    }
}

/// An open push stream; the client is killed on drop (a KEDA restart).
pub struct PushStream {
    child: Child,
    rx: Receiver<(Instant, Value)>,
}

impl PushStream {
    /// The next message and when it arrived.
    pub fn next(&self, within: Duration) -> Option<(Instant, Value)> {
        self.rx.recv_timeout(within).ok()
    }
}

impl Drop for PushStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
