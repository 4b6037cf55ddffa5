//! The doctor's reads of the cluster: one list or get per kind, each
//! bounded by a timeout. A failed read stays a failure (`Err` with the
//! reason), so the report never turns "could not read" into "absent".

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde::Serialize;

/// What one read gave, or why it failed.
pub type Read<T> = Result<T, String>;

/// A metrics APIService as registered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiServiceInfo {
    pub name: String,
    /// `namespace/name` of the Service it points to; `None` for a local one.
    pub service: Option<String>,
}

/// A Deployment's identity: where, and the names it goes by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentInfo {
    pub namespace: String,
    pub name: String,
    /// `app.kubernetes.io/name` or `app`, when labelled.
    pub app: Option<String>,
}

/// What the API says of a node that matters to the exporter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeInfo {
    pub name: String,
    pub kubelet_version: String,
    pub labels: BTreeMap<String, String>,
}

/// Everything the doctor read.
#[derive(Debug, Clone)]
pub struct Observed {
    pub api_services: Read<Vec<ApiServiceInfo>>,
    pub crds: Read<Vec<String>>,
    pub deployments: Read<Vec<DeploymentInfo>>,
    pub nodes: Read<Vec<NodeInfo>>,
    /// The target namespace's labels; `None` when it does not exist yet.
    pub namespace: Read<Option<BTreeMap<String, String>>>,
}

/// Runs `call` with `timeout`; an API error or the timeout becomes the
/// reason the read failed.
async fn bounded<T>(
    what: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Read<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("reading {what}: {e}")),
        Err(_) => Err(format!("reading {what}: no answer within {timeout:?}")),
    }
}

fn api_services_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

fn api_service(o: &DynamicObject) -> ApiServiceInfo {
    let svc = &o.data["spec"]["service"];
    let service = match (svc["namespace"].as_str(), svc["name"].as_str()) {
        (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
        _ => None,
    };
    ApiServiceInfo {
        name: o.name_any(),
        service,
    }
}

fn deployment(d: &Deployment) -> DeploymentInfo {
    let labels = d.labels();
    DeploymentInfo {
        namespace: d.namespace().unwrap_or_default(),
        name: d.name_any(),
        app: labels
            .get("app.kubernetes.io/name")
            .or_else(|| labels.get("app"))
            .cloned(),
    }
}

fn node(n: &Node) -> NodeInfo {
    let kubelet_version = n
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default();
    NodeInfo {
        name: n.name_any(),
        kubelet_version,
        labels: n.labels().clone(),
    }
}

/// Reads what the doctor judges, at once, each read bounded by `timeout`.
pub async fn observe(client: &Client, namespace: &str, timeout: Duration) -> Observed {
    let lp = ListParams::default();
    let ns_what = format!("Namespace {namespace}");
    let (services, crds, deployments, nodes, namespaces) = (
        api_services_api(client),
        Api::<CustomResourceDefinition>::all(client.clone()),
        Api::<Deployment>::all(client.clone()),
        Api::<Node>::all(client.clone()),
        Api::<Namespace>::all(client.clone()),
    );
    let (api_services, crds, deployments, nodes, ns) = tokio::join!(
        bounded("APIServices", timeout, services.list(&lp)),
        bounded("CustomResourceDefinitions", timeout, crds.list(&lp)),
        bounded("Deployments", timeout, deployments.list(&lp)),
        bounded("Nodes", timeout, nodes.list(&lp)),
        bounded(&ns_what, timeout, namespaces.get_opt(namespace)),
    );
    Observed {
        api_services: api_services.map(|l| l.items.iter().map(api_service).collect()),
        crds: crds.map(|l| l.items.iter().map(ResourceExt::name_any).collect()),
        deployments: deployments.map(|l| l.items.iter().map(deployment).collect()),
        nodes: nodes.map(|l| l.items.iter().map(node).collect()),
        namespace: ns.map(|n| n.map(|n| n.labels().clone())),
    }
}
