//! A request as read off the wire, and what handlers read from it: the
//! body (JSON, YAML or protobuf) and the query parameters.

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

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
