//! An in-memory Kubernetes API server on its wire protocol: the simulated
//! cluster's, the end-to-end suites' (through `gpuscale_e2e::kubeapi`), and
//! what real `kubectl` drives through the kubeconfig it writes.
//!
//! It listens twice on 127.0.0.1: plain HTTP without authentication
//! ([`KubeFake::url`], [`KubeFake::kubeconfig`]) and HTTPS with a CA it
//! generates and a bearer token ([`KubeFake::https_url`],
//! [`KubeFake::write_kubeconfig`]).
//!
//! Served: discovery (`/api`, `/apis`, each group/version), `/version`, an
//! OpenAPI v3 index, `Table`s for `kubectl get`, metadata-only lists (`as=PartialObjectMetadataList`); the built-in kinds (namespaces, nodes, pods, services,
//! configmaps, secrets, events, serviceaccounts, deployments, statefulsets,
//! replicasets, daemonsets, jobs, PodDisruptionBudgets `policy/v1`, HPAs `autoscaling/v2`, leases, `events.k8s.io`
//! events, endpointslices, CRDs, APIServices, `resource.k8s.io` DRA kinds, TokenReview,
//! SubjectAccessReview) and the custom resources of every CRD stored, from
//! the moment it is created, with the `status` and `scale` subresources it
//! declares. Verbs: get, list and watch (label and field selectors,
//! resourceVersion, bookmarks, 410 Gone past the change log), paged lists, create,
//! replace (409 on a stale resourceVersion), patch (merge, strategic merge
//! for built-in kinds, JSON patch, server-side apply with field ownership
//! and 409 conflicts), delete (finalizers and `deletionTimestamp`; dependents by
//! `ownerReferences` go too), deletecollection; `generation` moves on spec
//! changes only. Errors are `Status` objects as a real server sends.
//!
//! Bodies are JSON or YAML, or protobuf for Namespaces, ConfigMaps, Secrets,
//! ServiceAccounts and Deployments (what `kubectl create <kind>` sends);
//! other kinds in protobuf get a 415.
//!
//! Custom resources are checked against their CRD's structural schema
//! (pruning, `fieldValidation=Strict`, types, enums, bounds, required).
//!
//! Not done: CRD `x-kubernetes-validations` (CEL: a write is answered with
//! a `Warning` header naming each rule not evaluated); no admission, no
//! defaulting beyond metadata; RBAC is not enforced (SubjectAccessReviews
//! are answered by [`Cluster::sar`], nothing else is authorized); a namespace's deletion
//! does not delete what is in it. A collection the server does not know is
//! still served, untyped, so the suites can [`KubeFake::put`] any resource.
//!
//! Test hooks write straight into the store (watchers see the change) and
//! read what clients did: [`KubeFake::put`], [`KubeFake::delete`],
//! [`KubeFake::get`], [`KubeFake::list`], [`KubeFake::requests`],
//! [`KubeFake::request_counts`], [`KubeFake::scale_patches`],
//! [`KubeFake::scale_patches_of`],
//! [`KubeFake::access_reviews`]; for a simulated node's pod mapper
//! [`KubeFake::apply_pod`],
//! [`KubeFake::delete_pod`], [`KubeFake::pod`], [`KubeFake::apply_slice`],
//! [`KubeFake::delete_slices`], [`KubeFake::set_resource_versions`],
//! [`KubeFake::set_down`] and [`KubeFake::list_watch_counts`].

mod apply;
mod discovery;
mod events;
mod failures;
mod fields;
mod http;
mod labels;
mod openapi;
mod ownership;
mod paging;
mod patch;
mod protobuf;
mod request;
mod response;
mod reviews;
mod schema;
mod store;
mod subresources;
mod table;
mod target;
mod tls;
mod verbs;
mod watch;
mod writes;

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use store::State;
pub use tls::TlsError;

/// Decides a SubjectAccessReview from its `spec`: (allowed, reason).
pub type SarPolicy = Arc<dyn Fn(&Value) -> (bool, String) + Send + Sync>;

/// What the server knows at start.
#[derive(Clone)]
pub struct Cluster {
    /// Data of kube-system/extension-apiserver-authentication.
    pub auth_configmap: BTreeMap<String, String>,
    /// TokenReview: bearer token → (user, groups).
    pub tokens: BTreeMap<String, (String, Vec<String>)>,
    /// SubjectAccessReview answers.
    pub sar: SarPolicy,
}

impl Default for Cluster {
    /// No extra tokens; every SubjectAccessReview allowed.
    fn default() -> Self {
        Self {
            auth_configmap: BTreeMap::new(),
            tokens: BTreeMap::new(),
            sar: Arc::new(|_: &Value| (true, String::new())),
        }
    }
}

