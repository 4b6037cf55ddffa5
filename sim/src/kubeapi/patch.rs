//! The patch types: JSON merge (RFC 7386), strategic merge (lists merged by
//! their key for the built-in kinds' fields that have one, and the `$patch`,
//! `$setElementOrder`, `$deleteFromPrimitiveList`, `$retainKeys` directives
//! kubectl sends) and JSON patch (RFC 6902).

use serde_json::{Map, Value, json};

/// RFC 7386: null deletes, objects merge, anything else replaces.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
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
            merge(&mut target[k.as_str()], v);
        }
    }
}

/// The merge key of a built-in list field, by the field's name; lists
/// without one are replaced whole, as their schemas say.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let has = |k: &str| items.iter().all(|i| i.get(k).is_some());
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "volumeClaimTemplates" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" if has("port") => Some("port"),
        _ => None,
    }
}

/// Primitive lists that strategic merge unions instead of replacing.
fn merges_primitives(field: &str) -> bool {
    field == "finalizers"
}

/// A strategic merge patch onto a built-in kind's object.
pub(crate) fn strategic(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if fields.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut fresh = fields.clone();
        fresh.remove("$patch");
        *target = Value::Object(fresh);
        return Ok(());
    }
    if !target.is_object() {
        *target = json!({});
    }
    let Some(map) = target.as_object_mut() else {
        return Ok(());
    };
    for (k, v) in fields {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let gone = v.as_array().cloned().unwrap_or_default();
            if let Some(list) = map.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|x| !gone.contains(x));
            }
        } else if k == "$retainKeys" {
            let keep: Vec<&str> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            map.retain(|key, _| keep.contains(&key.as_str()) || fields.contains_key(key));
        } else if k.starts_with('$') {
            // `$setElementOrder/…`, `$patch: merge`: order and defaults.
        } else if v.is_null() {
            map.remove(k);
        } else {
            field(map, k, v)?;
        }
    }
    Ok(())
}

fn field(map: &mut Map<String, Value>, k: &str, v: &Value) -> Result<(), String> {
    let cur = map.entry(k.to_string()).or_insert(Value::Null);
    match (cur, v) {
        (Value::Array(cur), Value::Array(items)) => list(k, cur, items),
        (cur, Value::Array(items)) => {
            let mut fresh = Vec::new();
            list(k, &mut fresh, items)?;
            *cur = Value::Array(fresh);
            Ok(())
        }
        (cur, v) => strategic(cur, v),
    }
}

fn list(field: &str, cur: &mut Vec<Value>, items: &[Value]) -> Result<(), String> {
    if merges_primitives(field) {
        for i in items {
            if !cur.contains(i) {
                cur.push(i.clone());
            }
        }
        return Ok(());
    }
    let Some(key) = merge_key(field, items) else {
        if items.iter().any(|i| i.get("$patch").is_some()) {
            return Err(format!(
                "$patch directive in list {field:?} without a merge key"
            ));
        }
        *cur = items.to_vec();
        return Ok(());
    };
    for item in items {
        let id = &item[key];
        let directive = item.get("$patch").and_then(Value::as_str);
        let at = cur.iter().position(|c| c[key] == *id);
        match (directive, at) {
            (Some("delete"), Some(i)) => {
                cur.remove(i);
            }
            (Some("delete"), None) => {}
            (Some("replace"), at) => {
                let mut fresh = item.clone();
                if let Some(m) = fresh.as_object_mut() {
                    m.remove("$patch");
                }
                match at {
                    Some(i) => cur[i] = fresh,
                    None => cur.push(fresh),
                }
            }
            (_, Some(i)) => strategic(&mut cur[i], item)?,
            (_, None) => {
                let mut fresh = json!({});
                strategic(&mut fresh, item)?;
                cur.push(fresh);
            }
        }
    }
    Ok(())
}

/// RFC 6902: add, remove, replace, move, copy, test, in order; any failed
/// operation fails the whole patch.
pub(crate) fn json_patch(target: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch must be a list of operations")?;
    for (i, op) in ops.iter().enumerate() {
        apply_op(target, op).map_err(|e| format!("JSON patch operation {i}: {e}"))?;
    }
    Ok(())
}

