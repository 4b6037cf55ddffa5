//! `custom.metrics.k8s.io` `v1beta2` (what the HPA prefers) and `v1beta1`:
//! per-pod (`pods/*` with the scale target's pod selector, or one pod) and
//! per-object (`services/gateway`, the namespace itself) values. Parsing and
//! rendering only; values come from the [`Provider`].

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use super::{quantity, status};
use crate::auth::Attributes;
use crate::objects::ObjectKind;
use crate::provider::{ObjectReading, ObjectRequest, Provider, Target};
use crate::selector;

pub const GROUP: &str = "custom.metrics.k8s.io";
/// Served versions, preferred first.
pub const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// A request under `/apis/custom.metrics.k8s.io`.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Group,
    Version(&'static str),
    Value {
        version: &'static str,
        namespace: &'a str,
        kind: ObjectKind,
        /// `*` for a pod selector.
        name: &'a str,
        metric: &'a str,
    },
    NotFound,
}

/// `rest` is the path after `/apis/custom.metrics.k8s.io`.
pub fn route(rest: &str) -> Route<'_> {
    let parts: Vec<&str> = rest.split('/').skip(1).collect();
    let Some(version) = parts
        .first()
        .and_then(|v| VERSIONS.into_iter().find(|k| k == v))
    else {
        return if rest.is_empty() {
            Route::Group
        } else {
            Route::NotFound
        };
    };
    match parts[1..] {
        [] => Route::Version(version),
        ["namespaces", ns, "metrics", metric] if !ns.is_empty() && !metric.is_empty() => {
            Route::Value {
                version,
                namespace: ns,
                kind: ObjectKind::Namespaces,
                name: ns,
                metric,
            }
        }
        ["namespaces", ns, resource, name, metric]
            if !ns.is_empty() && !name.is_empty() && !metric.is_empty() =>
        {
            match ObjectKind::from_resource(resource).filter(|k| k.namespaced()) {
                Some(kind) => Route::Value {
                    version,
                    namespace: ns,
                    kind,
                    name: if name == "%2A" { "*" } else { name },
                    metric,
                },
                None => Route::NotFound,
            }
        }
        _ => Route::NotFound,
    }
}

/// What SubjectAccessReview is asked, as Kubernetes' request-info resolver
/// names a custom metric: resource `<kind>/<metric>`, `list` for `*`.
pub fn attributes(r: &Route<'_>) -> Option<Attributes> {
    let Route::Value {
        version,
        namespace,
        kind,
        name,
        metric,
    } = r
    else {
        return None;
    };
    let list = *name == "*";
    Some(Attributes::Resource {
        group: GROUP,
        version,
        namespace: namespace.to_string(),
        resource: format!("{}/{}", kind.resource(), metric.to_ascii_lowercase()),
        name: if list {
            String::new()
        } else {
            name.to_string()
        },
        verb: if list { "list" } else { "get" }.into(),
    })
}

fn group_version(version: &str) -> String {
    format!("{GROUP}/{version}")
}

/// The group entry of `/apis` and `/apis/custom.metrics.k8s.io`.
pub fn group() -> Value {
    let versions: Vec<Value> = VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": group_version(v), "version": v}))
        .collect();
    json!({"name": GROUP, "versions": versions, "preferredVersion": versions[0]})
}

