//! An in-memory Kubernetes API server on the wire, for the real `kube`
//! clients inside the binaries under test: objects by group/version/resource
//! (get, list with label selectors, watch, create, replace, delete), and the
//! reviews an aggregated API server makes (TokenReview, SubjectAccessReview).
//! Errors are `Status` objects with the codes and reasons of a real server.

mod discovery;
mod http;
mod labels;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Decides a SubjectAccessReview from its `spec`: (allowed, reason).
pub type SarPolicy = Arc<dyn Fn(&Value) -> (bool, String) + Send + Sync>;

/// What the fake knows at start.
#[derive(Clone)]
pub struct Cluster {
    /// Data of kube-system/extension-apiserver-authentication.
    pub auth_configmap: BTreeMap<String, String>,
    /// Bearer token → (user, groups).
    pub tokens: BTreeMap<String, (String, Vec<String>)>,
    pub sar: SarPolicy,
}

/// A resource collection: `("", "v1", "pods")`, `("apps", "v1", "deployments")`.
pub type Gvr = (String, String, String);

/// The core `v1` group's resource.
pub fn core(resource: &str) -> Gvr {
    (String::new(), "v1".into(), resource.into())
}

/// One watch: its collection, namespace (None = all), selector, and where
/// its events go.
struct Watcher {
    gvr: Gvr,
    namespace: Option<String>,
    selector: labels::Selector,
    events: Sender<Value>,
}

/// The server's state.
pub(crate) struct State {
    cluster: Cluster,
    /// (gvr, namespace, name) → object.
    objects: BTreeMap<(Gvr, String, String), Value>,
    revision: u64,
    watchers: Vec<Watcher>,
    /// Every request: `METHOD path?query`.
    requests: Vec<String>,
    reviews: Vec<Value>,
    /// Accepted `scale` patches.
    scale_patches: Vec<ScalePatch>,
}

/// An accepted `scale` patch, and when the fake accepted it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePatch {
    pub namespace: String,
    pub name: String,
    pub replicas: i64,
    pub at: std::time::SystemTime,
}

/// A running fake.
pub struct KubeFake {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

impl KubeFake {
    pub fn start(cluster: Cluster) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind kube fake");
        let port = listener.local_addr().expect("addr").port();
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": cluster.auth_configmap,
        });
        let state = Arc::new(Mutex::new(State {
            cluster,
            objects: BTreeMap::new(),
            revision: 1,
            watchers: Vec::new(),
            requests: Vec::new(),
            reviews: Vec::new(),
            scale_patches: Vec::new(),
        }));
        let fake = Self { port, state };
        fake.put(&core("configmaps"), cm);
        let state = fake.state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let state = state.clone();
                // Answers go out in several writes: without this each
                // would wait for the client's delayed ACK.
                let _ = conn.set_nodelay(true);
                std::thread::spawn(move || http::serve(conn, &state));
            }
        });
        fake
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

    /// Create or replace an object (its `metadata.namespace`/`name` say
    /// where); watchers see ADDED or MODIFIED.
    pub fn put(&self, gvr: &Gvr, obj: Value) {
        lock(&self.state).store(gvr, obj);
    }

    /// Delete an object; watchers see DELETED. False when it did not exist.
    pub fn delete(&self, gvr: &Gvr, namespace: &str, name: &str) -> bool {
        lock(&self.state).remove(gvr, namespace, name).is_some()
    }

    /// Requests received so far, `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).requests.clone()
    }

    /// An object, as stored now.
    pub fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state)
            .objects
            .get(&(gvr.clone(), namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of a collection in a namespace.
    pub fn list(&self, gvr: &Gvr, namespace: &str) -> Vec<Value> {
        let all = labels::Selector::parse("").expect("the empty selector parses");
        lock(&self.state).list(gvr, Some(namespace), &all)
    }

    /// Accepted `scale` patches so far.
    pub fn scale_patches(&self) -> Vec<ScalePatch> {
        lock(&self.state).scale_patches.clone()
    }

    /// SubjectAccessReview specs received so far.
    pub fn access_reviews(&self) -> Vec<Value> {
        lock(&self.state)
            .reviews
            .iter()
            .filter(|v| v["kind"] == "SubjectAccessReview")
            .map(|v| v["spec"].clone())
            .collect()
    }
}

impl State {
    fn store(&mut self, gvr: &Gvr, mut obj: Value) -> Value {
        self.revision += 1;
        obj["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        // A uid is given at creation and kept by every update, as the API
        // server does.
        let key = (gvr.clone(), ns, name);
        if obj["metadata"]["uid"].is_null() {
            obj["metadata"]["uid"] = self.objects.get(&key).map_or_else(
                || json!(format!("00000000-0000-4000-8000-{:012}", self.revision)),
                |o| o["metadata"]["uid"].clone(),
            );
        }
        let old = self.objects.insert(key, obj.clone());
        self.notify(gvr, if old.is_some() { "MODIFIED" } else { "ADDED" }, &obj);
        obj
    }

    fn remove(&mut self, gvr: &Gvr, ns: &str, name: &str) -> Option<Value> {
        let obj = self
            .objects
            .remove(&(gvr.clone(), ns.to_string(), name.to_string()))?;
        self.revision += 1;
        self.notify(gvr, "DELETED", &obj);
        Some(obj)
    }

    fn notify(&mut self, gvr: &Gvr, kind: &str, obj: &Value) {
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
        let event = json!({"type": kind, "object": obj});
        self.watchers.retain(|w| {
            let hit = w.gvr == *gvr
                && w.namespace.as_deref().is_none_or(|n| n == ns)
                && w.selector.matches(&obj["metadata"]["labels"]);
            !hit || w.events.send(event.clone()).is_ok()
        });
    }

    /// Objects of a collection in `namespace` (None = all) matching `selector`.
    fn list(&self, gvr: &Gvr, namespace: Option<&str>, selector: &labels::Selector) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((g, ns, _), o)| {
                g == gvr
                    && namespace.is_none_or(|n| n == ns)
                    && selector.matches(&o["metadata"]["labels"])
            })
            .map(|(_, o)| o.clone())
            .collect()
    }
}

