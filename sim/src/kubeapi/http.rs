//! The wire: HTTP/1.1 keep-alive connections, one thread each; a watch
//! streams chunked JSON events until `timeoutSeconds` or the client leaves.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::labels::Selector;
use super::{Gvr, State, Watcher, lock, status};

struct Request {
    method: String,
    path: String,
    query: String,
    body: Value,
    close: bool,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let (mut len, mut close) = (0usize, false);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "connection" => close = v.trim().eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    Some(Request {
        method,
        path: path.to_string(),
        query: query.to_string(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        close,
    })
}

pub(super) fn serve(conn: TcpStream, state: &Mutex<State>) {
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    while let Some(req) = read_request(&mut reader) {
        lock(state)
            .requests
            .push(format!("{} {}?{}", req.method, req.path, req.query));
        if let Some(w) = watch_request(&req) {
            stream_watch(&mut writer, state, w, &req.query);
            return;
        }
        let (code, body) = answer(&req, &mut lock(state));
        let text = body.to_string();
        let reason = match code {
            200 => "OK",
            201 => "Created",
            400 => "Bad Request",
            404 => "Not Found",
            409 => "Conflict",
            _ => "Error",
        };
        let sent = write!(
            writer,
            "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if sent.is_err() || req.close {
            return;
        }
    }
}

/// A percent-decoded query parameter.
pub(super) fn param(query: &str, name: &str) -> Option<String> {
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

/// Where a path points: a collection (namespace None = all namespaces or a
/// cluster-scoped resource) or one object.
struct Target {
    gvr: Gvr,
    namespace: Option<String>,
    name: Option<String>,
    /// `scale` or `status`.
    subresource: Option<String>,
}

fn target(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let gvr = |r: &str| (group.to_string(), version.to_string(), r.to_string());
    let s = |x: &&str| Some(x.to_string());
    let t =
        |r: &str, namespace: Option<String>, name: Option<String>, sub: Option<String>| Target {
            gvr: gvr(r),
            namespace,
            name,
            subresource: sub,
        };
    Some(match rest {
        ["namespaces", ns, r] => t(r, s(ns), None, None),
        ["namespaces", ns, r, name] => t(r, s(ns), s(name), None),
        ["namespaces", ns, r, name, sub] => t(r, s(ns), s(name), s(sub)),
        [r] => t(r, None, None, None),
        [r, name] => t(r, Some(String::new()), s(name), None),
        _ => return None,
    })
}

fn watch_request(req: &Request) -> Option<Target> {
    let watch = param(&req.query, "watch").is_some_and(|v| v == "true" || v == "1");
    (req.method == "GET" && watch)
        .then(|| target(&req.path))
        .flatten()
        .filter(|t| t.name.is_none())
}

fn stream_watch(w: &mut TcpStream, state: &Mutex<State>, t: Target, query: &str) {
    let selector = match Selector::parse(&param(query, "labelSelector").unwrap_or_default()) {
        Ok(s) => s,
        Err(msg) => {
            let text = status(400, "BadRequest", &msg).1.to_string();
            let _ = write!(
                w,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            );
            return;
        }
    };
    let secs: u64 = param(query, "timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (tx, rx) = mpsc::channel();
    lock(state).watchers.push(Watcher {
        gvr: t.gvr,
        namespace: t.namespace,
        selector,
        events: tx,
    });
    if write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .is_err()
    {
        return;
    }
    let end = Instant::now() + Duration::from_secs(secs);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(event) => {
                let line = format!("{event}\n");
                if write!(w, "{:x}\r\n{line}\r\n", line.len()).is_err() {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
    let _ = write!(w, "0\r\n\r\n");
}

fn answer(req: &Request, st: &mut State) -> (u16, Value) {
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews") => token_review(&req.body, st),
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => {
            let (allowed, reason) = (st.cluster.sar)(&req.body["spec"]);
            review(&req.body, json!({"allowed": allowed, "reason": reason}), st)
        }
        _ => match (target(&req.path), super::discovery::resources(&req.path)) {
            (_, Some(list)) => (200, list),
            (Some(t), _) if t.subresource.is_some() => subresource(req, t, st),
            (Some(t), _) => objects(req, t, st),
            _ => not_found(req),
        },
    }
}

fn not_found(req: &Request) -> (u16, Value) {
    status(
        404,
        "NotFound",
        &format!(
            "the server could not find the requested resource ({} {})",
            req.method, req.path
        ),
    )
}

fn token_review(body: &Value, st: &mut State) -> (u16, Value) {
    let token = body["spec"]["token"].as_str().unwrap_or("");
    let result = match st.cluster.tokens.get(token) {
        Some((user, groups)) => {
            json!({"authenticated": true, "user": {"username": user, "uid": "u-1", "groups": groups}})
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    review(body, result, st)
}

fn review(body: &Value, result: Value, st: &mut State) -> (u16, Value) {
    let mut out = body.clone();
    out["status"] = result;
    out["metadata"] = json!({});
    st.reviews.push(out.clone());
    (201, out)
}

fn objects(req: &Request, t: Target, st: &mut State) -> (u16, Value) {
    let ns = t.namespace.clone().unwrap_or_default();
    let what = |name: &str| format!("{} {name:?} not found", t.gvr.2);
    match (req.method.as_str(), &t.name) {
        ("GET", None) => {
            let sel = match Selector::parse(&param(&req.query, "labelSelector").unwrap_or_default())
            {
                Ok(s) => s,
                Err(msg) => return status(400, "BadRequest", &msg),
            };
            let items = st.list(&t.gvr, t.namespace.as_deref(), &sel);
            (
                200,
                json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": st.revision.to_string()}, "items": items}),
            )
        }
        ("GET", Some(name)) => match st.objects.get(&(t.gvr.clone(), ns, name.clone())) {
            Some(o) => (200, o.clone()),
            None => status(404, "NotFound", &what(name)),
        },
        ("POST", None) => {
            let mut obj = req.body.clone();
            obj["metadata"]["namespace"] = json!(ns);
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
            if st.objects.contains_key(&(t.gvr.clone(), ns, name.clone())) {
                return status(
                    409,
                    "AlreadyExists",
                    &format!("{} {name:?} already exists", t.gvr.2),
                );
            }
            (201, st.store(&t.gvr, obj))
        }
        ("PUT", Some(name)) => {
            let Some(current) = st.objects.get(&(t.gvr.clone(), ns.clone(), name.clone())) else {
                return status(404, "NotFound", &what(name));
            };
            let sent = &req.body["metadata"]["resourceVersion"];
            if !sent.is_null() && *sent != current["metadata"]["resourceVersion"] {
                return status(
                    409,
                    "Conflict",
                    &format!(
                        "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                        t.gvr.2
                    ),
                );
            }
            let mut obj = req.body.clone();
            obj["metadata"]["namespace"] = json!(ns);
            obj["metadata"]["name"] = json!(name);
            (200, st.store(&t.gvr, obj))
        }
        ("PATCH", Some(name)) => {
            let Some(mut obj) = st.objects.get(&(t.gvr.clone(), ns, name.clone())).cloned() else {
                return status(404, "NotFound", &what(name));
            };
            merge_patch(&mut obj, &req.body);
            (200, st.store(&t.gvr, obj))
        }
        ("DELETE", Some(name)) => match st.remove(&t.gvr, &ns, name) {
            Some(o) => (200, o),
            None => status(404, "NotFound", &what(name)),
        },
        _ => status(
            405,
            "MethodNotAllowed",
            &format!("{} is not allowed on {}", req.method, req.path),
        ),
    }
}

/// RFC 7386 JSON merge patch (what `kubectl patch --type merge` and kube's
/// `Patch::Merge` send): null deletes, objects merge, the rest replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (k, v) in fields {
        if v.is_null() {
            if let Some(map) = target.as_object_mut() {
                map.remove(k);
            }
        } else {
            merge_patch(&mut target[k.as_str()], v);
        }
    }
}

/// `scale` (as `autoscaling/v1` `Scale`, backed by the object's
/// `spec.replicas`) and `status` (a patch that touches only `.status`).
fn subresource(req: &Request, t: Target, st: &mut State) -> (u16, Value) {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let sub = t.subresource.clone().unwrap_or_default();
    if !super::discovery::has_subresource(&t.gvr, &sub) {
        return not_found(req);
    }
    let Some(mut obj) = st
        .objects
        .get(&(t.gvr.clone(), ns.clone(), name.clone()))
        .cloned()
    else {
        return status(404, "NotFound", &format!("{} {name:?} not found", t.gvr.2));
    };
    match (req.method.as_str(), sub.as_str()) {
        ("GET", "scale") => (200, scale_of(&obj)),
        ("PATCH", "scale") => {
            let mut scale = scale_of(&obj);
            merge_patch(&mut scale, &req.body);
            obj["spec"]["replicas"] = scale["spec"]["replicas"].clone();
            let stored = st.store(&t.gvr, obj);
            st.scale_patches.push(super::ScalePatch {
                namespace: ns,
                name,
                replicas: scale["spec"]["replicas"].as_i64().unwrap_or(-1),
                at: std::time::SystemTime::now(),
            });
            (200, scale_of(&stored))
        }
        ("GET", "status") => (200, obj),
        ("PATCH", "status") => {
            let mut status_only = json!({});
            if let Some(s) = req.body.get("status") {
                status_only["status"] = s.clone();
            }
            merge_patch(&mut obj, &status_only);
            (200, st.store(&t.gvr, obj))
        }
        _ => status(
            405,
            "MethodNotAllowed",
            &format!("{} is not allowed on {}", req.method, req.path),
        ),
    }
}

fn scale_of(obj: &Value) -> Value {
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
            "resourceVersion": obj["metadata"]["resourceVersion"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0)},
    })
}
