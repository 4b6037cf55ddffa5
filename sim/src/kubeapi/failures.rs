//! The answers of a real server when a request fails: a `Status` with
//! reason, details and code.

use serde_json::{Value, json};

use super::request::Request;
use super::{Gvr, status};

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

pub(crate) fn invalid(gvr: &Gvr, name: &str, message: &str) -> (u16, Value) {
    let msg = format!("{} {name:?} is invalid: {message}", qualified(gvr));
    about(422, "Invalid", gvr, name, &msg)
}
