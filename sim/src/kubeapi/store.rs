//! The object store: objects by (resource, namespace, name), one
//! resourceVersion counter, a bounded log of recent changes (so a watch
//! resumes from a list's resourceVersion without a gap, and an older one
//! is answered 410 Gone), and the open watches.

mod endpoints;

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::Sender;
use std::time::SystemTime;

use serde_json::{Value, json};

use super::events;
use super::fields::Fields;
use super::labels::Selector;
use super::{Cluster, Gvr, ScalePatch};

/// Changes kept for resuming watches; older resourceVersions get 410 Gone.
pub(crate) const LOG_CAP: usize = 8192;
/// Requests and reviews remembered for the test hooks.
const HISTORY_CAP: usize = 50_000;

/// One open watch: the stored collection it follows, how it presents
/// objects (the version asked for), what it selects, and where events go.
pub(crate) struct Watcher {
    pub(crate) storage: Gvr,
    pub(crate) asked: Gvr,
    pub(crate) namespace: Option<String>,
    pub(crate) labels: Selector,
    pub(crate) fields: Fields,
    pub(crate) events: Sender<Value>,
}

impl Watcher {
    pub(crate) fn selects(&self, storage: &Gvr, obj: &Value) -> bool {
        self.storage == *storage
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| obj["metadata"]["namespace"].as_str().unwrap_or("") == n)
            && self.labels.matches(&obj["metadata"]["labels"])
            && self.fields.matches(&present(&self.asked, obj))
    }
}

/// A change: its resourceVersion, stored collection, type and object.
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) storage: Gvr,
    pub(crate) kind: &'static str,
    pub(crate) obj: Value,
}

/// The server's state.
pub(crate) struct State {
    pub(crate) cluster: Cluster,
    /// (storage gvr, namespace, name) → object.
    pub(crate) objects: BTreeMap<(Gvr, String, String), Value>,
    pub(crate) revision: u64,
    pub(crate) log: VecDeque<Change>,
    pub(crate) watchers: Vec<Watcher>,
    /// Requests, `METHOD path?query`, newest last.
    pub(crate) requests: VecDeque<String>,
    pub(crate) reviews: VecDeque<Value>,
    pub(crate) scale_patches: Vec<ScalePatch>,
    /// `resource.k8s.io` versions served, preferred first.
    pub(crate) resource_versions: Vec<String>,
    /// Down: every request is a 503 and watches end.
    pub(crate) down: bool,
    pub(crate) lists: u64,
    pub(crate) watches: u64,
    /// Requests received, by method (never capped, unlike `requests`).
    pub(crate) by_method: BTreeMap<String, u64>,
}

/// Where objects of a collection are kept: DRA objects once, as
/// `resource.k8s.io/v1`, whichever version they come in by.
pub(crate) fn storage(gvr: &Gvr) -> Gvr {
    if events::is_core(gvr) {
        events::storage()
    } else if gvr.0 == "resource.k8s.io" {
        (gvr.0.clone(), "v1".into(), gvr.2.clone())
    } else {
        gvr.clone()
    }
}

/// A stored object as the version `asked` presents it: `v1beta1`
/// ResourceSlices nest a device's attributes and capacity under `basic`.
pub(crate) fn present(asked: &Gvr, obj: &Value) -> Value {
    if events::is_core(asked) {
        return events::to_core(obj);
    }
    if asked.0 != "resource.k8s.io" || asked.1 == "v1" {
        return obj.clone();
    }
    let mut s = obj.clone();
    s["apiVersion"] = json!(format!("resource.k8s.io/{}", asked.1));
    if asked.1 == "v1beta1"
        && let Some(devices) = s.pointer_mut("/spec/devices").and_then(Value::as_array_mut)
    {
        for d in devices.iter_mut().filter_map(Value::as_object_mut) {
            let mut basic = serde_json::Map::new();
            for key in ["attributes", "capacity"] {
                if let Some(v) = d.remove(key) {
                    basic.insert(key.into(), v);
                }
            }
            d.insert("basic".into(), Value::Object(basic));
        }
    }
    s
}

/// Now, as the API's timestamps are written.
pub(crate) fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    gpuscale_util::rfc3339::format(i64::try_from(secs).unwrap_or(i64::MAX))
}

