//! Server-side printing: a `meta.k8s.io/v1` `Table` for clients that ask for
//! one (`kubectl get`): a CRD's `additionalPrinterColumns` (simple
//! `.a.b` paths), a few columns for the common built-in kinds, and Name
//! and Age for the rest.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::Gvr;
use super::discovery::crds;
use super::store::State;

/// (name, type, JSONPath) of one column.
type Column = (String, String, String);

/// Whether the client asked for a Table (`Accept: …;as=Table;…`).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.contains("as=Table")
}

fn builtin(plural: &str) -> &'static [(&'static str, &'static str, &'static str)] {
    match plural {
        "pods" => &[
            ("Status", "string", ".status.phase"),
            ("Node", "string", ".spec.nodeName"),
        ],
        "deployments" | "statefulsets" | "replicasets" => &[
            ("Replicas", "integer", ".spec.replicas"),
            ("Ready", "integer", ".status.readyReplicas"),
        ],
        "namespaces" => &[("Status", "string", ".status.phase")],
        "horizontalpodautoscalers" => &[
            ("Min", "integer", ".spec.minReplicas"),
            ("Max", "integer", ".spec.maxReplicas"),
            ("Replicas", "integer", ".status.currentReplicas"),
        ],
        "events" => &[
            ("Reason", "string", ".reason"),
            ("Message", "string", ".message"),
        ],
        _ => &[],
    }
}

fn columns(st: &State, gvr: &Gvr) -> Vec<Column> {
    let own =
        |(n, t, p): &(&str, &str, &str)| ((*n).to_string(), (*t).to_string(), (*p).to_string());
    let crd = st.objects.iter().find(|((g, _, _), o)| {
        *g == crds() && o["spec"]["group"] == gvr.0 && o["spec"]["names"]["plural"] == gvr.2
    });
    let Some((_, crd)) = crd else {
        let mut cols: Vec<Column> = builtin(&gvr.2).iter().map(own).collect();
        cols.push(own(&("Age", "date", ".metadata.creationTimestamp")));
        return cols;
    };
    let version = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == gvr.1))
        .cloned()
        .unwrap_or_default();
    match version["additionalPrinterColumns"].as_array() {
        Some(cols) => cols
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                (s("name"), s("type"), s("jsonPath"))
            })
            .collect(),
        None => vec![own(&("Age", "date", ".metadata.creationTimestamp"))],
    }
}

/// "5m", "3h", "2d": how old an RFC 3339 timestamp is.
fn age(stamp: &str) -> String {
    let Ok(t) = gpuscale_util::rfc3339::parse(stamp) else {
        return "<unknown>".into();
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let s = u64::try_from(i64::try_from(now).unwrap_or(i64::MAX).saturating_sub(t)).unwrap_or(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn cell(obj: &Value, (_, kind, path): &Column) -> Value {
    let v = obj
        .pointer(&path.replace('.', "/"))
        .cloned()
        .unwrap_or(Value::Null);
    match (kind.as_str(), &v) {
        ("date", Value::String(s)) => json!(age(s)),
        (_, Value::Null) => json!("<none>"),
        (_, Value::String(_) | Value::Number(_) | Value::Bool(_)) => v,
        _ => json!(v.to_string()),
    }
}

/// `items` as a Table (one row each; each row carries its object).
pub(crate) fn of(st: &State, gvr: &Gvr, items: &[Value]) -> Value {
    let cols = columns(st, gvr);
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}),
    ];
    defs.extend(cols.iter().map(|(n, t, _)| {
        json!({"name": n, "type": if t == "date" { "string" } else { t.as_str() }, "format": "", "description": "", "priority": 0})
    }));
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            cells.extend(cols.iter().map(|c| cell(o, c)));
            json!({"cells": cells, "object": o})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": st.revision.to_string()},
        "columnDefinitions": defs, "rows": rows})
}