/// A `metav1.Status` failure.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::net::TcpStream;

    use super::*;

    fn pod(name: &str, app: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "a", "labels": {"app": app}}})
    }

    fn get(fake: &KubeFake, path: &str) -> (u16, Value) {
        let mut conn = TcpStream::connect(("127.0.0.1", fake.port)).expect("connect");
        write!(conn, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("send");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut conn, &mut text).expect("answer");
        let code = text[9..12].parse().expect("status code");
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (code, serde_json::from_str(body).expect("JSON"))
    }

    fn fake() -> KubeFake {
        KubeFake::start(Cluster {
            auth_configmap: BTreeMap::new(),
            tokens: BTreeMap::new(),
            sar: Arc::new(|_: &Value| (false, String::new())),
        })
    }

    #[test]
    fn lists_by_label_selector_and_answers_statuses() {
        let f = fake();
        f.put(&core("pods"), pod("x-0", "x"));
        f.put(&core("pods"), pod("y-0", "y"));
        let (code, list) = get(
            &f,
            "/api/v1/namespaces/a/pods?labelSelector=app%20in%20(x%2Cz)",
        );
        assert_eq!(code, 200);
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(list["items"][0]["metadata"]["name"], "x-0");
        let (code, st) = get(&f, "/api/v1/namespaces/a/pods/nope");
        assert_eq!((code, st["reason"].as_str()), (404, Some("NotFound")));
        let (code, st) = get(&f, "/api/v1/namespaces/a/pods?labelSelector=app%20in%20(");
        assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
        let (code, cm) = get(
            &f,
            "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
        );
        assert_eq!((code, cm["kind"].as_str()), (200, Some("ConfigMap")));
    }

    #[test]
    fn a_watch_streams_matching_events() {
        let f = fake();
        let mut conn = TcpStream::connect(("127.0.0.1", f.port)).expect("connect");
        write!(conn, "GET /api/v1/namespaces/a/pods?watch=true&labelSelector=app%3Dx&timeoutSeconds=10 HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
        let mut r = BufReader::new(conn);
        let mut line = String::new();
        while line.trim_end() != "" || line.is_empty() {
            line.clear();
            r.read_line(&mut line).expect("headers");
        }
        // Registered once the headers are out; these go to the watcher.
        f.put(&core("pods"), pod("y-0", "y"));
        f.put(&core("pods"), pod("x-0", "x"));
        f.delete(&core("pods"), "a", "x-0");
        let mut events = Vec::new();
        while events.len() < 2 {
            line.clear();
            r.read_line(&mut line).expect("chunk");
            // Chunk-size lines are hex numbers; events are objects.
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(line.trim()) {
                events.push((
                    v["type"].as_str().unwrap_or("").to_string(),
                    v["object"]["metadata"]["name"].clone(),
                ));
            }
        }
        assert_eq!(
            events,
            [
                ("ADDED".to_string(), json!("x-0")),
                ("DELETED".to_string(), json!("x-0"))
            ]
        );
    }
}