fn apply_op(target: &mut Value, op: &Value) -> Result<(), String> {
    let path = op["path"].as_str().ok_or("missing \"path\"")?;
    let value = || op.get("value").cloned().ok_or("missing \"value\"");
    let from = || op["from"].as_str().ok_or("missing \"from\"");
    match op["op"].as_str().ok_or("missing \"op\"")? {
        "add" => add(target, path, value()?),
        "remove" => remove(target, path).map(drop),
        "replace" => {
            remove(target, path)?;
            add(target, path, value()?)
        }
        "move" => {
            let v = remove(target, from()?)?;
            add(target, path, v)
        }
        "copy" => {
            let v = target
                .pointer(from()?)
                .cloned()
                .ok_or("\"from\" does not exist")?;
            add(target, path, v)
        }
        "test" => test(target, path, &value()?),
        other => Err(format!("unknown op {other:?}")),
    }
}

/// As on a real server (evanphx/json-patch), a key missing from an object
/// that exists reads as null: `kube::runtime::finalizer` tests
/// `/metadata/finalizers` against null before adding the first one.
fn test(target: &Value, path: &str, want: &Value) -> Result<(), String> {
    let found = match target.pointer(path) {
        Some(v) => v,
        None => match target.pointer(split(path)?.0) {
            Some(Value::Object(_)) => &Value::Null,
            _ => return Err(format!("path {path:?} does not exist")),
        },
    };
    if found == want {
        Ok(())
    } else {
        Err(format!("test failed at {path:?}"))
    }
}

/// The parent of a pointer and its last token, unescaped.
fn split(path: &str) -> Result<(&str, String), String> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid path {path:?}"))?;
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn add(target: &mut Value, path: &str, v: Value) -> Result<(), String> {
    if path.is_empty() {
        *target = v;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.insert(last, v);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse()
                    .map_err(|_| format!("invalid index in {path:?}"))?
            };
            if i > a.len() {
                return Err(format!("index out of range in {path:?}"));
            }
            a.insert(i, v);
            Ok(())
        }
        _ => Err(format!("path {path:?} does not exist")),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split(path)?;
    let gone = match target.pointer_mut(parent) {
        Some(Value::Object(m)) => m.remove(&last),
        Some(Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Some(a.remove(i)),
            _ => None,
        },
        _ => None,
    };
    gone.ok_or_else(|| format!("path {path:?} does not exist"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merges_containers_by_name_and_honours_directives() {
        let mut d = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}],
            "tolerations": [{"key": "t"}]},
            "metadata": {"finalizers": ["f1"]}});
        strategic(
            &mut d,
            &json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"},
            {"name": "c", "image": "c:1"}],
            "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}],
            "tolerations": [{"key": "u"}]},
            "metadata": {"finalizers": ["f2"], "$deleteFromPrimitiveList/finalizers": ["f1"]}}),
        )
        .expect("patch");
        assert_eq!(
            d["spec"]["containers"],
            json!([{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}])
        );
        assert_eq!(d["spec"]["tolerations"], json!([{"key": "u"}]));
        assert_eq!(d["metadata"]["finalizers"], json!(["f2"]));
    }

    #[test]
    fn json_patch_applies_in_order_and_fails_whole() {
        let mut v = json!({"a": [1, 2], "b": {"c": 1}});
        json_patch(
            &mut v,
            &json!([{"op": "add", "path": "/a/-", "value": 3},
                {"op": "replace", "path": "/b/c", "value": 2},
                {"op": "move", "from": "/b/c", "path": "/d"},
                {"op": "test", "path": "/d", "value": 2}]),
        )
        .expect("patch");
        assert_eq!(v, json!({"a": [1, 2, 3], "b": {}, "d": 2}));
        let err = json_patch(&mut v, &json!([{"op": "remove", "path": "/nope"}]));
        assert_eq!(
            err,
            Err("JSON patch operation 0: path \"/nope\" does not exist".into())
        );
    }

    #[test]
    fn json_patch_test_reads_a_missing_key_as_null() {
        let mut v = json!({"metadata": {"name": "p"}});
        let first_finalizer = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]);
        json_patch(&mut v, &first_finalizer).expect("missing key tests as null");
        assert_eq!(v["metadata"]["finalizers"], json!(["f"]));
        // Now present: the same test fails, so a racing second adder loses.
        let err = json_patch(&mut v.clone(), &first_finalizer);
        assert_eq!(
            err,
            Err("JSON patch operation 0: test failed at \"/metadata/finalizers\"".into())
        );
        let missing = json!([{"op": "test", "path": "/metadata/x", "value": 1}]);
        assert!(
            json_patch(&mut v, &missing).is_err(),
            "only null matches a missing key"
        );
        let no_parent = json!([{"op": "test", "path": "/spec/x", "value": null}]);
        assert_eq!(
            json_patch(&mut v, &no_parent),
            Err("JSON patch operation 0: path \"/spec/x\" does not exist".into())
        );
    }
}
