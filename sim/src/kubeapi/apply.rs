//! PATCH on an object, by content type: JSON merge, strategic merge
//! (built-in kinds only; custom resources answer 415 as on a real server),
//! JSON patch, and server-side apply. Apply is "last applier wins": the
//! applied configuration is merged into the object (strategically for
//! built-in kinds) and the manager recorded in `managedFields`; `force`
//! is accepted, no field ownership conflicts are raised and fields a
//! manager stops applying are not removed.

use serde_json::{Value, json};

use super::discovery::Resource;
use super::failures::{about, bad_request, conflict, not_found};
use super::request::Request;
use super::store::State;
use super::target::Target;
use super::writes::{create, settle, write};
use super::{patch, status};

/// The patch types a real server names when refusing another.
const ACCEPTED: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// The kinds of PATCH body.
pub(crate) enum Kind {
    Merge,
    Strategic,
    Json,
    Apply,
}

pub(crate) fn kind(req: &Request, res: Option<&Resource>) -> Result<Kind, (u16, Value)> {
    let ct = req.content_type.split(';').next().unwrap_or("").trim();
    let unsupported = |accepted: &str| {
        status(
            415,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    };
    match ct {
        "application/merge-patch+json" => Ok(Kind::Merge),
        "application/json-patch+json" => Ok(Kind::Json),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Kind::Apply),
        "application/strategic-merge-patch+json" if res.is_none_or(Resource::builtin) => {
            Ok(Kind::Strategic)
        }
        "application/strategic-merge-patch+json" => Err(unsupported(ACCEPTED)),
        _ => Err(unsupported(&format!(
            "{ACCEPTED}, application/strategic-merge-patch+json"
        ))),
    }
}

/// `body` patched onto `target` as `kind` says.
pub(crate) fn patched(
    kind: &Kind,
    target: &Value,
    body: &Value,
    builtin: bool,
) -> Result<Value, String> {
    let mut out = target.clone();
    match kind {
        Kind::Merge => patch::merge(&mut out, body),
        Kind::Strategic => patch::strategic(&mut out, body)?,
        Kind::Json => patch::json_patch(&mut out, body)?,
        Kind::Apply if builtin => patch::strategic(&mut out, body)?,
        Kind::Apply => patch::merge(&mut out, body),
    }
    Ok(out)
}

/// The applier's entry in `managedFields` (no per-field sets are kept).
fn manage(obj: &mut Value, manager: &str, api_version: &Value) {
    let entry = json!({"manager": manager, "operation": "Apply", "apiVersion": api_version,
        "time": super::store::now(),
        "fieldsType": "FieldsV1", "fieldsV1": {}});
    let list = &mut obj["metadata"]["managedFields"];
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        list.retain(|e| e["manager"] != manager || e["operation"] != "Apply");
        list.push(entry);
    }
}

pub(crate) fn patch(
    req: &Request,
    t: &Target,
    res: Option<&Resource>,
    name: &str,
    st: &mut State,
) -> (u16, Value) {
    let kind = match kind(req, res) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let body = match req.json() {
        Ok(b) => b,
        Err(e) => return bad_request(&e),
    };
    let manager = req.param("fieldManager").unwrap_or_default();
    if matches!(kind, Kind::Apply) && manager.is_empty() {
        return bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        );
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let Some(current) = st.get(&t.gvr, &ns, name).cloned() else {
        if matches!(kind, Kind::Apply) {
            let mut obj = body;
            let api_version = obj["apiVersion"].clone();
            manage(&mut obj, &manager, &api_version);
            return create(req, t, res, obj, st);
        }
        return not_found(&t.gvr, name);
    };
    let builtin = res.is_none_or(Resource::builtin);
    let mut new = match patched(&kind, &current, &body, builtin) {
        Ok(n) => n,
        Err(e) => return about(422, "Invalid", &t.gvr, name, &e),
    };
    let sent = &new["metadata"]["resourceVersion"];
    if !sent.is_null() && *sent != current["metadata"]["resourceVersion"] {
        return conflict(&t.gvr, name);
    }
    if matches!(kind, Kind::Apply) {
        manage(&mut new, &manager, &body["apiVersion"]);
    }
    let mut new = settle(res, &current, new, false);
    if let Err(refused) = super::schema::admit(req, st, &t.gvr, &mut new) {
        return refused;
    }
    (200, write(req, st, &t.gvr, new))
}