fn api_group() -> Value {
    let mut g = group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// One resource per (kind, metric): `pods/vllm_queue_depth`.
fn resource_list(version: &str, served: &[(ObjectKind, String)]) -> Value {
    let resources: Vec<Value> = served
        .iter()
        .map(|(kind, metric)| {
            json!({
                "name": format!("{}/{metric}", kind.resource()),
                "singularName": "",
                "namespaced": kind.namespaced(),
                "kind": "MetricValueList",
                "verbs": ["get"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(version),
        "resources": resources,
    })
}

/// The query parameters the custom metrics client sends.
fn params(query: &str) -> Result<(String, String), String> {
    let get = |name: &str| super::query_param(query, name);
    Ok((get("labelSelector")?, get("metricLabelSelector")?))
}

/// Answer a routed request.
pub async fn handle<P: Provider>(provider: &P, r: Route<'_>, query: &str) -> Response<Full<Bytes>> {
    let (version, namespace, kind, name, metric) = match r {
        Route::Group => return status::json_response(StatusCode::OK, &api_group()),
        Route::Version(v) => {
            return status::json_response(
                StatusCode::OK,
                &resource_list(v, &provider.object_metrics()),
            );
        }
        Route::NotFound => {
            return status::status(
                StatusCode::NOT_FOUND,
                "the server could not find the requested resource",
            );
        }
        Route::Value {
            version,
            namespace,
            kind,
            name,
            metric,
        } => (version, namespace, kind, name, metric),
    };
    let (pod_selector, metric_selector) = match params(query) {
        Ok(p) => p,
        Err(msg) => return status::status(StatusCode::BAD_REQUEST, &msg),
    };
    if let Err(e) = selector::validate_namespace(namespace) {
        return status::status(StatusCode::BAD_REQUEST, &e.to_string());
    }
    let target = if name == "*" {
        Target::Selector(&pod_selector)
    } else {
        Target::Name(name)
    };
    let req = ObjectRequest {
        kind,
        namespace,
        target,
        metric,
        metric_selector: &metric_selector,
    };
    match provider.get_objects(&req).await {
        Ok(reading) => render(version, namespace, kind, &reading),
        Err(e) => status::provider_error(&e),
    }
}

/// A `MetricValueList` in the requested version; a value that is not a
/// finite number is a 503, never a number.
fn render(
    version: &str,
    namespace: &str,
    kind: ObjectKind,
    r: &ObjectReading,
) -> Response<Full<Bytes>> {
    let selector = r.selector.as_deref().map(selector::to_label_selector);
    let mut items = Vec::with_capacity(r.items.len());
    for it in &r.items {
        let value = match quantity::format(it.value) {
            Ok(v) => v,
            Err(e) => {
                let what = format!("metric {} of {} {}", r.metric, kind.kind(), it.name);
                return status::not_a_quantity(&what, &e);
            }
        };
        let object = json!({
            "kind": kind.kind(),
            "namespace": if kind.namespaced() { namespace } else { "" },
            "name": it.name,
            "apiVersion": kind.api_version(),
        });
        let ts = gpuscale_util::rfc3339::format(it.timestamp);
        let mut item = if version == "v1beta1" {
            json!({"describedObject": object, "metricName": r.metric, "timestamp": ts, "window": r.window_secs, "value": value})
        } else {
            json!({"describedObject": object, "metric": {"name": r.metric}, "timestamp": ts, "windowSeconds": r.window_secs, "value": value})
        };
        if let Some(sel) = &selector {
            if version == "v1beta1" {
                item["selector"] = sel.clone();
            } else {
                item["metric"]["selector"] = sel.clone();
            }
        }
        items.push(item);
    }
    status::json_response(
        StatusCode::OK,
        &json!({
            "kind": "MetricValueList",
            "apiVersion": group_version(version),
            "metadata": {},
            "items": items,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route(""), Route::Group);
        assert_eq!(route("/v1beta2"), Route::Version("v1beta2"));
        assert_eq!(route("/v2"), Route::NotFound);
        assert_eq!(
            route("/v1beta1/namespaces/a/pods/*/m"),
            Route::Value {
                version: "v1beta1",
                namespace: "a",
                kind: ObjectKind::Pods,
                name: "*",
                metric: "m"
            }
        );
        assert_eq!(
            route("/v1beta2/namespaces/a/metrics/m"),
            Route::Value {
                version: "v1beta2",
                namespace: "a",
                kind: ObjectKind::Namespaces,
                name: "a",
                metric: "m"
            }
        );
        assert_eq!(route("/v1beta2/namespaces/a/nodes/x/m"), Route::NotFound);
        assert_eq!(route("/v1beta2/namespaces/a/pods/x"), Route::NotFound);
    }

    #[test]
    fn access_review_names_kind_and_metric() {
        let Some(Attributes::Resource {
            resource,
            verb,
            name,
            ..
        }) = attributes(&route("/v1beta2/namespaces/a/pods/*/Queue"))
        else {
            panic!("resource attributes")
        };
        assert_eq!(
            (resource.as_str(), verb.as_str(), name.as_str()),
            ("pods/queue", "list", "")
        );
        let Some(Attributes::Resource { verb, name, .. }) =
            attributes(&route("/v1beta2/namespaces/a/services/gw/q"))
        else {
            panic!("resource attributes")
        };
        assert_eq!((verb.as_str(), name.as_str()), ("get", "gw"));
    }
}
