//! A small Kubernetes API server for pods and DRA ResourceSlices: list and
//! watch (with resourceVersion, chunked JSON event lines) of `/api/v1/pods`
//! and `/apis/resource.k8s.io/<version>/resourceslices`, filtered by
//! `spec.nodeName`, plus the group's discovery documents. Errors are real
//! status codes with a `Status` body, which is how the `kube` client reads
//! them.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

type Body = BoxBody<Bytes, Infallible>;

/// The collections served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collection {
    Pods,
    Slices,
}

struct State {
    rv: u64,
    pods: BTreeMap<String, Pod>,
    /// ResourceSlices by name, stored as `resource.k8s.io/v1` objects.
    slices: BTreeMap<String, Value>,
    /// (resourceVersion, collection, type, object) — never compacted: a fake's history is short.
    events: Vec<(u64, Collection, &'static str, Value)>,
    down: bool,
    /// `resource.k8s.io` versions served (none: a cluster without DRA).
    resource_versions: Vec<&'static str>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            rv: 0,
            pods: BTreeMap::new(),
            slices: BTreeMap::new(),
            events: Vec::new(),
            down: false,
            resource_versions: vec!["v1"],
        }
    }
}

impl State {
    fn record(&mut self, collection: Collection, kind: &'static str, obj: Value) -> u64 {
        self.rv += 1;
        self.events.push((self.rv, collection, kind, obj));
        self.rv
    }
}

struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    lists: AtomicU64,
    watches: AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct FakeKubeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeKubeApi {
    /// Listens on 127.0.0.1 on a free port.
    pub fn start(rt: &tokio::runtime::Handle) -> std::io::Result<Self> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let _guard = rt.enter();
        let listener = TcpListener::from_std(std_listener)?;
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed,
            lists: AtomicU64::new(0),
            watches: AtomicU64::new(0),
        });
        let s = shared.clone();
        let task = rt.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, Infallible>(handle(&s, req)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Ok(Self { addr, shared, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates or replaces a pod (ADDED or MODIFIED event).
    pub fn apply(&self, mut pod: Pod) {
        let mut st = self.shared.lock();
        pod.metadata.resource_version = Some((st.rv + 1).to_string());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let kind = if st.pods.contains_key(&uid) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let rv = st.record(Collection::Pods, kind, to_value(&pod));
        st.pods.insert(uid, pod);
        drop(st);
        self.shared.changed.send_replace(rv);
    }

    /// Deletes a pod by namespace and name (DELETED event).
    pub fn delete(&self, namespace: &str, name: &str) -> bool {
        let mut st = self.shared.lock();
        let uid = st.pods.iter().find_map(|(uid, p)| {
            (p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name))
            .then(|| uid.clone())
        });
        let Some(mut pod) = uid.and_then(|u| st.pods.remove(&u)) else {
            return false;
        };
        pod.metadata.resource_version = Some((st.rv + 1).to_string());
        let rv = st.record(Collection::Pods, "DELETED", to_value(&pod));
        drop(st);
        self.shared.changed.send_replace(rv);
        true
    }

    /// Creates or replaces a ResourceSlice (a `resource.k8s.io/v1` object).
    pub fn apply_slice(&self, mut slice: Value) {
        let mut st = self.shared.lock();
        let name = slice
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(meta) = slice.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), json!((st.rv + 1).to_string()));
        }
        let kind = if st.slices.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let rv = st.record(Collection::Slices, kind, slice.clone());
        st.slices.insert(name, slice);
        drop(st);
        self.shared.changed.send_replace(rv);
    }

    /// Deletes every ResourceSlice (a DRA driver uninstalled or not yet started).
    pub fn delete_slices(&self) {
        let mut st = self.shared.lock();
        let slices = std::mem::take(&mut st.slices);
        let mut rv = st.rv;
        for (_, slice) in slices {
            rv = st.record(Collection::Slices, "DELETED", slice);
        }
        drop(st);
        self.shared.changed.send_replace(rv);
    }

    /// The `resource.k8s.io` versions served, newest first; none for a
    /// cluster without DRA (older than 1.32, or the API group turned off).
    pub fn set_resource_versions(&self, versions: &[&'static str]) {
        self.shared.lock().resource_versions = versions.to_vec();
        self.shared.changed.send_modify(|_| {});
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.shared
            .lock()
            .pods
            .values()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    /// Down: every request gets 503 and open watches end. Up: serves again.
    pub fn set_down(&self, down: bool) {
        self.shared.lock().down = down;
        self.shared.changed.send_modify(|_| {});
    }

    /// (list requests, watch requests) served so far.
    pub fn requests(&self) -> (u64, u64) {
        (
            self.shared.lists.load(Ordering::Relaxed),
            self.shared.watches.load(Ordering::Relaxed),
        )
    }
}

impl Drop for FakeKubeApi {
    fn drop(&mut self) {
        self.set_down(true);
        self.task.abort();
    }
}

fn to_value(pod: &Pod) -> Value {
    serde_json::to_value(pod).unwrap_or(Value::Null)
}

fn handle(shared: &Arc<Shared>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let query = parse_query(req.uri().query().unwrap_or(""));
    if shared.lock().down {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "simulated API server is down",
        );
    }
    let path = req.uri().path();
    if req.method() != hyper::Method::GET {
        return not_found(path);
    }
    let (collection, version) = match route(shared, path) {
        Route::Collection(c, version) => (c, version),
        Route::Discovery(version) => return json_response(StatusCode::OK, &discovery(version)),
        Route::NotFound => return not_found(path),
    };
    let node = query
        .get("fieldSelector")
        .and_then(|f| f.strip_prefix("spec.nodeName="))
        .map(str::to_owned);
    if query.get("watch").is_some_and(|w| w == "true" || w == "1") {
        shared.watches.fetch_add(1, Ordering::Relaxed);
        let from: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        return watch_response(shared.clone(), collection, version, node, from);
    }
    shared.lists.fetch_add(1, Ordering::Relaxed);
    list(shared, collection, version, node.as_deref())
}

