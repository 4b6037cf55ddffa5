//! The adapter process and its real clients: `kubectl get --raw` over TLS
//! with client certificates or tokens, and `curl` where headers matter
//! (the aggregator's front-proxy headers) or the exact status code does.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::procs;
use crate::procs::Proc;

/// A running `gpuscale-adapter`.
pub struct Adapter {
    pub guard: Proc,
    pub port: u16,
    pub metrics_port: u16,
    /// The CA its clients trust; `None` for `--dev`'s self-signed pair
    /// (`curl -k`).
    pub ca: Option<PathBuf>,
}

impl Adapter {
    /// Start the adapter with `args` plus free `--listen`/`--metrics-listen`
    /// ports; wait until its self-metrics port answers.
    pub fn start(args: &[String], log: PathBuf) -> Self {
        Self::start_cleaning(args, log, None)
    }

    /// Like [`Adapter::start`]; `dir` is removed when the test process exits
    /// (for an adapter shared through a static).
    pub fn start_cleaning(args: &[String], log: PathBuf, dir: Option<&Path>) -> Self {
        let port = procs::free_port();
        let metrics_port = procs::free_port();
        let mut cmd = Command::new(crate::bins::adapter());
        cmd.args(args)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics_port}"))
            .env(
                "RUST_LOG",
                "info,gpuscale_adapter=debug,gpuscale_scale_to_zero=debug,gpuscale_keda=debug",
            );
        let mut guard = Proc::spawn_watched("gpuscale-adapter", cmd, &log, dir);
        procs::eventually("the adapter to listen", || {
            assert!(guard.running(), "the adapter exited:\n{}", guard.log_text());
            procs::get(&format!("http://127.0.0.1:{metrics_port}/healthz")).map(|_| ())
        });
        Self {
            guard,
            port,
            metrics_port,
            ca: None,
        }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `curl -X method` `path` on this adapter as `who` with `headers`:
    /// (status, the JSON body or null).
    pub fn request(
        &self,
        method: &str,
        who: &Identity,
        path: &str,
        headers: &[&str],
    ) -> (u16, Value) {
        let url = format!("{}{path}", self.url());
        let (code, body) = curl_method(method, &url, self.ca.as_deref(), who, headers);
        (code, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// [`Adapter::request`] with GET.
    pub fn curl_as(&self, who: &Identity, path: &str, headers: &[&str]) -> (u16, Value) {
        self.request("GET", who, path, headers)
    }

    /// The self-metrics text.
    pub fn self_metrics(&self) -> String {
        procs::get(&format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .map(|r| r.1)
            .unwrap_or_default()
    }
}

/// How a client proves who it is.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub token: Option<String>,
    /// Basic-auth user name and password: not a credential the adapter
    /// accepts (kubectl prompts for one when a kubeconfig has none).
    pub basic: Option<(String, String)>,
}

/// What `kubectl get --raw` printed.
#[derive(Debug)]
pub struct KubectlOutput {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl KubectlOutput {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("kubectl printed no JSON ({e}): {self:?}"))
    }
}

/// Write a kubeconfig for `server` trusting `ca` as `who`.
pub fn kubeconfig(dir: &Path, name: &str, server: &str, ca: &Path, who: &Identity) -> PathBuf {
    let mut user = String::new();
    if let (Some(c), Some(k)) = (&who.cert, &who.key) {
        user.push_str(&format!(
            "    client-certificate: {}\n    client-key: {}\n",
            c.display(),
            k.display()
        ));
    }
    if let Some(t) = &who.token {
        user.push_str(&format!("    token: {t}\n"));
    }
    if let Some((u, p)) = &who.basic {
        user.push_str(&format!("    username: {u}\n    password: {p}\n"));
    }
    let user = if user.is_empty() {
        "  user: {}\n".to_string()
    } else {
        format!("  user:\n{user}")
    };
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: adapter\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: {name}\n{user}contexts:\n- name: {name}\n  context:\n    cluster: adapter\n    user: {name}\ncurrent-context: {name}\n",
        ca.display()
    );
    let path = dir.join(format!("kubeconfig-{name}"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// `kubectl --kubeconfig <kc> get --raw <path>`.
pub fn kubectl_raw(kubeconfig: &Path, path: &str) -> KubectlOutput {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "--raw", path])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl");
    KubectlOutput {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Asserts a Kubernetes `Status` answer: the HTTP code, `kind`, `code` and
/// `reason`.
pub fn assert_status(code: u16, body: &serde_json::Value, want: u16, reason: &str) {
    assert_eq!(code, want, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], want, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

/// `curl` a URL over TLS: (status code, body). `ca` None means `-k`.
pub fn curl(url: &str, ca: Option<&Path>, who: &Identity, headers: &[&str]) -> (u16, String) {
    curl_method("GET", url, ca, who, headers)
}

/// [`curl`] with another method.
pub fn curl_method(
    method: &str,
    url: &str,
    ca: Option<&Path>,
    who: &Identity,
    headers: &[&str],
) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--max-time",
        "30",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
    ]);
    match ca {
        Some(ca) => {
            cmd.arg("--cacert").arg(ca);
        }
        None => {
            cmd.arg("-k");
        }
    }
    if let (Some(c), Some(k)) = (&who.cert, &who.key) {
        cmd.arg("--cert").arg(c).arg("--key").arg(k);
    }
    if let Some(t) = &who.token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    (code.trim().parse().unwrap_or(0), body.to_string())
}
