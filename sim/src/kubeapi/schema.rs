//! Custom resources checked against their CRD's structural schema, as
//! kube-apiserver checks them: fields the schema does not know are pruned,
//! or with `fieldValidation=Strict` (kubectl's default) refused with `400
//! BadRequest` naming each (`strict decoding error: unknown field
//! "spec.idel"`); a value of the wrong type, outside its `enum`, below its
//! `minimum` or above its `maximum`, or a `required` field missing is `422
//! Invalid` with one cause per field. `anyOf` branches are checked as value
//! validations. With `fieldValidation=Warn` unknown fields are pruned and
//! each named in a `Warning` header, as a real server does. Not evaluated
//! (a difference from a real server, listed in docs/architecture.md):
//! `x-kubernetes-validations` (CEL rules: a write the schema admits is
//! answered with a `Warning` naming each rule it did not evaluate),
//! `format`, `pattern`, lengths and item counts.

use serde_json::{Map, Value, json};

use super::Gvr;
use super::discovery::crds;
use super::request::Request;
use super::store::State;

/// What a write to a custom resource left after the schema: the problems
/// found, unknown fields first.
#[derive(Default)]
struct Found {
    unknown: Vec<String>,
    invalid: Vec<(String, String)>,
}

/// The `openAPIV3Schema` of the CRD that serves `gvr`, if a CRD does.
pub(super) fn of(st: &State, gvr: &Gvr) -> Option<Value> {
    let crd = crds();
    st.objects
        .iter()
        .filter(|((g, _, _), _)| *g == crd)
        .map(|(_, o)| o)
        .find(|o| {
            o["spec"]["group"] == gvr.0.as_str() && o["spec"]["names"]["plural"] == gvr.2.as_str()
        })
        .and_then(|o| {
            o["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|v| v["name"] == gvr.1.as_str())
                .map(|v| v["schema"]["openAPIV3Schema"].clone())
        })
        .filter(Value::is_object)
}

/// Checks `obj` for a write to `gvr`: pruned in place, or the answer that
/// refuses it. Objects of built-in kinds and of CRDs without a schema pass.
pub(crate) fn admit(
    req: &Request,
    st: &State,
    gvr: &Gvr,
    obj: &mut Value,
) -> Result<(), (u16, Value)> {
    let Some(schema) = of(st, gvr) else {
        return Ok(());
    };
    let mut found = Found::default();
    // apiVersion, kind and metadata are the server's, never pruned.
    if let Some(fields) = obj.as_object_mut() {
        for (key, value) in fields.iter_mut() {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match schema["properties"].get(key) {
                Some(s) => walk(s, value, key, &mut found),
                None if preserves(&schema) => {}
                None => found.unknown.push(key.clone()),
            }
        }
        let top: Vec<String> = found
            .unknown
            .iter()
            .filter(|u| !u.contains('.'))
            .cloned()
            .collect();
        fields.retain(|k, _| !top.contains(k));
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let strict = req.param("fieldValidation").as_deref() == Some("Strict");
    if strict && !found.unknown.is_empty() {
        let kind = obj["kind"].as_str().unwrap_or("").to_string();
        let fields: Vec<String> = found
            .unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect();
        let msg = format!(
            "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
            gvr.1,
            fields.join(", ")
        );
        return Err(super::status(400, "BadRequest", &msg));
    }
    if found.invalid.is_empty() {
        if req.param("fieldValidation").as_deref() == Some("Warn") {
            for f in &found.unknown {
                req.warn(format!("unknown field {f:?}"));
            }
        }
        for (path, rule) in cel_rules(&schema, "") {
            req.warn(format!(
                "the simulated cluster did not evaluate the CEL rule of {path} (x-kubernetes-validations): {rule}"
            ));
        }
        return Ok(());
    }
    let kind = obj["kind"].as_str().unwrap_or(&gvr.2).to_string();
    Err(invalid(gvr, &kind, &name, &found.invalid))
}

/// The 422 a real server gives: the message lists every cause.
fn invalid(gvr: &Gvr, kind: &str, name: &str, causes: &[(String, String)]) -> (u16, Value) {
    let list: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    let message = if list.len() == 1 {
        format!("{kind}.{} {name:?} is invalid: {}", gvr.0, list[0])
    } else {
        format!(
            "{kind}.{} {name:?} is invalid: [{}]",
            gvr.0,
            list.join(", ")
        )
    };
    let (code, mut body) = super::status(422, "Invalid", &message);
    body["details"] = json!({
        "name": name, "group": gvr.0, "kind": kind,
        "causes": causes.iter().map(|(f, m)| json!({
            "reason": if m.starts_with("Required") { "FieldValueRequired" } else { "FieldValueInvalid" },
            "message": m, "field": f})).collect::<Vec<_>>(),
    });
    (code, body)
}

/// Every `x-kubernetes-validations` rule of `schema`, with the path of the
/// field it is on (`spec.idle`, `spec.targets[*]`; `<root>` for the object).
fn cel_rules(schema: &Value, path: &str) -> Vec<(String, String)> {
    let here = if path.is_empty() { "<root>" } else { path };
    let mut rules: Vec<(String, String)> = schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["rule"].as_str())
        .map(|r| (here.to_owned(), r.to_owned()))
        .collect();
    let join = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    for (name, s) in schema["properties"].as_object().into_iter().flatten() {
        rules.extend(cel_rules(s, &join(name)));
    }
    for key in ["items", "additionalProperties"] {
        if schema[key].is_object() {
            rules.extend(cel_rules(&schema[key], &format!("{here}[*]")));
        }
    }
    rules
}

fn preserves(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
}

/// `value` at `path` against `schema`: problems into `found`, unknown
/// fields pruned from `value`.
fn walk(schema: &Value, value: &mut Value, path: &str, found: &mut Found) {
    if value.is_null() {
        if schema["nullable"] != true {
            found.invalid.push((
                path.into(),
                "Invalid value: \"null\": field is not nullable".into(),
            ));
        }
        return;
    }
    if let Some(why) = wrong_type(schema, value, path) {
        found.invalid.push((path.into(), why));
        return;
    }
    values(schema, value, path, found);
    if let Some(branches) = schema["anyOf"].as_array().filter(|b| !b.is_empty()) {
        let fits = branches.iter().any(|b| {
            let mut probe = Found::default();
            values(b, &mut value.clone(), path, &mut probe);
            probe.invalid.is_empty()
        });
        if !fits {
            let why = "Invalid value: it matches none of the schema's anyOf".to_string();
            found.invalid.push((path.into(), why));
        }
    }
    match value {
        Value::Object(fields) => object(schema, fields, path, found),
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(&schema["items"], item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

fn object(schema: &Value, fields: &mut Map<String, Value>, path: &str, found: &mut Found) {
    let mut gone = Vec::new();
    for (key, v) in fields.iter_mut() {
        let at = format!("{path}.{key}");
        match schema["properties"].get(key) {
            Some(s) => walk(s, v, &at, found),
            None => match &schema["additionalProperties"] {
                Value::Object(_) => walk(&schema["additionalProperties"], v, &at, found),
                Value::Bool(true) => {}
                _ if preserves(schema)
                    || schema["properties"].is_null() && schema["type"] != "object" => {}
                _ => {
                    found.unknown.push(at);
                    gone.push(key.clone());
                }
            },
        }
    }
    fields.retain(|k, _| !gone.contains(k));
}

/// `required`, `enum`, `minimum` and `maximum`.
fn values(schema: &Value, value: &mut Value, path: &str, found: &mut Found) {
    for req in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if value.get(req).is_none() {
            found
                .invalid
                .push((format!("{path}.{req}"), "Required value".into()));
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        found.invalid.push((
            path.into(),
            format!(
                "Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
        ));
    }
    if let (Some(min), Some(v)) = (schema["minimum"].as_f64(), value.as_f64())
        && v < min
    {
        found.invalid.push((
            path.into(),
            format!("Invalid value: {v}: {path} in body should be greater than or equal to {min}"),
        ));
    }
    if let (Some(max), Some(v)) = (schema["maximum"].as_f64(), value.as_f64())
        && v > max
    {
        found.invalid.push((
            path.into(),
            format!("Invalid value: {v}: {path} in body should be less than or equal to {max}"),
        ));
    }
}

/// Why `value` is not of the schema's `type`, if it is not.
fn wrong_type(schema: &Value, value: &Value, path: &str) -> Option<String> {
    if schema["x-kubernetes-int-or-string"] == true {
        return (!(value.is_i64() || value.is_u64() || value.is_string()))
            .then(|| format!("Invalid value: {value}: must be an integer or a string"));
    }
    let ok = match schema["type"].as_str()? {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    let t = schema["type"].as_str().unwrap_or("");
    (!ok).then(|| {
        let got = match value {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        };
        format!("Invalid value: \"{got}\": {path} in body must be of type {t}: \"{got}\"")
    })
}
