//! A Kubernetes API fake on the wire: the real `kube` client inside the
//! adapter reads the `extension-apiserver-authentication` ConfigMap and
//! creates TokenReviews and SubjectAccessReviews here. Errors are answered
//! with real status codes and `Status` bodies.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Decides a SubjectAccessReview from its `spec`: (allowed, reason).
pub type SarPolicy = Arc<dyn Fn(&Value) -> (bool, String) + Send + Sync>;

/// What the fake knows.
#[derive(Clone)]
pub struct Cluster {
    /// Data of kube-system/extension-apiserver-authentication.
    pub auth_configmap: BTreeMap<String, String>,
    /// Bearer token → (user, groups).
    pub tokens: BTreeMap<String, (String, Vec<String>)>,
    pub sar: SarPolicy,
}

/// A running fake; records every review it answered.
pub struct KubeFake {
    pub port: u16,
    pub reviews: Arc<Mutex<Vec<Value>>>,
}

impl KubeFake {
    pub fn start(cluster: Cluster) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind kube fake");
        let port = listener.local_addr().expect("addr").port();
        let reviews = Arc::new(Mutex::new(Vec::new()));
        let rec = reviews.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let cluster = cluster.clone();
                let rec = rec.clone();
                std::thread::spawn(move || serve(conn, &cluster, &rec));
            }
        });
        Self { port, reviews }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A kubeconfig pointing at the fake.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: adapter\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: adapter\ncurrent-context: fake\n",
            self.url()
        )
    }

    /// SubjectAccessReview specs received so far.
    pub fn access_reviews(&self) -> Vec<Value> {
        self.reviews
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|v| v["kind"] == "SubjectAccessReview")
                    .map(|v| v["spec"].clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn serve(conn: TcpStream, cluster: &Cluster, rec: &Mutex<Vec<Value>>) {
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut writer = write_half;
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut len = 0usize;
        let mut close = false;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().unwrap_or(0);
                }
                if k == "connection" && v.trim().eq_ignore_ascii_case("close") {
                    close = true;
                }
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (code, resp) = answer(
            &method,
            path.split('?').next().unwrap_or(""),
            &body,
            cluster,
            rec,
        );
        let text = resp.to_string();
        let reason = match code {
            200 => "OK",
            201 => "Created",
            404 => "Not Found",
            _ => "Error",
        };
        if write!(
            writer,
            "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        )
        .is_err()
            || close
        {
            return;
        }
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

fn answer(
    method: &str,
    path: &str,
    body: &Value,
    c: &Cluster,
    rec: &Mutex<Vec<Value>>,
) -> (u16, Value) {
    match (method, path) {
        ("GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication") => {
            (
                200,
                json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                    "data": c.auth_configmap,
                }),
            )
        }
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews") => {
            let token = body["spec"]["token"].as_str().unwrap_or("");
            let st = match c.tokens.get(token) {
                Some((user, groups)) => {
                    json!({"authenticated": true, "user": {"username": user, "uid": "u-1", "groups": groups}})
                }
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
            let mut out = body.clone();
            out["status"] = st;
            out["metadata"] = json!({});
            if let Ok(mut r) = rec.lock() {
                r.push(out.clone());
            }
            (201, out)
        }
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => {
            let (allowed, reason) = (c.sar)(&body["spec"]);
            let mut out = body.clone();
            out["status"] = json!({"allowed": allowed, "reason": reason});
            out["metadata"] = json!({});
            if let Ok(mut r) = rec.lock() {
                r.push(out.clone());
            }
            (201, out)
        }
        _ => status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({method} {path})"),
        ),
    }
}
