//! The `external.metrics.k8s.io/v1beta1` API (and, in [`custom`],
//! `custom.metrics.k8s.io`) as kube-apiserver and the HPA use them. It asks
//! a [`Provider`] for values and renders what comes back or a `Status`; it
//! knows nothing of Prometheus.

pub mod custom;
pub mod discovery;
pub use gpuscale_signals::quantity;
pub mod status;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode, Uri};
use http_body_util::Full;
use rustls_pki_types::CertificateDer;
use serde_json::json;

use crate::auth::{Attributes, AuthError, Authenticator, Authorizer};
use crate::provider::{Provider, Reading};
use crate::selfmetrics::SelfMetrics;

pub const GROUP: &str = "external.metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "external.metrics.k8s.io/v1beta1";

/// Authentication and authorization; absent only in `--dev`.
pub struct Security {
    pub authn: Authenticator,
    pub authz: Authorizer,
}

/// The API handler, shared by all connections.
pub struct Api<P> {
    provider: P,
    security: Option<Security>,
    metrics: Arc<SelfMetrics>,
}

enum Route<'a> {
    Health,
    Apis,
    Group,
    Version,
    Value { namespace: &'a str, metric: &'a str },
    Custom(custom::Route<'a>),
    NotFound,
}

fn route(path: &str) -> Route<'_> {
    let path = path.trim_end_matches('/');
    match path {
        "/healthz" | "/livez" | "/readyz" => return Route::Health,
        "/apis" => return Route::Apis,
        "/apis/external.metrics.k8s.io" => return Route::Group,
        "/apis/external.metrics.k8s.io/v1beta1" => return Route::Version,
        _ => {}
    }
    if let Some(rest) = path.strip_prefix("/apis/custom.metrics.k8s.io")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return Route::Custom(custom::route(rest));
    }
    let Some(rest) = path.strip_prefix("/apis/external.metrics.k8s.io/v1beta1/namespaces/") else {
        return Route::NotFound;
    };
    match rest.split('/').collect::<Vec<_>>()[..] {
        [namespace, metric] if !namespace.is_empty() && !metric.is_empty() => {
            Route::Value { namespace, metric }
        }
        _ => Route::NotFound,
    }
}

impl<P: Provider> Api<P> {
    pub fn new(provider: P, security: Option<Security>, metrics: Arc<SelfMetrics>) -> Self {
        Self {
            provider,
            security,
            metrics,
        }
    }

