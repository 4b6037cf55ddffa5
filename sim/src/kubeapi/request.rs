//! A request as read off the wire, and what handlers read from it: the
//! body (JSON, YAML or protobuf) and the query parameters.

use std::cell::RefCell;

use serde_json::Value;

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) content_type: String,
    pub(crate) accept: String,
    pub(crate) body: Vec<u8>,
    pub(crate) close: bool,
    pub(crate) token: Option<String>,
    /// What the answer warns of, one `Warning` header each.
    pub(crate) warnings: RefCell<Vec<String>>,
}

impl Request {
    /// The body as JSON, as YAML (server-side apply sends either), or as
    /// protobuf for the kinds `protobuf` reads.
    pub(crate) fn json(&self) -> Result<Value, String> {
        if self.content_type.contains("protobuf") {
            return super::protobuf::decode(&self.body);
        }
        if self.content_type.contains("cbor") {
            return Err(format!(
                "unsupported media type {:?}: send JSON or YAML",
                self.content_type
            ));
        }
        serde_json::from_slice(&self.body).or_else(|json_err| {
            if self.content_type.contains("yaml") {
                yaml_serde::from_slice(&self.body).map_err(|e| format!("invalid YAML body: {e}"))
            } else {
                Err(format!("invalid JSON body: {json_err}"))
            }
        })
    }

    /// A percent-decoded query parameter.
    pub(crate) fn param(&self, name: &str) -> Option<String> {
        param(&self.query, name)
    }

    /// Adds a `Warning: 299 - "…"` header to the answer (kubectl prints
    /// `Warning: …`).
    pub(crate) fn warn(&self, message: String) {
        self.warnings.borrow_mut().push(message);
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        self.param(name).is_some_and(|v| v == "true" || v == "1")
    }
}

fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| decode(v))
    })
}

/// A query value, percent-decoded; one with a bad escape is kept as sent, so
/// the parser that reads it (a selector, a number) refuses it by name.
fn decode(s: &str) -> String {
    gpuscale_util::percent::query(s).unwrap_or_else(|_| s.to_owned())
}
