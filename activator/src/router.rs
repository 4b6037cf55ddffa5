//! Which route a request belongs to: by Host, by path prefix, and by the
//! OpenAI-compatible `model` field of a JSON body (a bounded peek, only when
//! a route that matches the host and path names a model).

use std::sync::Arc;

use crate::route::Route;

pub struct Router {
    /// Most specific first: a route with a host before one without, then
    /// the longer path prefix.
    routes: Vec<Arc<Route>>,
    /// The routes grouped by (host, path prefix), in the same order: a
    /// request's candidates are one group, found without allocating.
    groups: Vec<Vec<Arc<Route>>>,
}

/// Why no route was found.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    NoRoute,
    NoModelRoute(String),
}

impl Router {
    pub fn new(mut routes: Vec<Arc<Route>>) -> Self {
        routes.sort_by_key(|r| {
            (
                r.spec.host.is_none(),
                std::cmp::Reverse(r.spec.path_prefix.len()),
            )
        });
        let mut groups: Vec<Vec<Arc<Route>>> = Vec::new();
        for r in &routes {
            let same = |g: &Vec<Arc<Route>>| {
                g[0].spec.host == r.spec.host && g[0].spec.path_prefix == r.spec.path_prefix
            };
            match groups.iter_mut().find(|g| same(g)) {
                Some(g) => g.push(r.clone()),
                None => groups.push(vec![r.clone()]),
            }
        }
        Self { routes, groups }
    }

    pub fn all(&self) -> &[Arc<Route>] {
        &self.routes
    }

    /// Routes for this host and path, most specific first.
    pub fn candidates(&self, host: Option<&str>, path: &str) -> &[Arc<Route>] {
        let host = host.map(strip_port);
        self.groups
            .iter()
            .find(|g| host_matches(&g[0], host) && prefix_matches(&g[0].spec.path_prefix, path))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether choosing among `candidates` needs the body's `model`.
    pub fn needs_model(candidates: &[Arc<Route>]) -> bool {
        candidates.iter().any(|r| r.spec.model.is_some())
    }

    /// The route for `model` (None: the body had none) among `candidates`.
    pub fn by_model(candidates: &[Arc<Route>], model: Option<&str>) -> Result<Arc<Route>, Miss> {
        let named = model.and_then(|m| {
            candidates
                .iter()
                .find(|r| r.spec.model.as_deref() == Some(m))
        });
        named
            .or_else(|| candidates.iter().find(|r| r.spec.model.is_none()))
            .cloned()
            .ok_or_else(|| match model {
                Some(m) => Miss::NoModelRoute(m.to_string()),
                None => Miss::NoRoute,
            })
    }
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map_or(host, |(h, _)| &h[1..]);
    }
    host.rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(h, _)| h)
}

fn host_matches(r: &Route, host: Option<&str>) -> bool {
    match (&r.spec.host, host) {
        (None, _) => true,
        (Some(want), Some(h)) => want.eq_ignore_ascii_case(h),
        (Some(_), None) => false,
    }
}

/// `/v1` matches `/v1` and `/v1/chat`, not `/v10`.
fn prefix_matches(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'))
}

#[derive(serde::Deserialize)]
struct ModelField {
    model: Option<serde_json::Value>,
}

/// The `model` field of a JSON object body: Ok(None) when absent, Err when
/// the body is not a JSON object or `model` is not a string.
pub fn model_of(body: &[u8]) -> Result<Option<String>, String> {
    let f: ModelField =
        serde_json::from_slice(body).map_err(|e| format!("the body is not a JSON object: {e}"))?;
    match f.model {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err("the body's \"model\" is not a string".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Port, RouteSpec, ServiceRef, TargetRef};
    use crate::metrics::Metrics;

    fn route(name: &str, host: Option<&str>, prefix: &str, model: Option<&str>) -> Arc<Route> {
        let spec = RouteSpec {
            name: name.into(),
            host: host.map(Into::into),
            path_prefix: prefix.into(),
            model: model.map(Into::into),
            service: ServiceRef {
                namespace: "a".into(),
                name: name.into(),
                port: Port::Number(80),
            },
            target: TargetRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: name.into(),
            },
            wake_replicas: 1,
            upstream_protocol: Default::default(),
            upstream_ttfb_timeout: None,
            sleep: None,
        };
        Route::new(spec, Arc::new(Metrics::new().unwrap()))
    }

    fn names(v: &[Arc<Route>]) -> Vec<&str> {
        v.iter().map(|r| r.spec.name.as_str()).collect()
    }

    #[test]
    fn host_then_longest_prefix_then_model() {
        let r = Router::new(vec![
            route("any", None, "/", None),
            route("v1", None, "/v1", None),
            route("chat", Some("chat.example"), "/", Some("m1")),
            route("chat2", Some("chat.example"), "/", Some("m2")),
        ]);
        assert_eq!(names(r.candidates(Some("x:80"), "/v1/chat")), ["v1"]);
        assert_eq!(names(r.candidates(Some("x"), "/v10")), ["any"]);
        let c = r.candidates(Some("CHAT.example:8080"), "/v1/x");
        assert_eq!(names(c), ["chat", "chat2"]);
        assert!(Router::needs_model(c));
        assert_eq!(Router::by_model(c, Some("m2")).unwrap().spec.name, "chat2");
        assert_eq!(
            Router::by_model(c, Some("m3")).err(),
            Some(Miss::NoModelRoute("m3".into()))
        );
    }

    #[test]
    fn model_field() {
        assert_eq!(model_of(br#"{"model":"a","x":[1]}"#), Ok(Some("a".into())));
        assert_eq!(model_of(br#"{"messages":[]}"#), Ok(None));
        assert!(model_of(b"not json").is_err());
        assert!(model_of(br#"{"model":3}"#).is_err());
    }
}
