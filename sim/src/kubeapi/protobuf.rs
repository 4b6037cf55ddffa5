//! Protobuf request bodies for the few kinds `kubectl create <kind> <name>`
//! generators send that way: Namespace, ConfigMap, Secret, ServiceAccount
//! (name, namespace, labels, annotations, finalizers and the kind's data),
//! and Deployment (`apps`). Other kinds sent as protobuf get a 415
//! that says to send JSON.

mod apps;

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// One decoded field: a varint or a length-delimited payload.
pub(super) enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or("truncated protobuf varint")?;
        *at += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err("protobuf varint too long".into())
}

pub(super) fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let (mut at, mut out) = (0, Vec::new());
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let field = match key & 7 {
            0 => Field::Varint(varint(buf, &mut at)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).map_err(|e| e.to_string())?;
                let end = at
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated protobuf field")?;
                let bytes = &buf[at..end];
                at = end;
                Field::Bytes(bytes)
            }
            1 => {
                at += 8;
                continue;
            }
            5 => {
                at += 4;
                continue;
            }
            other => return Err(format!("unsupported protobuf wire type {other}")),
        };
        out.push((key >> 3, field));
    }
    Ok(out)
}

pub(super) fn text(b: &[u8]) -> Value {
    json!(String::from_utf8_lossy(b))
}

/// A `map<string, …>` entry's (key, value bytes).
pub(super) fn entry(b: &[u8]) -> Result<(String, &[u8]), String> {
    let (mut key, mut value) = (String::new(), &b[..0]);
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
            (2, Field::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

pub(super) fn metadata(b: &[u8]) -> Result<Value, String> {
    let mut meta = json!({});
    for (n, f) in fields(b)? {
        let Field::Bytes(v) = f else { continue };
        match n {
            1 => meta["name"] = text(v),
            2 => meta["generateName"] = text(v),
            3 => meta["namespace"] = text(v),
            11 | 12 => {
                let (k, val) = entry(v)?;
                meta[if n == 11 { "labels" } else { "annotations" }][k] = text(val);
            }
            14 => push(&mut meta["finalizers"], text(v)),
            _ => {}
        }
    }
    Ok(meta)
}

pub(super) fn push(list: &mut Value, v: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(a) = list.as_array_mut() {
        a.push(v);
    }
}

/// A `k8s\0`-enveloped `runtime.Unknown` as the JSON object it carries.
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or("not a Kubernetes protobuf envelope")?;
    let (mut api_version, mut kind, mut raw) = (Value::Null, Value::Null, &rest[..0]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (m, g) in fields(tm)? {
                    match (m, g) {
                        (1, Field::Bytes(v)) => api_version = text(v),
                        (2, Field::Bytes(v)) => kind = text(v),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), api_version.clone());
    obj.insert("kind".into(), kind.clone());
    let b64 = |v: &[u8]| json!(base64::engine::general_purpose::STANDARD.encode(v));
    for (n, f) in fields(raw)? {
        let field = match (kind.as_str().unwrap_or(""), n, f) {
            (_, 1, Field::Bytes(m)) => ("metadata", metadata(m)?),
            ("ConfigMap" | "Secret", 2, Field::Bytes(e)) => {
                let (k, v) = entry(e)?;
                let v = if kind == "Secret" { b64(v) } else { text(v) };
                let data = obj.entry("data").or_insert_with(|| json!({}));
                data[k] = v;
                continue;
            }
            ("ConfigMap", 3, Field::Bytes(e)) => {
                let (k, v) = entry(e)?;
                obj.entry("binaryData").or_insert_with(|| json!({}))[k] = b64(v);
                continue;
            }
            ("Secret", 3, Field::Bytes(t)) => ("type", text(t)),
            ("Deployment", 2, Field::Bytes(s)) => ("spec", apps::deployment_spec(s)?),
            ("Deployment", 3, _) => continue,
            ("ConfigMap", 4, Field::Varint(i)) | ("Secret", 5, Field::Varint(i)) => {
                ("immutable", json!(i != 0))
            }
            ("ServiceAccount", 4, Field::Varint(i)) => {
                ("automountServiceAccountToken", json!(i != 0))
            }
            ("Namespace", 2, Field::Bytes(_))
            | ("ConfigMap" | "Secret" | "Namespace" | "ServiceAccount", _, _) => continue,
            (other, _, _) => {
                return Err(format!(
                    "unsupported media type \"application/vnd.kubernetes.protobuf\" for {other}: send JSON or YAML (kubectl create -f, kubectl apply)"
                ));
            }
        };
        obj.insert(field.0.into(), field.1);
    }
    Ok(Value::Object(obj))
}
