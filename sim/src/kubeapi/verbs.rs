//! The REST verbs on objects: get, list, create, replace, patch, delete
//! (finalizers and `deletionTimestamp`), `deletecollection`, and the
//! answers of a real server when they fail (`Status` with reason, details
//! and code).

use serde_json::{Value, json};

use super::discovery::{Resource, crds};
use super::fields::Fields;
use super::http::Request;
use super::labels::Selector;
use super::store::State;
use super::{Gvr, status};

/// Where a path points: a collection (namespace None: all namespaces, or a
/// cluster-scoped resource) or one object, maybe its subresource.
pub(crate) struct Target {
    pub(crate) gvr: Gvr,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
}

pub(crate) fn target(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let s = |x: &str| Some(x.to_string());
    let (ns, r, name, sub) = match rest {
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            (None, "namespaces", s(name), s(sub))
        }
        ["namespaces", ns, r] => (s(ns), *r, None, None),
        ["namespaces", ns, r, name] => (s(ns), *r, s(name), None),
        ["namespaces", ns, r, name, sub] => (s(ns), *r, s(name), s(sub)),
        [r] => (None, *r, None, None),
        [r, name] => (None, *r, s(name), None),
        [r, name, sub] => (None, *r, s(name), s(sub)),
        _ => return None,
    };
    Some(Target {
        gvr: (group.to_string(), version.to_string(), r.to_string()),
        namespace: ns,
        name,
        subresource: sub,
    })
}

/// `deployments.apps`, `pods`: how a real server names a resource in errors.
pub(crate) fn qualified(gvr: &Gvr) -> String {
    if gvr.0.is_empty() {
        gvr.2.clone()
    } else {
        format!("{}.{}", gvr.2, gvr.0)
    }
}

/// A `Status` failure about one object, with `details` as a server gives.
pub(crate) fn about(code: u16, reason: &str, gvr: &Gvr, name: &str, message: &str) -> (u16, Value) {
    let (code, mut body) = status(code, reason, message);
    body["details"] = json!({"name": name, "group": gvr.0, "kind": gvr.2});
    (code, body)
}

pub(crate) fn not_found(gvr: &Gvr, name: &str) -> (u16, Value) {
    let msg = format!("{} {name:?} not found", qualified(gvr));
    about(404, "NotFound", gvr, name, &msg)
}

pub(crate) fn conflict(gvr: &Gvr, name: &str) -> (u16, Value) {
    let msg = format!(
        "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
        qualified(gvr)
    );
    about(409, "Conflict", gvr, name, &msg)
}

/// A body that cannot be read: 415 for a media type the server does not
/// decode (clients then fall back to JSON), else 400.
pub(crate) fn bad_request(message: &str) -> (u16, Value) {
    if message.starts_with("unsupported media type") {
        return status(415, "UnsupportedMediaType", message);
    }
    status(400, "BadRequest", message)
}

/// A path that names nothing served.
pub(crate) fn no_resource(req: &Request) -> (u16, Value) {
    status(
        404,
        "NotFound",
        &format!(
            "the server could not find the requested resource ({} {})",
            req.method, req.path
        ),
    )
}

fn not_allowed(req: &Request) -> (u16, Value) {
    status(
        405,
        "MethodNotAllowed",
        &format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method, req.path
        ),
    )
}

pub(crate) fn answer(req: &Request, st: &mut State) -> (u16, Value) {
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/version") => (200, version()),
        ("GET", "/healthz" | "/readyz" | "/livez") => (200, json!("ok")),
        ("GET", p) if p.starts_with("/openapi/") => super::openapi::answer(p, st),
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews") => super::reviews::token(req, st),
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => {
            super::reviews::access(req, st)
        }
        ("GET", p) if st.discovery(p).is_some() => (200, st.discovery(p).unwrap_or_default()),
        _ => match target(&req.path) {
            Some(t) => {
                let res = st.resource(&t.gvr);
                // DRA in a version not served is absent, as on a cluster without it.
                if res.is_none() && t.gvr.0 == "resource.k8s.io" {
                    return no_resource(req);
                }
                if let Some(err) = scope_error(&t, res.as_ref(), req) {
                    return err;
                }
                if t.subresource.is_some() {
                    super::subresources::answer(req, &t, res.as_ref(), st)
                } else {
                    objects(req, &t, res.as_ref(), st)
                }
            }
            None => no_resource(req),
        },
    }
}

fn version() -> Value {
    json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-gpuscale-sim",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "", "compiler": "gc", "platform": "linux/amd64"})
}

/// A namespaced resource named without its namespace, or a cluster-scoped
/// one inside a namespace, is not found, as on a real server.
fn scope_error(t: &Target, res: Option<&Resource>, req: &Request) -> Option<(u16, Value)> {
    let res = res?;
    let ok = if res.namespaced {
        t.namespace.is_some() || (t.name.is_none() && req.method == "GET")
    } else {
        t.namespace.is_none()
    };
    (!ok).then(|| no_resource(req))
}

