//! `limit` and `continue` on lists, as kube-apiserver pages them: items in
//! key order (namespace, name), at most `limit` a page, and a `continue`
//! token (base64 JSON of the list's resourceVersion and the key to start
//! after) while more remain, with `remainingItemCount`. A token whose
//! resourceVersion has left the change log is `410 Expired`, as on a real
//! server once etcd has compacted it. Unlike a real server a later page is
//! read from the objects as they are now, not as they were at the first.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::failures::bad_request;
use super::request::Request;
use super::status;

/// One page of a list.
pub(crate) struct Page {
    pub(crate) items: Vec<Value>,
    pub(crate) next: Option<String>,
    pub(crate) remaining: Option<usize>,
}

/// The message kube-apiserver gives for an expired continue token.
const EXPIRED: &str = "The provided continue parameter is too old to display a consistent \
list result. You can start a new list without the continue parameter.";

/// (namespace, name): the store's order.
fn key(obj: &Value) -> (String, String) {
    let meta = &obj["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (s(&meta["namespace"]), s(&meta["name"]))
}

/// (resourceVersion, key to start after) of a continue token; the key is
/// written `namespace/name` (a namespace has no `/`).
fn decode(token: &str) -> Option<(u64, (String, String))> {
    let raw = STANDARD.decode(token).ok()?;
    let v: Value = serde_json::from_slice(&raw).ok()?;
    let (ns, name) = v["start"].as_str()?.split_once('/')?;
    Some((v["rv"].as_u64()?, (ns.to_string(), name.to_string())))
}

fn encode(rv: u64, (ns, name): &(String, String)) -> String {
    let start = format!("{ns}/{name}");
    STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string())
}

/// The page of `items` (in key order) that `limit` and `continue` ask for.
pub(crate) fn page(
    req: &Request,
    items: Vec<Value>,
    revision: u64,
    oldest: u64,
) -> Result<Page, (u16, Value)> {
    let limit = match req.param("limit").filter(|l| !l.is_empty()) {
        None => 0,
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| bad_request(&format!("invalid limit {l:?}")))?,
    };
    let (rv, after) = match req.param("continue").filter(|c| !c.is_empty()) {
        None => (revision, None),
        Some(c) => {
            let (rv, start) = decode(&c)
                .ok_or_else(|| bad_request("continue key is not valid: incorrect encoded start"))?;
            if rv < oldest {
                return Err(status(410, "Expired", EXPIRED));
            }
            (rv, Some(start))
        }
    };
    let mut rest: Vec<Value> = items
        .into_iter()
        .filter(|o| after.as_ref().is_none_or(|a| key(o) > *a))
        .collect();
    if limit == 0 || rest.len() <= limit {
        return Ok(Page {
            items: rest,
            next: None,
            remaining: None,
        });
    }
    let left = rest.split_off(limit);
    let next = rest.last().map(|o| encode(rv, &key(o)));
    Ok(Page {
        items: rest,
        next,
        remaining: Some(left.len()),
    })
}
