//! Server-side apply's field ownership, as kube-apiserver keeps it in
//! `metadata.managedFields` (`FieldsV1`): an apply owns the fields it sets,
//! a plain write (update, patch) owns the fields it changes, and an apply
//! that would change a field another manager owns is refused `409
//! Conflict` naming the manager and the field, unless `force=true`, which
//! takes the field over. Maps are followed field by field; a list is one
//! field (a real server tracks the items of a keyed list one by one).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::Gvr;

type Path = Vec<String>;

/// The fields `v` sets: map keys followed down, anything else a leaf; of
/// `metadata`, only labels and annotations.
fn leaves(v: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let top = at.is_empty();
                if top && matches!(k.as_str(), "apiVersion" | "kind" | "status") {
                    continue;
                }
                if top && k == "metadata" {
                    for keep in ["labels", "annotations"] {
                        at.extend(["metadata".to_string(), keep.to_string()]);
                        leaves(&child[keep], at, out);
                        at.truncate(at.len() - 2);
                    }
                    continue;
                }
                at.push(k.clone());
                leaves(child, at, out);
                at.pop();
            }
        }
        Value::Null if at.len() >= 2 && at[0] == "metadata" => {}
        _ => {
            out.insert(at.clone());
        }
    }
}

fn fields_of(v: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    leaves(v, &mut Vec::new(), &mut out);
    out
}

fn at<'a>(v: &'a Value, path: &Path) -> &'a Value {
    path.iter().fold(v, |v, k| &v[k.as_str()])
}

fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut node = &mut root;
        for k in p {
            let entry = node.entry(format!("f:{k}")).or_insert_with(|| json!({}));
            node = entry.as_object_mut().expect("fieldsV1 node is an object");
        }
    }
    Value::Object(root)
}

fn from_fields_v1(v: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(m) = v.as_object() else { return };
    if m.is_empty() && !at.is_empty() {
        out.insert(at.clone());
    }
    for (k, child) in m {
        if let Some(name) = k.strip_prefix("f:") {
            at.push(name.to_string());
            from_fields_v1(child, at, out);
            at.pop();
        }
    }
}

/// Each manager's fields: (manager, operation, apiVersion, fields).
fn entries(obj: &Value) -> Vec<(String, String, Value, BTreeSet<Path>)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let mut fields = BTreeSet::new();
            from_fields_v1(&e["fieldsV1"], &mut Vec::new(), &mut fields);
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
                e["apiVersion"].clone(),
                fields,
            )
        })
        .collect()
}

fn store(obj: &mut Value, list: Vec<(String, String, Value, BTreeSet<Path>)>) {
    let now = super::store::now();
    let out: Vec<Value> = list
        .into_iter()
        .filter(|(_, op, _, f)| !f.is_empty() || op == "Apply")
        .map(|(manager, operation, api_version, fields)| {
            json!({"manager": manager, "operation": operation, "apiVersion": api_version,
                "time": now, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&fields)})
        })
        .collect();
    obj["metadata"]["managedFields"] = json!(out);
}

fn dotted(p: &Path) -> String {
    p.iter().map(|k| format!(".{k}")).collect()
}

/// The 409 of an apply by `manager` of `applied` onto `current` that
/// changes fields other managers own; `None` when there is no conflict.
pub(crate) fn conflicts(
    gvr: &Gvr,
    current: &Value,
    applied: &Value,
    manager: &str,
) -> Option<(u16, Value)> {
    let mut found: Vec<(String, Value, Path)> = Vec::new();
    for field in fields_of(applied) {
        if at(current, &field) == at(applied, &field) || at(current, &field).is_null() {
            continue;
        }
        for (other, _, api_version, owned) in entries(current) {
            if other != manager && owned.contains(&field) {
                found.push((other, api_version, field.clone()));
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    let using =
        |m: &str, v: &Value| format!("conflict with {m:?} using {}", v.as_str().unwrap_or(""));
    let lines: Vec<String> = found
        .iter()
        .map(|(m, v, p)| format!("{}: {}", using(m, v), dotted(p)))
        .collect();
    let n = found.len();
    let message = format!(
        "Apply failed with {n} conflict{}: {}",
        if n == 1 { "" } else { "s" },
        lines.join("\n")
    );
    let (code, mut body) = super::status(409, "Conflict", &message);
    body["details"] = json!({
        "name": current["metadata"]["name"], "group": gvr.0, "kind": gvr.2,
        "causes": found.iter().map(|(m, v, p)| json!({"reason": "FieldManagerConflict",
            "message": using(m, v), "field": dotted(p)})).collect::<Vec<_>>(),
    });
    Some((code, body))
}

/// After an apply by `manager`: it owns what it applied, and no one else
/// owns what it changed.
pub(crate) fn applied(
    old: &Value,
    new: &mut Value,
    applied: &Value,
    manager: &str,
    api_version: &Value,
) {
    let mine = fields_of(applied);
    let changed: BTreeSet<Path> = mine
        .iter()
        .filter(|p| at(old, p) != at(new, p))
        .cloned()
        .collect();
    let mut list = entries(old);
    list.retain(|(m, op, _, _)| !(m == manager && op == "Apply"));
    for entry in &mut list {
        entry.3.retain(|p| !changed.contains(p));
    }
    list.push((
        manager.to_string(),
        "Apply".into(),
        api_version.clone(),
        mine,
    ));
    store(new, list);
}

/// After a plain write by `manager`: it owns the fields it changed, taken
/// from whoever owned them.
pub(crate) fn updated(old: &Value, new: &mut Value, manager: &str) {
    let mut all = fields_of(old);
    all.extend(fields_of(new));
    let changed: BTreeSet<Path> = all
        .into_iter()
        .filter(|p| at(old, p) != at(new, p))
        .collect();
    let mut list = entries(old);
    // Objects no one applied keep no field sets (only apply needs them).
    if list.is_empty() {
        return;
    }
    for entry in &mut list {
        entry.3.retain(|p| !changed.contains(p));
    }
    let api_version = new["apiVersion"].clone();
    match list
        .iter_mut()
        .find(|(m, op, _, _)| m == manager && op == "Update")
    {
        Some(entry) => entry.3.extend(changed),
        None => list.push((manager.to_string(), "Update".into(), api_version, changed)),
    }
    store(new, list);
}