/// A resource collection: `("", "v1", "pods")`, `("apps", "v1", "deployments")`.
pub type Gvr = (String, String, String);

/// The core `v1` group's resource.
pub fn core(resource: &str) -> Gvr {
    (String::new(), "v1".into(), resource.into())
}

/// An accepted write to a `scale` subresource, and when it was accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePatch {
    pub namespace: String,
    pub name: String,
    pub replicas: i64,
    pub at: std::time::SystemTime,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("listening on 127.0.0.1: {0}")]
    Listen(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// A running server; it stops listening when dropped.
pub struct KubeFake {
    /// The plain HTTP port.
    pub port: u16,
    /// The HTTPS port.
    pub tls_port: u16,
    token: String,
    ca_pem: String,
    state: Arc<Mutex<State>>,
    stopped: Arc<AtomicBool>,
}

pub(crate) fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `metav1.Status` failure.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

/// The `ScaleToZeroPolicy` CRD as [`KubeFake::start`] preinstalls it
/// (names, scope and subresources; no schema).
fn policy_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "scaletozeropolicies.gpuscale.dev"},
        "spec": {"group": "gpuscale.dev", "scope": "Namespaced",
            "names": {"plural": "scaletozeropolicies", "singular": "scaletozeropolicy",
                "kind": "ScaleToZeroPolicy", "listKind": "ScaleToZeroPolicyList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}}}]}})
}

impl KubeFake {
    /// Starts the server with the `ScaleToZeroPolicy` CRD installed, as
    /// the suites expect. Panics when it cannot listen (a test harness).
    pub fn start(cluster: Cluster) -> Self {
        let fake = Self::start_bare(cluster).expect("start the Kubernetes API server");
        fake.put(&discovery::crds(), policy_crd());
        fake
    }

    /// Starts a cluster with only the built-in kinds, namespaces `default`,
    /// `kube-system` and `kube-public`, and the
    /// `extension-apiserver-authentication` ConfigMap.
    pub fn start_bare(cluster: Cluster) -> Result<Self, StartError> {
        let plain = TcpListener::bind("127.0.0.1:0")?;
        let secure = TcpListener::bind("127.0.0.1:0")?;
        let tls = tls::Tls::generate()?;
        let token = format!("sim-{:016x}", std::process::id() as u64 ^ now_nanos());
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": cluster.auth_configmap,
        });
        let fake = Self {
            port: plain.local_addr()?.port(),
            tls_port: secure.local_addr()?.port(),
            token: token.clone(),
            ca_pem: tls.ca_pem.clone(),
            state: Arc::new(Mutex::new(State::new(cluster))),
            stopped: Arc::new(AtomicBool::new(false)),
        };
        for ns in ["default", "kube-system", "kube-public"] {
            fake.put(
                &core("namespaces"),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
            );
        }
        fake.put(&core("configmaps"), cm);
        fake.accept(plain, None);
        fake.accept(secure, Some((tls.config, token)));
        Ok(fake)
    }

    fn accept(&self, listener: TcpListener, tls: Option<(Arc<rustls::ServerConfig>, String)>) {
        let (state, stopped) = (self.state.clone(), self.stopped.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                // Answers and events go out in several writes: without
                // this each would wait for the client's delayed ACK.
                let _ = conn.set_nodelay(true);
                let (state, tls) = (state.clone(), tls.clone());
                std::thread::spawn(move || match tls {
                    None => http::serve(conn, &state, None),
                    Some((config, token)) => {
                        if let Ok(session) = rustls::ServerConnection::new(config) {
                            let stream = rustls::StreamOwned::new(session, conn);
                            http::serve(stream, &state, Some(&token));
                        }
                    }
                });
            }
        });
    }

    /// The plain HTTP address (no authentication).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The HTTPS address (bearer token, certificate signed by [`Self::ca_pem`]).
    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.tls_port)
    }

    /// The CA that signed the HTTPS certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The bearer token HTTPS requests must carry.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig for the plain HTTP address.
    pub fn kubeconfig(&self) -> String {
        tls::kubeconfig(&self.url(), None, None)
    }

    /// A kubeconfig for HTTPS: the CA as `certificate-authority-data`, the
    /// bearer token as the user.
    pub fn tls_kubeconfig(&self) -> String {
        tls::kubeconfig(&self.https_url(), Some(&self.ca_pem), Some(&self.token))
    }

    /// Writes [`Self::tls_kubeconfig`] to `path` (readable by its owner only).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(self.tls_kubeconfig().as_bytes())
    }

    /// Create or replace an object as given (its `metadata.namespace` and
    /// `name` say where); watchers see ADDED or MODIFIED.
    pub fn put(&self, gvr: &Gvr, obj: Value) {
        lock(&self.state).store(gvr, obj);
    }

    /// Delete an object now, finalizers or not; watchers see DELETED.
    /// False when it did not exist.
    pub fn delete(&self, gvr: &Gvr, namespace: &str, name: &str) -> bool {
        lock(&self.state).remove(gvr, namespace, name).is_some()
    }

    /// Requests received so far (the latest 50,000), `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).requests.iter().cloned().collect()
    }

    /// An object, as stored now.
    pub fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state)
            .get(gvr, namespace, name)
            .map(|o| store::present(gvr, o))
    }

    /// Objects of a collection in a namespace.
    pub fn list(&self, gvr: &Gvr, namespace: &str) -> Vec<Value> {
        let all = labels::Selector::default();
        lock(&self.state).list(gvr, Some(namespace), &all, &fields::Fields::default())
    }

    /// Accepted `scale` writes so far (the latest 50,000).
    pub fn scale_patches(&self) -> Vec<ScalePatch> {
        lock(&self.state).scale_patches.clone()
    }

    /// Accepted `scale` writes to objects named `name`.
    pub fn scale_patches_of(&self, name: &str) -> Vec<ScalePatch> {
        let all = self.scale_patches();
        all.into_iter().filter(|p| p.name == name).collect()
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

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Hooks for a simulated node's pod mapper (pods and ResourceSlices).
impl KubeFake {
    /// Create or replace a pod (anything that serializes to one, e.g. a
    /// `k8s_openapi` `Pod`). A pod that comes back under the same name with
    /// another uid is a new pod: watchers see DELETED, then ADDED.
    pub fn apply_pod<T: serde::Serialize>(&self, pod: &T) -> Result<(), serde_json::Error> {
        let pod = serde_json::to_value(pod)?;
        let pods = core("pods");
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
        let name = pod["metadata"]["name"].as_str().unwrap_or("");
        let mut st = lock(&self.state);
        let old_uid = st
            .get(&pods, ns, name)
            .map(|o| o["metadata"]["uid"].clone());
        if old_uid.is_some_and(|u| !pod["metadata"]["uid"].is_null() && u != pod["metadata"]["uid"])
        {
            st.remove(&pods, ns, name);
        }
        st.store(&pods, pod);
        Ok(())
    }

    /// Delete a pod now (DELETED). False when there was none.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        self.delete(&core("pods"), namespace, name)
    }

    /// A pod as stored now.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.get(&core("pods"), namespace, name)
    }

    /// Create or replace a ResourceSlice, given as `resource.k8s.io/v1`.
    pub fn apply_slice(&self, slice: Value) {
        self.put(&slices(), slice);
    }

    /// Delete every ResourceSlice (a DRA driver uninstalled, or not yet
    /// started).
    pub fn delete_slices(&self) {
        let mut st = lock(&self.state);
        let names: Vec<String> = st
            .objects
            .keys()
            .filter(|(g, _, _)| *g == slices())
            .map(|(_, _, n)| n.clone())
            .collect();
        for name in names {
            st.remove(&slices(), "", &name);
        }
    }

    /// The `resource.k8s.io` versions served, preferred first; none for a
    /// cluster without DRA. `v1beta1` presents a device's attributes and
    /// capacity under `basic`, as that version does.
    pub fn set_resource_versions(&self, versions: &[&str]) {
        lock(&self.state).resource_versions = versions.iter().map(|v| (*v).to_string()).collect();
    }

    /// Down: every request is answered 503 and open watches end. Up:
    /// serving again.
    pub fn set_down(&self, down: bool) {
        let mut st = lock(&self.state);
        st.down = down;
        if down {
            st.watchers.clear();
        }
    }

    /// Requests received so far by method (`GET`, `PATCH`, …): the writes
    /// a client makes are the counts of POST, PUT, PATCH and DELETE.
    pub fn request_counts(&self) -> std::collections::BTreeMap<String, u64> {
        lock(&self.state).by_method.clone()
    }

    /// (list requests, watch requests) served so far.
    pub fn list_watch_counts(&self) -> (u64, u64) {
        let st = lock(&self.state);
        (st.lists, st.watches)
    }
}

fn slices() -> Gvr {
    (
        "resource.k8s.io".into(),
        "v1".into(),
        "resourceslices".into(),
    )
}

impl Drop for KubeFake {
    /// Stops accepting, ends open watches, and answers 503 on connections
    /// clients keep open.
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.set_down(true);
        for port in [self.port, self.tls_port] {
            // Wakes the accept loop, which then sees `stopped`.
            let _ = TcpStream::connect(("127.0.0.1", port));
        }
    }
}
