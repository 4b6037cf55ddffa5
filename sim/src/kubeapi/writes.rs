//! What every write does: create's checks and defaults (shared with
//! server-side apply), what an update may change, and `dryRun`.

use serde_json::{Value, json};

use super::Gvr;
use super::discovery::{Resource, crds};
use super::failures::{about, bad_request, invalid, qualified};
use super::request::Request;
use super::store::State;
use super::target::Target;

/// Checks and defaults shared by create and server-side apply's create.
pub(crate) fn create(
    req: &Request,
    t: &Target,
    res: Option<&Resource>,
    mut obj: Value,
    st: &mut State,
) -> (u16, Value) {
    if !obj.is_object() {
        return bad_request("the request body must be a JSON object");
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let sent_ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    if res.is_some_and(|r| r.namespaced) && !sent_ns.is_empty() && sent_ns != ns {
        return bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        );
    }
    if obj["metadata"]["name"].as_str().is_none_or(str::is_empty)
        && let Some(prefix) = obj["metadata"]["generateName"].as_str()
    {
        obj["metadata"]["name"] = json!(format!("{prefix}{:05x}", st.revision % 0xfffff));
    }
    let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else {
        return invalid(
            &t.gvr,
            "",
            "metadata.name: Required value: name or generateName is required",
        );
    };
    if st.get(&t.gvr, &ns, &name).is_some() {
        let msg = format!("{} {name:?} already exists", qualified(&t.gvr));
        return about(409, "AlreadyExists", &t.gvr, &name, &msg);
    }
    if let Some(meta) = obj["metadata"].as_object_mut() {
        for gone in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
        ] {
            meta.remove(gone);
        }
        meta.insert("generation".into(), json!(1));
        if ns.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), json!(ns));
        }
    }
    if let Some(r) = res {
        obj["kind"] = json!(r.kind);
        obj["apiVersion"] = json!(r.api_version());
        if r.status
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
    }
    if storage_is_crd(&t.gvr) {
        accept_crd(&mut obj);
    }
    default_replicas(&t.gvr, &mut obj);
    if let Err(refused) = super::schema::admit(req, st, &t.gvr, &mut obj) {
        return refused;
    }
    (201, write(req, st, &t.gvr, obj))
}

/// A workload created without `spec.replicas` gets 1, as the API server's
/// defaulting gives it (manifests that leave the count to an autoscaler).
fn default_replicas(gvr: &Gvr, obj: &mut Value) {
    let workload = gvr.0 == "apps"
        && matches!(
            gvr.2.as_str(),
            "deployments" | "statefulsets" | "replicasets"
        );
    if workload
        && let Some(spec) = obj["spec"].as_object_mut()
        && !spec.contains_key("replicas")
    {
        spec.insert("replicas".into(), json!(1));
    }
}

fn storage_is_crd(gvr: &Gvr) -> bool {
    *gvr == crds()
}

/// A CRD is accepted and established as soon as it is stored.
fn accept_crd(crd: &mut Value) {
    let served: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| vs.iter().map(|v| v["name"].clone()).collect())
        .unwrap_or_default();
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"].clone(),
        "storedVersions": served,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
        ],
    });
}

/// Store unless `dryRun` is set; the answer in the version written.
pub(crate) fn write(req: &Request, st: &mut State, gvr: &Gvr, obj: Value) -> Value {
    if req.param("dryRun").is_some() {
        obj
    } else {
        super::store::present(gvr, &st.commit(gvr, obj))
    }
}

/// What a write through the main resource may change: `status` only
/// through `/status` (when the kind has one), never uid, creation or
/// deletion stamps; `generation` moves when anything but metadata and
/// status changed.
pub(crate) fn settle(
    res: Option<&Resource>,
    old: &Value,
    mut new: Value,
    status_too: bool,
) -> Value {
    for keep in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "namespace",
        "name",
    ] {
        new["metadata"][keep] = old["metadata"][keep].clone();
        if new["metadata"][keep].is_null()
            && let Some(m) = new["metadata"].as_object_mut()
        {
            m.remove(keep);
        }
    }
    if res.is_some_and(|r| r.status) && !status_too {
        new["status"] = old["status"].clone();
    }
    let spec = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("status");
        }
        v
    };
    let changed = spec(old) != spec(&new);
    match old["metadata"]["generation"].as_i64() {
        Some(g) => new["metadata"]["generation"] = json!(g + i64::from(changed)),
        // Stored by a test hook without one: the first spec change gives it.
        None if changed => new["metadata"]["generation"] = json!(2),
        None => {
            if let Some(m) = new["metadata"].as_object_mut() {
                m.remove("generation");
            }
        }
    }
    if new.get("status").is_some_and(Value::is_null)
        && let Some(o) = new.as_object_mut()
    {
        o.remove("status");
    }
    new
}