fn key(gvr: &Gvr, obj: &Value) -> (Gvr, String, String) {
    let meta = &obj["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (storage(gvr), s(&meta["namespace"]), s(&meta["name"]))
}

impl State {
    pub(crate) fn new(cluster: Cluster) -> Self {
        Self {
            cluster,
            objects: BTreeMap::new(),
            revision: 1,
            log: VecDeque::new(),
            watchers: Vec::new(),
            requests: VecDeque::new(),
            reviews: VecDeque::new(),
            scale_patches: Vec::new(),
            resource_versions: vec!["v1".into()],
            down: false,
            lists: 0,
            watches: 0,
            by_method: BTreeMap::new(),
        }
    }

    pub(crate) fn remember(&mut self, request: String) {
        let method = request.split(' ').next().unwrap_or("").to_string();
        *self.by_method.entry(method).or_default() += 1;
        if self.requests.len() == HISTORY_CAP {
            self.requests.pop_front();
        }
        self.requests.push_back(request);
    }

    pub(crate) fn remember_review(&mut self, review: Value) {
        if self.reviews.len() == HISTORY_CAP {
            self.reviews.pop_front();
        }
        self.reviews.push_back(review);
    }

    pub(crate) fn remember_scale(&mut self, patch: ScalePatch) {
        if self.scale_patches.len() == HISTORY_CAP {
            self.scale_patches.remove(0);
        }
        self.scale_patches.push(patch);
    }

    pub(crate) fn get(&self, gvr: &Gvr, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(storage(gvr), ns.to_string(), name.to_string()))
    }

    /// Create or replace as given, with a new resourceVersion; a uid and
    /// creationTimestamp are given at creation and kept by every update.
    pub(crate) fn store(&mut self, gvr: &Gvr, mut obj: Value) -> Value {
        if events::is_core(gvr) && obj["apiVersion"] == "v1" {
            obj = events::from_core(&obj);
        }
        self.revision += 1;
        let key = key(gvr, &obj);
        let old = self.objects.get(&key);
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(self.revision.to_string());
        for (field, fresh) in [
            (
                "uid",
                json!(format!("00000000-0000-4000-8000-{:012}", self.revision)),
            ),
            ("creationTimestamp", json!(now())),
        ] {
            if meta[field].is_null() {
                meta[field] = old.map_or(fresh, |o| o["metadata"][field].clone());
            }
        }
        let kind = if old.is_some() { "MODIFIED" } else { "ADDED" };
        self.objects.insert(key.clone(), obj.clone());
        self.record(&key.0, kind, &obj);
        if endpoints::follows(&key.0) {
            endpoints::sync(self, &key.1);
        }
        obj
    }

    /// Delete now (no finalizer check); a CRD takes its custom resources.
    pub(crate) fn remove(&mut self, gvr: &Gvr, ns: &str, name: &str) -> Option<Value> {
        let storage = storage(gvr);
        let mut obj = self
            .objects
            .remove(&(storage.clone(), ns.to_string(), name.to_string()))?;
        self.revision += 1;
        obj["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.record(&storage, "DELETED", &obj);
        if endpoints::follows(&storage) {
            endpoints::sync(self, ns);
        }
        if storage == super::discovery::crds() {
            self.remove_custom_resources(&obj);
        }
        self.remove_dependents(&obj["metadata"]["uid"]);
        Some(obj)
    }

    /// The garbage collector's background deletion: what names `uid` as an
    /// owner goes too (marked first when it has finalizers).
    fn remove_dependents(&mut self, uid: &Value) {
        if uid.is_null() {
            return;
        }
        let owned: Vec<_> = self
            .objects
            .iter()
            .filter(|(_, o)| {
                o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == *uid))
            })
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for ((g, ns, name), mut o) in owned {
            if o["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
            {
                if o["metadata"]["deletionTimestamp"].is_null() {
                    o["metadata"]["deletionTimestamp"] = json!(now());
                    self.store(&g, o);
                }
            } else {
                self.remove(&g, &ns, &name);
            }
        }
    }

    fn remove_custom_resources(&mut self, crd: &Value) {
        let group = crd["spec"]["group"].as_str().unwrap_or("");
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
        let gone: Vec<_> = self
            .objects
            .keys()
            .filter(|(g, _, _)| g.0 == group && g.2 == plural)
            .cloned()
            .collect();
        for (g, ns, name) in gone {
            self.remove(&g, &ns, &name);
        }
    }

    /// A write through the API: stored, or deleted when it was being
    /// deleted and its last finalizer is gone.
    pub(crate) fn commit(&mut self, gvr: &Gvr, obj: Value) -> Value {
        let meta = &obj["metadata"];
        let finalizers = meta["finalizers"].as_array().map_or(0, Vec::len);
        if !meta["deletionTimestamp"].is_null() && finalizers == 0 {
            let (ns, name) = (key(gvr, &obj).1, key(gvr, &obj).2);
            return self.remove(gvr, &ns, &name).unwrap_or(obj);
        }
        self.store(gvr, obj)
    }

    fn record(&mut self, storage: &Gvr, kind: &'static str, obj: &Value) {
        if self.log.len() == LOG_CAP {
            self.log.pop_front();
        }
        self.log.push_back(Change {
            rv: self.revision,
            storage: storage.clone(),
            kind,
            obj: obj.clone(),
        });
        self.watchers.retain(|w| {
            !w.selects(storage, obj)
                || w.events
                    .send(json!({"type": kind, "object": present(&w.asked, obj)}))
                    .is_ok()
        });
    }

    /// Objects of a collection in `namespace` (None = all) that match.
    pub(crate) fn list(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        labels: &Selector,
        fields: &Fields,
    ) -> Vec<Value> {
        let storage = storage(gvr);
        self.objects
            .iter()
            .filter(|((g, ns, _), o)| {
                *g == storage
                    && namespace.is_none_or(|n| n == ns)
                    && labels.matches(&o["metadata"]["labels"])
            })
            .map(|(_, o)| present(gvr, o))
            .filter(|o| fields.matches(o))
            .collect()
    }

    /// The oldest resourceVersion a watch may resume from.
    pub(crate) fn oldest_resumable(&self) -> u64 {
        match self.log.front() {
            Some(c) if self.log.len() == LOG_CAP => c.rv - 1,
            _ => 0,
        }
    }
}
