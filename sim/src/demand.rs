//! The simulated request holder: demand a user raises with kubectl.
//!
//! At zero replicas a route's demand comes from the activator's held
//! requests. In the simulated cluster nothing sends real traffic, so this
//! module plays the activator's metrics side: every Deployment annotated
//! `sim.gpuscale.dev/pending-requests: "<n>"` is served as
//! `gpuscale_activator_pending_requests{namespace, route="<deployment>"} n`
//! on `/metrics`, the series the `activator_pending` preset reads.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::kubeapi::{Gvr, KubeFake, core};

/// The annotation that sets a Deployment's held requests.
pub const ANNOTATION: &str = "sim.gpuscale.dev/pending-requests";

const FAMILY: &str = "gpuscale_activator_pending_requests";

/// Binds `addr` and serves `/metrics` on the runtime; the bound address
/// (port 0 picks a free one).
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(api: Arc<KubeFake>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "demand /metrics: accept failed");
                    continue;
                }
            };
            let api = api.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| respond(api.clone(), req));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "demand /metrics: connection ended");
                }
            });
        }
    });
    Ok(bound)
}

async fn respond(
    api: Arc<KubeFake>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = if req.uri().path() == "/metrics" {
        (StatusCode::OK, render(&api))
    } else {
        (
            StatusCode::NOT_FOUND,
            "not found: only /metrics\n".to_owned(),
        )
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(resp)
}

/// The exposition text: one series per annotated Deployment.
pub fn render(api: &KubeFake) -> String {
    let mut out = format!(
        "# HELP {FAMILY} Requests held now, set by the {ANNOTATION} annotation of a Deployment.\n\
         # TYPE {FAMILY} gauge\n"
    );
    for (ns, name, value) in pending(api) {
        let _ = writeln!(
            out,
            "{FAMILY}{{namespace=\"{}\",route=\"{}\"}} {value}",
            escape(&ns),
            escape(&name)
        );
    }
    out
}

/// `(namespace, deployment, pending)` for every Deployment with a valid
/// annotation; an invalid one is logged, never served as a number.
fn pending(api: &KubeFake) -> Vec<(String, String, f64)> {
    let deployments: Gvr = ("apps".into(), "v1".into(), "deployments".into());
    let mut out = Vec::new();
    for ns in api.list(&core("namespaces"), "") {
        let Some(ns) = ns["metadata"]["name"].as_str() else {
            continue;
        };
        for d in api.list(&deployments, ns) {
            let name = d["metadata"]["name"].as_str().unwrap_or_default();
            match parse(&d) {
                Some(Ok(v)) => out.push((ns.to_owned(), name.to_owned(), v)),
                Some(Err(raw)) => tracing::warn!(
                    namespace = ns,
                    deployment = name,
                    value = raw,
                    "{ANNOTATION} is not a non-negative number; no series served"
                ),
                None => {}
            }
        }
    }
    out
}

/// The annotation's value: `None` when absent, `Err(raw)` when it is not a
/// finite non-negative number.
fn parse(deployment: &Value) -> Option<Result<f64, String>> {
    let raw = deployment["metadata"]["annotations"][ANNOTATION].as_str()?;
    Some(match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(raw.to_owned()),
    })
}

/// Label-value escaping of the text exposition format.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(annotation: Option<&str>) -> Value {
        let mut d = json!({"metadata": {"name": "vllm", "namespace": "default"}});
        if let Some(a) = annotation {
            d["metadata"]["annotations"] = json!({ ANNOTATION: a });
        }
        d
    }

    #[test]
    fn annotation_values() {
        assert_eq!(parse(&deployment(None)), None);
        assert_eq!(parse(&deployment(Some("3"))), Some(Ok(3.0)));
        assert_eq!(parse(&deployment(Some(" 0 "))), Some(Ok(0.0)));
        for bad in ["-1", "lots", "NaN", "inf", ""] {
            assert_eq!(
                parse(&deployment(Some(bad))),
                Some(Err(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn renders_annotated_deployments() {
        let api = KubeFake::start(crate::kubeapi::Cluster::default());
        let gvr: Gvr = ("apps".into(), "v1".into(), "deployments".into());
        api.put(&gvr, deployment(Some("3")));
        let mut other = deployment(None);
        other["metadata"]["name"] = json!("idle");
        api.put(&gvr, other);
        let text = render(&api);
        assert!(
            text.contains(
                "gpuscale_activator_pending_requests{namespace=\"default\",route=\"vllm\"} 3\n"
            ),
            "{text}"
        );
        assert!(!text.contains("idle"), "{text}");
    }
}
