//! Server-side printing: a `meta.k8s.io/v1` `Table` for clients that ask for
//! one (`kubectl get`): a CRD's `additionalPrinterColumns` (simple
//! `.a.b` paths, with their `priority`: kubectl shows priority 0 and adds
//! the rest with `-o wide`), the columns kube-apiserver prints for the
//! common built-in kinds, and Name and Age for the rest.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::Gvr;
use super::discovery::crds;
use super::store::State;

/// One column: name, type, JSONPath (or a computed cell's name) and
/// priority (0: always shown; above: `-o wide` only).
#[derive(Debug, Clone)]
struct Column {
    name: String,
    kind: String,
    path: String,
    priority: u64,
}

impl Column {
    fn of(&(name, kind, path, priority): &(&str, &str, &str, u64)) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            path: path.into(),
            priority,
        }
    }
}

/// A cell kube-apiserver computes rather than reads at one path.
const READY: &str = "ready";
const RESTARTS: &str = "restarts";

/// Whether the client asked for a Table (`Accept: …;as=Table;…`).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.contains("as=Table")
}

type Builtin = (&'static str, &'static str, &'static str, u64);

/// The built-in kinds' columns before Age, as kube-apiserver's printers
/// (pkg/printers/internalversion) define them, in part.
fn builtin(plural: &str) -> &'static [Builtin] {
    match plural {
        "pods" => &[
            ("Ready", "string", READY, 0),
            ("Status", "string", ".status.phase", 0),
            ("Restarts", "string", RESTARTS, 0),
        ],
        "deployments" | "statefulsets" | "replicasets" => &[
            ("Replicas", "integer", ".spec.replicas", 0),
            ("Ready", "integer", ".status.readyReplicas", 0),
        ],
        "namespaces" => &[("Status", "string", ".status.phase", 0)],
        "poddisruptionbudgets" => &[
            ("Min Available", "string", ".spec.minAvailable", 0),
            ("Max Unavailable", "string", ".spec.maxUnavailable", 0),
            (
                "Allowed Disruptions",
                "integer",
                ".status.disruptionsAllowed",
                0,
            ),
        ],
        "daemonsets" => &[
            ("Desired", "integer", ".status.desiredNumberScheduled", 0),
            ("Ready", "integer", ".status.numberReady", 0),
        ],
        "horizontalpodautoscalers" => &[
            ("Min", "integer", ".spec.minReplicas", 0),
            ("Max", "integer", ".spec.maxReplicas", 0),
            ("Replicas", "integer", ".status.currentReplicas", 0),
        ],
        "events" => &[
            ("Reason", "string", ".reason", 0),
            ("Message", "string", ".message", 0),
        ],
        _ => &[],
    }
}

/// The built-in kinds' columns after Age (`-o wide`).
fn builtin_wide(plural: &str) -> &'static [Builtin] {
    match plural {
        "pods" => &[
            ("IP", "string", ".status.podIP", 1),
            ("Node", "string", ".spec.nodeName", 1),
        ],
        _ => &[],
    }
}

fn columns(st: &State, gvr: &Gvr) -> Vec<Column> {
    let age = Column::of(&("Age", "date", ".metadata.creationTimestamp", 0));
    let crd = st.objects.iter().find(|((g, _, _), o)| {
        *g == crds() && o["spec"]["group"] == gvr.0 && o["spec"]["names"]["plural"] == gvr.2
    });
    let Some((_, crd)) = crd else {
        let mut cols: Vec<Column> = builtin(&gvr.2).iter().map(Column::of).collect();
        cols.push(age);
        cols.extend(builtin_wide(&gvr.2).iter().map(Column::of));
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
                Column {
                    name: s("name"),
                    kind: s("type"),
                    path: s("jsonPath"),
                    priority: c["priority"].as_u64().unwrap_or(0),
                }
            })
            .collect(),
        None => vec![age],
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

/// A pod's containers: (ready, all) and restarts, as `kubectl get pods`.
fn containers(obj: &Value) -> (usize, usize, u64) {
    let all = obj["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = obj["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let restarts = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_u64())
        .sum();
    (ready, all, restarts)
}

fn cell(obj: &Value, col: &Column) -> Value {
    match col.path.as_str() {
        READY => {
            let (ready, all, _) = containers(obj);
            return json!(format!("{ready}/{all}"));
        }
        RESTARTS => return json!(containers(obj).2.to_string()),
        _ => {}
    }
    let v = obj
        .pointer(&col.path.replace('.', "/"))
        .cloned()
        .unwrap_or(Value::Null);
    match (col.kind.as_str(), &v) {
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
    defs.extend(cols.iter().map(|c| {
        let kind = if c.kind == "date" { "string" } else { c.kind.as_str() };
        json!({"name": c.name, "type": kind, "format": "", "description": "", "priority": c.priority})
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
