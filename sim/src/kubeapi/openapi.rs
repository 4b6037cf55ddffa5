//! OpenAPI v3, as far as clients use it to decide how to talk: an index of
//! group/versions and, per group/version, each kind's object path with the
//! query parameters it takes (so `kubectl` sends `fieldValidation` and
//! leaves validation to the server) and the patch types it accepts, and
//! the schemas of custom resources from their CRDs (`kubectl explain`). No
//! schemas for built-in kinds: `kubectl apply` then computes strategic
//! merge patches from its built-in types. `/openapi/v2` is not served
//! (clients fall back from it).

use serde_json::{Map, Value, json};

use super::discovery::Resource;
use super::status;
use super::store::State;

/// The query parameters of writes a real server accepts.
const PARAMS: &[&str] = &[
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "pretty",
];

fn gv_path(r: &Resource) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

pub(crate) fn answer(path: &str, st: &State) -> (u16, Value) {
    let all = st.resources();
    let missing = || {
        status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
        )
    };
    let Some(rest) = path.strip_prefix("/openapi/v3") else {
        return missing();
    };
    let rest = rest.trim_matches('/');
    if rest.is_empty() {
        let mut paths = Map::new();
        for r in &all {
            let gv = gv_path(r);
            paths.insert(
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", st.revision)}),
            );
        }
        return (200, json!({"paths": paths}));
    }
    let mut paths = Map::new();
    for r in all.iter().filter(|r| gv_path(r) == rest) {
        let scope = if r.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        paths.insert(
            format!("/{}/{scope}{}/{{name}}", gv_path(r), r.plural),
            item(r),
        );
    }
    if paths.is_empty() {
        return missing();
    }
    (
        200,
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": crd_schemas(st, &all, rest)}}),
    )
}

/// The schemas of the custom resources served in `gv`, each named and
/// tagged with its kind as kube-apiserver publishes them, so `kubectl
/// explain` finds them (built-in kinds are published without schemas).
fn crd_schemas(st: &State, all: &[Resource], gv: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for r in all.iter().filter(|r| gv_path(r) == gv && !r.builtin()) {
        let gvr = (r.group.clone(), r.version.clone(), r.plural.clone());
        let Some(mut schema) = super::schema::of(st, &gvr) else {
            continue;
        };
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        let group: Vec<&str> = r.group.split('.').rev().collect();
        out.insert(
            format!("{}.{}.{}", group.join("."), r.version, r.kind),
            schema,
        );
    }
    out
}

fn item(r: &Resource) -> Value {
    let params: Vec<Value> = PARAMS
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    let body = |t: &str| (t.to_string(), json!({"schema": {"type": "object"}}));
    let content: Map<String, Value> = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ]
    .iter()
    .map(|t| body(t))
    .collect();
    json!({
        "patch": {
            "parameters": params,
            "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "x-kubernetes-action": "patch",
            "requestBody": {"content": content},
            "responses": {"200": {"description": "OK"}},
        },
    })
}