fn objects(req: &Request, t: &Target, res: Option<&Resource>, st: &mut State) -> (u16, Value) {
    let ns = t.namespace.clone().unwrap_or_default();
    match (req.method.as_str(), &t.name) {
        ("GET", None) => list(req, t, res, st),
        ("GET", Some(name)) => match st.get(&t.gvr, &ns, name) {
            Some(o) if super::table::wanted(&req.accept) => {
                let o = super::store::present(&t.gvr, o);
                (200, super::table::of(st, &t.gvr, &[o]))
            }
            Some(o) => (200, super::store::present(&t.gvr, o)),
            None => not_found(&t.gvr, name),
        },
        ("POST", None) => match req.json() {
            Ok(body) => create(req, t, res, body, st),
            Err(e) => bad_request(&e),
        },
        ("PUT", Some(name)) => match req.json() {
            Ok(body) => replace(req, t, res, name, body, st),
            Err(e) => bad_request(&e),
        },
        ("PATCH", Some(name)) => super::apply::patch(req, t, res, name, st),
        ("DELETE", Some(name)) => delete(req, &t.gvr, &ns, name, st),
        ("DELETE", None) => delete_collection(req, t, st),
        _ => not_allowed(req),
    }
}

fn selectors(req: &Request, plural: &str) -> Result<(Selector, Fields), (u16, Value)> {
    let labels = Selector::parse(&req.param("labelSelector").unwrap_or_default())
        .map_err(|m| bad_request(&m))?;
    let fields = Fields::parse(&req.param("fieldSelector").unwrap_or_default(), plural)
        .map_err(|m| bad_request(&m))?;
    Ok((labels, fields))
}

/// `limit` and `continue` are accepted and ignored: one page holds all.
fn list(req: &Request, t: &Target, res: Option<&Resource>, st: &mut State) -> (u16, Value) {
    let (labels, fields) = match selectors(req, &t.gvr.2) {
        Ok(s) => s,
        Err(e) => return e,
    };
    st.lists += 1;
    let items = st.list(&t.gvr, t.namespace.as_deref(), &labels, &fields);
    if super::table::wanted(&req.accept) {
        return (200, super::table::of(st, &t.gvr, &items));
    }
    let (kind, api_version) = res.map_or(("List".to_string(), "v1".to_string()), |r| {
        (format!("{}List", r.kind), r.api_version())
    });
    (
        200,
        json!({"kind": kind, "apiVersion": api_version,
            "metadata": {"resourceVersion": st.revision.to_string()}, "items": items}),
    )
}

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
    (201, write(req, st, &t.gvr, obj))
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

pub(crate) fn invalid(gvr: &Gvr, name: &str, message: &str) -> (u16, Value) {
    let msg = format!("{} {name:?} is invalid: {message}", qualified(gvr));
    about(422, "Invalid", gvr, name, &msg)
}

/// Store unless `dryRun` is set.
pub(crate) fn write(req: &Request, st: &mut State, gvr: &Gvr, obj: Value) -> Value {
    if req.param("dryRun").is_some() {
        obj
    } else {
        st.commit(gvr, obj)
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

fn replace(
    req: &Request,
    t: &Target,
    res: Option<&Resource>,
    name: &str,
    body: Value,
    st: &mut State,
) -> (u16, Value) {
    let ns = t.namespace.clone().unwrap_or_default();
    let Some(current) = st.get(&t.gvr, &ns, name).cloned() else {
        return not_found(&t.gvr, name);
    };
    if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
        return bad_request("the name of the object does not match the name on the URL");
    }
    let sent = &body["metadata"]["resourceVersion"];
    if !sent.is_null() && *sent != current["metadata"]["resourceVersion"] {
        return conflict(&t.gvr, name);
    }
    let new = settle(res, &current, body, false);
    (200, write(req, st, &t.gvr, new))
}

/// Delete: with finalizers the object is only marked (`deletionTimestamp`)
/// and goes when its last finalizer is removed. `propagationPolicy` is
/// accepted; dependents (by `ownerReferences`) go in the background.
fn delete(req: &Request, gvr: &Gvr, ns: &str, name: &str, st: &mut State) -> (u16, Value) {
    let Some(mut obj) = st.get(gvr, ns, name).cloned() else {
        return not_found(gvr, name);
    };
    let options = if req.body.is_empty() {
        Ok(json!({}))
    } else {
        req.json()
    };
    let pre = &options.unwrap_or_default()["preconditions"];
    for field in ["uid", "resourceVersion"] {
        if !pre[field].is_null() && pre[field] != obj["metadata"][field] {
            return conflict(gvr, name);
        }
    }
    if req.param("dryRun").is_some() {
        return (200, obj);
    }
    let finalizers = obj["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
    if finalizers > 0 {
        if obj["metadata"]["deletionTimestamp"].is_null() {
            obj["metadata"]["deletionTimestamp"] = json!(super::store::now());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            obj = st.store(gvr, obj);
        }
        return (200, obj);
    }
    match st.remove(gvr, ns, name) {
        Some(o) => (200, o),
        None => not_found(gvr, name),
    }
}

fn delete_collection(req: &Request, t: &Target, st: &mut State) -> (u16, Value) {
    let (labels, fields) = match selectors(req, &t.gvr.2) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let items = st.list(&t.gvr, t.namespace.as_deref(), &labels, &fields);
    for o in &items {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
        let name = o["metadata"]["name"].as_str().unwrap_or("");
        let _ = delete(req, &t.gvr, ns, name, st);
    }
    (
        200,
        json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}),
    )
}
