//! The node's pool, from a label of its Node object (`--node-pool-label`),
//! for the dashboards' `node_pool` variable. Read at start and every
//! [`REFRESH`]; a failed read retries sooner. Never a guessed pool: before a
//! read succeeds (no RBAC for `get nodes`, no such Node) `gpu_node_info` is
//! absent and `gpuscale_exporter_node_info_up` says why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use tracing::{info, warn};

use super::families as fam;
use crate::backoff::Backoff;
use crate::metrics::{Family, Subject, flag};

/// Pool labels of the managed node groups, tried in order: GKE, EKS
/// managed node groups, Karpenter, AKS.
pub const DEFAULT_POOL_LABELS: &[&str] = &[
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
];

/// A node's pool does not change while it runs: a slow refresh is enough.
const REFRESH: Duration = Duration::from_secs(600);

/// What the last reads found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// The pool of the last successful read ("" when the Node has none of
    /// the labels); `None` before one, or once the Node is gone.
    pub pool: Option<String>,
    /// Why the last read failed ("" when it succeeded).
    pub reason: &'static str,
}

impl Default for NodeView {
    fn default() -> Self {
        Self {
            pool: None,
            reason: "not_read_yet",
        }
    }
}

/// `gpu_node_info` (when a read succeeded) and `gpuscale_exporter_node_info_up`,
/// each naming its node itself.
pub fn families(node: &str, view: &NodeView) -> Vec<Family> {
    let up = vec![
        ("node", node.to_owned()),
        ("reason", view.reason.to_owned()),
    ];
    let mut out = vec![Family::of(&fam::NODE_INFO_UP).with(
        Subject::Global,
        up,
        flag(view.reason.is_empty()),
    )];
    if let Some(pool) = &view.pool {
        let labels = vec![("node", node.to_owned()), ("node_pool", pool.clone())];
        out.push(Family::of(&fam::NODE_INFO).with(Subject::Global, labels, 1.0));
    }
    out
}

/// The value of the first of `keys` the Node carries, else "".
pub fn pool_of(meta: &ObjectMeta, keys: &[String]) -> String {
    let labels = meta.labels.as_ref();
    keys.iter()
        .find_map(|k| labels.and_then(|l| l.get(k)).filter(|v| !v.is_empty()))
        .cloned()
        .unwrap_or_default()
}

/// Why a read failed: the `reason` label.
fn reason(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.is_not_found() => "not_found",
        kube::Error::Api(s) if s.is_forbidden() || s.code == 401 => "forbidden",
        kube::Error::Api(_) => "api_error",
        _ => "unreachable",
    }
}

/// Reads the Node forever, publishing what each read found.
pub async fn run(
    url: Option<String>,
    kubeconfig: Option<PathBuf>,
    node: String,
    keys: Arc<[String]>,
    publish: impl Fn(NodeView) + Send + 'static,
) {
    let mut view = NodeView::default();
    let mut retry = Backoff::new(Duration::from_secs(1), REFRESH);
    loop {
        let read = match super::kubeapi::client(url.as_deref(), kubeconfig.as_ref()).await {
            // Metadata only: a Node's status (images, conditions) can be
            // tens of kilobytes.
            Ok(client) => Api::<Node>::all(client)
                .get_metadata(&node)
                .await
                .map(|n| pool_of(&n.metadata, &keys))
                .map_err(|e| (reason(&e), e.to_string())),
            Err(e) => Err(("unreachable", e.to_string())),
        };
        let wait = match read {
            Ok(pool) => {
                if view.pool.as_ref() != Some(&pool) || !view.reason.is_empty() {
                    info!(node = %node, node_pool = %pool, "node pool read from the Node object");
                }
                view = NodeView {
                    pool: Some(pool),
                    reason: "",
                };
                retry.reset();
                REFRESH
            }
            Err((why, error)) => {
                if view.reason != why {
                    warn!(node = %node, reason = why, %error, "cannot read the exporter's Node object: no gpu_node_info (node pool) until a read succeeds; retrying");
                }
                // A Node that is gone has no pool; after other errors the
                // pool last read still holds (pools do not change).
                if why == "not_found" {
                    view.pool = None;
                }
                view.reason = why;
                retry.next_delay()
            }
        };
        publish(view.clone());
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_first_listed_label_with_a_value_names_the_pool() {
        let keys: Vec<String> = DEFAULT_POOL_LABELS
            .iter()
            .map(|k| (*k).to_owned())
            .collect();
        let both = meta(&[
            ("karpenter.sh/nodepool", "spot-h100"),
            ("eks.amazonaws.com/nodegroup", "gpu-ng"),
        ]);
        assert_eq!(pool_of(&both, &keys), "gpu-ng");
        let empty_first = meta(&[
            ("eks.amazonaws.com/nodegroup", ""),
            ("karpenter.sh/nodepool", "spot-h100"),
        ]);
        assert_eq!(pool_of(&empty_first, &keys), "spot-h100");
        assert_eq!(pool_of(&meta(&[("kubernetes.io/os", "linux")]), &keys), "");
        assert_eq!(pool_of(&ObjectMeta::default(), &keys), "");
    }

    #[test]
    fn no_info_series_before_a_read_succeeds() {
        let names =
            |v: &NodeView| -> Vec<&str> { families("n1", v).iter().map(|f| f.name).collect() };
        let fresh = NodeView::default();
        assert_eq!(names(&fresh), ["gpuscale_exporter_node_info_up"]);
        let read = NodeView {
            pool: Some(String::new()),
            reason: "",
        };
        assert_eq!(
            names(&read),
            ["gpuscale_exporter_node_info_up", "gpu_node_info"]
        );
    }
}
