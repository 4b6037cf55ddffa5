//! The `status` and `scale` subresources: `status` writes change only
//! `.status` (and never `generation`); `scale` is an `autoscaling/v1`
//! `Scale` read from and written to the paths the kind declares (a CRD's
//! `specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::apply::{kind, patched};
use super::discovery::{Resource, ScalePaths};
use super::failures::{bad_request, conflict, no_resource, not_found};
use super::request::Request;
use super::store::State;
use super::target::Target;
use super::writes::{settle, write};
use super::{ScalePatch, status};

pub(crate) fn answer(
    req: &Request,
    t: &Target,
    res: Option<&Resource>,
    st: &mut State,
) -> (u16, Value) {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let sub = t.subresource.as_deref().unwrap_or("");
    let scale = res.and_then(|r| r.scale.clone());
    let served = match sub {
        "status" => res.is_some_and(|r| r.status),
        "scale" => scale.is_some(),
        _ => false,
    };
    if !served {
        return no_resource(req);
    }
    let Some(current) = st.get(&t.gvr, &ns, &name).cloned() else {
        return not_found(&t.gvr, &name);
    };
    let scale = scale.filter(|_| sub == "scale");
    let result = match (req.method.as_str(), scale) {
        ("GET", None) => return (200, current),
        ("GET", Some(paths)) => return (200, scale_of(&current, &paths)),
        ("PUT" | "PATCH", None) => {
            updated(req, t, res, &current).map(|new| status_write(res, &current, &new))
        }
        ("PUT" | "PATCH", Some(paths)) => updated(req, t, res, &scale_of(&current, &paths))
            .and_then(|new| scale_write(res, &current, &new, &paths)),
        _ => {
            return status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            );
        }
    };
    let new = match result {
        Ok(new) => new,
        Err(e) => return e,
    };
    let stored = write(req, st, &t.gvr, new);
    match res.and_then(|r| r.scale.clone()) {
        Some(paths) if sub == "scale" => {
            let scale = scale_of(&stored, &paths);
            st.remember_scale(ScalePatch {
                namespace: ns,
                name,
                replicas: scale["spec"]["replicas"].as_i64().unwrap_or(-1),
                at: SystemTime::now(),
            });
            (200, scale)
        }
        _ => (200, stored),
    }
}

/// The request applied to `view` (PUT replaces it, PATCH patches it).
fn updated(
    req: &Request,
    t: &Target,
    res: Option<&Resource>,
    view: &Value,
) -> Result<Value, (u16, Value)> {
    let body = req.json().map_err(|e| bad_request(&e))?;
    let new = if req.method == "PUT" {
        body
    } else {
        let k = kind(req, res)?;
        patched(&k, view, &body, true).map_err(|e| status(422, "Invalid", &e))?
    };
    let sent = &new["metadata"]["resourceVersion"];
    if !sent.is_null() && *sent != view["metadata"]["resourceVersion"] {
        return Err(conflict(&t.gvr, t.name.as_deref().unwrap_or("")));
    }
    Ok(new)
}

fn status_write(res: Option<&Resource>, current: &Value, new: &Value) -> Value {
    let mut out = current.clone();
    out["status"] = new["status"].clone();
    settle(res, current, out, true)
}

fn scale_write(
    res: Option<&Resource>,
    current: &Value,
    new: &Value,
    paths: &ScalePaths,
) -> Result<Value, (u16, Value)> {
    let Some(replicas) = new["spec"]["replicas"].as_i64().filter(|r| *r >= 0) else {
        return Err(status(
            422,
            "Invalid",
            "spec.replicas: Invalid value: must be a non-negative integer",
        ));
    };
    let mut out = current.clone();
    set(&mut out, &paths.spec, json!(replicas));
    Ok(settle(res, current, out, false))
}

fn set(obj: &mut Value, pointer: &str, v: Value) {
    let mut at = obj;
    for part in pointer.trim_start_matches('/').split('/') {
        if !at.is_object() {
            *at = json!({});
        }
        at = &mut at[part];
    }
    *at = v;
}

/// A label selector object (`matchLabels`, `matchExpressions`) as the
/// string form a `Scale` carries.
fn selector_string(v: &Value) -> Value {
    if v.is_string() {
        return v.clone();
    }
    let mut terms: Vec<String> = v["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in v["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        terms.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    json!(terms.join(","))
}

pub(crate) fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let at = |p: &str| obj.pointer(p).cloned().unwrap_or(Value::Null);
    let mut scale = json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
            "resourceVersion": obj["metadata"]["resourceVersion"],
            "uid": obj["metadata"]["uid"],
            "creationTimestamp": obj["metadata"]["creationTimestamp"],
        },
        "spec": {"replicas": at(&paths.spec).as_i64().unwrap_or(1)},
        "status": {"replicas": at(&paths.status).as_i64().unwrap_or(0)},
    });
    if let Some(sel) = paths.selector.as_deref().map(at).filter(|v| !v.is_null()) {
        scale["status"]["selector"] = selector_string(&sel);
    }
    scale
}
