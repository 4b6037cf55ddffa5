//! The protobuf of a Deployment as `kubectl create deployment NAME
//! --image=… [--replicas=N] [--port=P] [-- COMMAND…]` sends it: replicas,
//! the label selector, and a pod template of containers with their name,
//! image, command, args, ports and pull policy. A field beyond those is
//! refused with 415 naming it, never dropped.

use serde_json::{Value, json};

use super::{Field, entry, fields, metadata, push, text};

fn refuse(what: &str, n: u64) -> String {
    format!(
        "unsupported media type \"application/vnd.kubernetes.protobuf\" for {what} field {n}: send JSON or YAML (kubectl create -f, kubectl apply)"
    )
}

/// An empty string, a zero (proto2 writes the zero of every optional
/// scalar) or a message of nothing but those (`strategy: {}`,
/// `resources: {}`) carries nothing.
fn empty(f: &Field<'_>) -> bool {
    match f {
        Field::Varint(v) => *v == 0,
        Field::Bytes([]) => true,
        Field::Bytes(b) => fields(b).is_ok_and(|inner| inner.iter().all(|(_, f)| empty(f))),
    }
}

fn int(f: &Field<'_>) -> Option<Value> {
    match f {
        Field::Varint(v) => Some(json!(*v as i32)),
        Field::Bytes(_) => None,
    }
}

/// `DeploymentSpec` (apps/v1).
pub(super) fn deployment_spec(b: &[u8]) -> Result<Value, String> {
    let mut spec = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, _) => spec["replicas"] = int(&f).ok_or_else(|| refuse("DeploymentSpec", n))?,
            (2, Field::Bytes(s)) => spec["selector"] = selector(s)?,
            (3, Field::Bytes(t)) => spec["template"] = template(t)?,
            _ if empty(&f) => {}
            _ => return Err(refuse("DeploymentSpec", n)),
        }
    }
    Ok(spec)
}

/// `LabelSelector` (meta/v1): `matchLabels` only.
fn selector(b: &[u8]) -> Result<Value, String> {
    let mut out = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, Field::Bytes(e)) => {
                let (k, v) = entry(e)?;
                out["matchLabels"][k] = text(v);
            }
            _ => return Err(refuse("LabelSelector", n)),
        }
    }
    Ok(out)
}

/// `PodTemplateSpec` (core/v1).
fn template(b: &[u8]) -> Result<Value, String> {
    let mut out = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, Field::Bytes(m)) => out["metadata"] = metadata(m)?,
            (2, Field::Bytes(s)) => out["spec"] = pod_spec(s)?,
            _ if empty(&f) => {}
            _ => return Err(refuse("PodTemplateSpec", n)),
        }
    }
    Ok(out)
}

/// `PodSpec` (core/v1): its containers.
fn pod_spec(b: &[u8]) -> Result<Value, String> {
    let mut out = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (2, Field::Bytes(c)) => push(&mut out["containers"], container(c)?),
            _ if empty(&f) => {}
            _ => return Err(refuse("PodSpec", n)),
        }
    }
    Ok(out)
}

/// `Container` (core/v1).
fn container(b: &[u8]) -> Result<Value, String> {
    let mut out = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, Field::Bytes(v)) => out["name"] = text(v),
            (2, Field::Bytes(v)) => out["image"] = text(v),
            (3, Field::Bytes(v)) => push(&mut out["command"], text(v)),
            (4, Field::Bytes(v)) => push(&mut out["args"], text(v)),
            (6, Field::Bytes(p)) => push(&mut out["ports"], port(p)?),
            (14, Field::Bytes(v)) => out["imagePullPolicy"] = text(v),
            _ if empty(&f) => {}
            _ => return Err(refuse("Container", n)),
        }
    }
    Ok(out)
}

/// `ContainerPort` (core/v1).
fn port(b: &[u8]) -> Result<Value, String> {
    let mut out = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, Field::Bytes(v)) => out["name"] = text(v),
            (3, _) => out["containerPort"] = int(&f).ok_or_else(|| refuse("ContainerPort", n))?,
            (4, Field::Bytes(v)) => out["protocol"] = text(v),
            _ if empty(&f) => {}
            _ => return Err(refuse("ContainerPort", n)),
        }
    }
    Ok(out)
}