    /// Answer one request. `certs` is the connection's client certificate
    /// chain (end entity first; empty when none was sent).
    pub async fn handle(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        certs: &[CertificateDer<'static>],
    ) -> Response<Full<Bytes>> {
        let r = route(uri.path());
        let (api, label) = match &r {
            Route::Value { metric, .. } => (
                "external",
                self.provider.canonical_name(metric).unwrap_or_default(),
            ),
            Route::Custom(custom::Route::Value { metric, .. }) => (
                "custom",
                self.provider.canonical_name(metric).unwrap_or_default(),
            ),
            Route::Custom(_) => ("custom", String::new()),
            _ => ("external", String::new()),
        };
        let health = matches!(r, Route::Health);
        let timer = self.metrics.request_timer(api, label);
        let resp = self.dispatch(method, uri, headers, certs, r).await;
        if !health {
            timer.done(resp.status());
        }
        resp
    }

    async fn dispatch(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        certs: &[CertificateDer<'static>],
        r: Route<'_>,
    ) -> Response<Full<Bytes>> {
        if matches!(r, Route::Health) {
            return status::text(StatusCode::OK, "ok");
        }
        if let Some(sec) = &self.security
            && let Err(e) = check_access(sec, certs, headers, &attributes(&r, uri)).await
        {
            tracing::debug!(path = uri.path(), error = %e, "request refused");
            return refused(&e);
        }
        if method != Method::GET && method != Method::HEAD {
            return status::status(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!(
                    "the server does not allow this method on the requested resource: {method}"
                ),
            );
        }
        match r {
            Route::Health => status::text(StatusCode::OK, "ok"),
            Route::Apis => status::json_response(StatusCode::OK, &discovery::group_list()),
            Route::Group => status::json_response(StatusCode::OK, &discovery::api_group()),
            Route::Version => status::json_response(
                StatusCode::OK,
                &discovery::resource_list(&self.provider.metric_names()),
            ),
            Route::Value { namespace, metric } => self.value(namespace, metric, uri).await,
            Route::Custom(c) => custom::handle(&self.provider, c, uri.query().unwrap_or("")).await,
            Route::NotFound => status::status(
                StatusCode::NOT_FOUND,
                &format!(
                    "the server could not find the requested resource {}",
                    crate::limits::excerpt(uri.path())
                ),
            ),
        }
    }

    /// One external metric's value for the request's selector.
    async fn value(&self, namespace: &str, metric: &str, uri: &Uri) -> Response<Full<Bytes>> {
        let selector = match label_selector(uri.query().unwrap_or("")) {
            Ok(s) => s,
            Err(msg) => return status::status(StatusCode::BAD_REQUEST, &msg),
        };
        match self.provider.get(metric, namespace, &selector).await {
            Ok(reading) => render(&reading),
            Err(e) => status::provider_error(&e),
        }
    }
}

/// What the SubjectAccessReview asks about a request: `list` on the metric
/// for an external value (as Kubernetes' request-info resolver names that
/// path, and what the HPA's role grants), the custom API's own attributes,
/// and a non-resource `get` for discovery and anything else.
fn attributes(r: &Route<'_>, uri: &Uri) -> Attributes {
    let discovery = || Attributes::NonResource {
        path: uri.path().to_string(),
        verb: "get".into(),
    };
    match r {
        Route::Value { namespace, metric } => Attributes::Resource {
            group: GROUP,
            version: VERSION,
            namespace: namespace.to_string(),
            resource: metric.to_ascii_lowercase(),
            name: String::new(),
            verb: "list".into(),
        },
        Route::Custom(c) => custom::attributes(c).unwrap_or_else(discovery),
        _ => discovery(),
    }
}

/// Who is asking, and may they.
async fn check_access(
    sec: &Security,
    certs: &[CertificateDer<'static>],
    headers: &HeaderMap,
    attrs: &Attributes,
) -> Result<(), AuthError> {
    let user = sec.authn.authenticate(certs, headers).await?;
    sec.authz.authorize(&user, attrs).await
}

/// The `Status` of a refused request (a 401 says no more than Kubernetes').
fn refused(e: &AuthError) -> Response<Full<Bytes>> {
    let code = match e {
        AuthError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
        AuthError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let msg = match e {
        AuthError::Unauthorized(_) => "Unauthorized".to_string(),
        other => other.to_string(),
    };
    status::status(code, &msg)
}

/// Render an `ExternalMetricValueList`; a value that is not a finite number
/// becomes a 503, never a number.
pub fn render(r: &Reading) -> Response<Full<Bytes>> {
    let mut items = Vec::with_capacity(r.items.len());
    for it in &r.items {
        let value = match quantity::format(it.value) {
            Ok(v) => v,
            Err(e) => return status::not_a_quantity(&format!("metric {}", r.metric), &e),
        };
        items.push(json!({
            "metricName": r.metric,
            "metricLabels": it.labels,
            "timestamp": gpuscale_util::rfc3339::format(it.timestamp),
            "window": r.window_secs,
            "value": value,
        }));
    }
    status::json_response(
        StatusCode::OK,
        &json!({
            "kind": "ExternalMetricValueList",
            "apiVersion": GROUP_VERSION,
            "metadata": {},
            "items": items,
        }),
    )
}

/// The `labelSelector` query parameter, percent-decoded ("" when absent).
pub fn label_selector(query: &str) -> Result<String, String> {
    query_param(query, "labelSelector")
}

/// A query parameter, percent-decoded ("" when absent).
pub fn query_param(query: &str, name: &str) -> Result<String, String> {
    let mut out = String::new();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == name {
            out = gpuscale_util::percent::query(v)
                .map_err(|e| format!("{name} is not valid percent-encoded UTF-8: {e}"))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_parameter_is_decoded() {
        assert_eq!(
            label_selector("labelSelector=app%3Dchat%2Ctier+in+(a)").unwrap(),
            "app=chat,tier in (a)"
        );
        assert_eq!(label_selector("").unwrap(), "");
        assert!(label_selector("labelSelector=%ZZ").is_err());
    }

    #[test]
    fn routes() {
        assert!(matches!(
            route("/apis/external.metrics.k8s.io/v1beta1/namespaces/a/b"),
            Route::Value {
                namespace: "a",
                metric: "b"
            }
        ));
        assert!(matches!(
            route("/apis/external.metrics.k8s.io/v1beta1/namespaces/a"),
            Route::NotFound
        ));
        assert!(matches!(route("/apis/"), Route::Apis));
    }
}