fn not_found(path: &str) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{path} is not served by the simulated API"),
    )
}

/// What a path names.
enum Route {
    /// A collection in an API version.
    Collection(Collection, &'static str),
    /// The discovery document of `resource.k8s.io/<version>`.
    Discovery(&'static str),
    NotFound,
}

fn route(shared: &Shared, path: &str) -> Route {
    if path == "/api/v1/pods" {
        return Route::Collection(Collection::Pods, "v1");
    }
    let Some(rest) = path.strip_prefix("/apis/resource.k8s.io/") else {
        return Route::NotFound;
    };
    let (version, plural) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(version) = shared
        .lock()
        .resource_versions
        .iter()
        .copied()
        .find(|v| *v == version)
    else {
        return Route::NotFound;
    };
    match plural {
        "" => Route::Discovery(version),
        "resourceslices" => Route::Collection(Collection::Slices, version),
        _ => Route::NotFound,
    }
}

fn list(
    shared: &Shared,
    collection: Collection,
    version: &str,
    node: Option<&str>,
) -> Response<Body> {
    let st = shared.lock();
    let (api_version, kind, items): (String, &str, Vec<Value>) = match collection {
        Collection::Pods => (
            "v1".into(),
            "PodList",
            st.pods
                .values()
                .filter(|p| on_node(p, node))
                .map(to_value)
                .collect(),
        ),
        Collection::Slices => (
            format!("resource.k8s.io/{version}"),
            "ResourceSliceList",
            st.slices
                .values()
                .filter(|s| on_node_value(s, node))
                .map(|s| slice_as(s, version))
                .collect(),
        ),
    };
    let body = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "resourceVersion": st.rv.to_string() },
        "items": items,
    });
    json_response(StatusCode::OK, &body)
}

/// The `APIResourceList` of `resource.k8s.io/<version>` (the part clients read).
fn discovery(version: &str) -> Value {
    let resource = |name: &str, kind: &str, namespaced: bool| {
        json!({ "name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"] })
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("resource.k8s.io/{version}"),
        "resources": [
            resource("deviceclasses", "DeviceClass", false),
            resource("resourceclaims", "ResourceClaim", true),
            resource("resourceclaimtemplates", "ResourceClaimTemplate", true),
            resource("resourceslices", "ResourceSlice", false),
        ],
    })
}

/// A stored `v1` slice as `version` serves it: `v1beta1` nests a device's
/// attributes and capacity under `basic`.
fn slice_as(slice: &Value, version: &str) -> Value {
    let mut s = slice.clone();
    s["apiVersion"] = json!(format!("resource.k8s.io/{version}"));
    if version == "v1beta1"
        && let Some(devices) = s.pointer_mut("/spec/devices").and_then(Value::as_array_mut)
    {
        for d in devices.iter_mut() {
            if let Some(obj) = d.as_object_mut() {
                let mut basic = serde_json::Map::new();
                for key in ["attributes", "capacity"] {
                    if let Some(v) = obj.remove(key) {
                        basic.insert(key.into(), v);
                    }
                }
                obj.insert("basic".into(), Value::Object(basic));
            }
        }
    }
    s
}

fn on_node(pod: &Pod, node: Option<&str>) -> bool {
    node.is_none_or(|n| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(n))
}

fn on_node_value(obj: &Value, node: Option<&str>) -> bool {
    node.is_none_or(|n| obj.pointer("/spec/nodeName").and_then(Value::as_str) == Some(n))
}

/// Streams the collection's events after `from`, then live ones, until the
/// server goes down.
fn watch_response(
    shared: Arc<Shared>,
    collection: Collection,
    version: &'static str,
    node: Option<String>,
    from: u64,
) -> Response<Body> {
    let rx = shared.changed.subscribe();
    let stream = futures::stream::unfold((shared, rx, from), move |(shared, mut rx, mut last)| {
        let node = node.clone();
        async move {
            loop {
                let chunk = {
                    let st = shared.lock();
                    if st.down {
                        return None;
                    }
                    let mut chunk = String::new();
                    let after = last;
                    for (rv, c, kind, obj) in st.events.iter().filter(|e| e.0 > after) {
                        last = *rv;
                        if *c == collection && on_node_value(obj, node.as_deref()) {
                            let obj = match collection {
                                Collection::Pods => obj.clone(),
                                Collection::Slices => slice_as(obj, version),
                            };
                            chunk.push_str(&json!({ "type": kind, "object": obj }).to_string());
                            chunk.push('\n');
                        }
                    }
                    chunk
                };
                if !chunk.is_empty() {
                    return Some((
                        Ok::<_, Infallible>(Frame::data(Bytes::from(chunk))),
                        (shared, rx, last),
                    ));
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        }
    });
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    json_response(code, &body)
}

fn json_response(code: StatusCode, body: &Value) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        let q = parse_query("fieldSelector=spec.nodeName%3Dsim-node&watch=true&resourceVersion=12");
        assert_eq!(
            q.get("fieldSelector").map(String::as_str),
            Some("spec.nodeName=sim-node")
        );
        assert_eq!(q.get("watch").map(String::as_str), Some("true"));
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
