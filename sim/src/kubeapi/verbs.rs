//! The REST verbs on objects: get, list, create, replace, patch, delete
//! (finalizers and `deletionTimestamp`), `deletecollection`; and the
//! dispatch of every request that is not a watch.

use serde_json::{Value, json};

use super::discovery::Resource;
use super::failures::{bad_request, conflict, no_resource, not_found};
use super::fields::Fields;
use super::labels::Selector;
use super::paging;
use super::request::Request;
use super::store::State;
use super::target::{Target, target};
use super::writes::{create, settle, write};
use super::{Gvr, status};

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

/// A list, paged by `limit` and `continue` (`paging`).
fn list(req: &Request, t: &Target, res: Option<&Resource>, st: &mut State) -> (u16, Value) {
    let (labels, fields) = match selectors(req, &t.gvr.2) {
        Ok(s) => s,
        Err(e) => return e,
    };
    st.lists += 1;
    let items = st.list(&t.gvr, t.namespace.as_deref(), &labels, &fields);
    let page = match paging::page(req, items, st.revision, st.oldest_resumable()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut out = if super::table::wanted(&req.accept) {
        super::table::of(st, &t.gvr, &page.items)
    } else if req.accept.contains("as=PartialObjectMetadataList") {
        metadata_list(page.items, st.revision)
    } else {
        let (kind, api_version) = res.map_or(("List".to_string(), "v1".to_string()), |r| {
            (format!("{}List", r.kind), r.api_version())
        });
        json!({"kind": kind, "apiVersion": api_version,
            "metadata": {"resourceVersion": st.revision.to_string()}, "items": page.items})
    };
    if let Some(next) = page.next {
        out["metadata"]["continue"] = json!(next);
        out["metadata"]["remainingItemCount"] = json!(page.remaining);
    }
    (200, out)
}

/// What a client asking for `as=PartialObjectMetadataList` gets (the
/// kube-apiserver's metadata-only list): each item's metadata alone.
fn metadata_list(items: Vec<Value>, revision: u64) -> Value {
    let items: Vec<Value> = items
        .into_iter()
        .map(|o| {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": o["metadata"].clone()})
        })
        .collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision.to_string()}, "items": items})
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
    let mut new = settle(res, &current, body, false);
    let manager = req.param("fieldManager").unwrap_or_default();
    super::ownership::updated(
        &current,
        &mut new,
        &super::apply::manager_or_default(&manager),
    );
    if let Err(refused) = super::schema::admit(req, st, &t.gvr, &mut new) {
        return refused;
    }
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
