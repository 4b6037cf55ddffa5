//! PATCH on an object, by content type: JSON merge, strategic merge
//! (built-in kinds only; custom resources answer 415 as on a real server),
//! JSON patch, and server-side apply: the applied configuration is merged
//! into the object (strategically for built-in kinds), its fields owned by
//! the manager in `managedFields`, and an apply that changes another
//! manager's field is refused 409 unless forced ([`ownership`]); fields a
//! manager stops applying are not removed.

use serde_json::{Value, json};

use super::discovery::Resource;
use super::failures::{about, bad_request, conflict, not_found};
use super::request::Request;
use super::store::State;
use super::target::Target;
use super::writes::{create, settle, write};
use super::{ownership, patch, status};

/// The manager of a write that names none: a real server derives it from
/// the client's user agent.
pub(crate) fn manager_or_default(manager: &str) -> String {
    if manager.is_empty() {
        "unknown".into()
    } else {
        manager.into()
    }
}

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
            let mut obj = body.clone();
            ownership::applied(&json!({}), &mut obj, &body, &manager, &body["apiVersion"]);
            return create(req, t, res, obj, st);
        }
        return not_found(&t.gvr, name);
    };
    let force = req.param("force").as_deref() == Some("true");
    if matches!(kind, Kind::Apply)
        && !force
        && let Some(refused) = ownership::conflicts(&t.gvr, &current, &body, &manager)
    {
        return refused;
    }
    let builtin = res.is_none_or(Resource::builtin);
    let new = match patched(&kind, &current, &body, builtin) {
        Ok(n) => n,
        Err(e) => return about(422, "Invalid", &t.gvr, name, &e),
    };
    let sent = &new["metadata"]["resourceVersion"];
    if !sent.is_null() && *sent != current["metadata"]["resourceVersion"] {
        return conflict(&t.gvr, name);
    }
    let mut new = settle(res, &current, new, false);
    if matches!(kind, Kind::Apply) {
        ownership::applied(&current, &mut new, &body, &manager, &body["apiVersion"]);
    } else {
        ownership::updated(&current, &mut new, &manager_or_default(&manager));
    }
    if let Err(refused) = super::schema::admit(req, st, &t.gvr, &mut new) {
        return refused;
    }
    (200, write(req, st, &t.gvr, new))
}
