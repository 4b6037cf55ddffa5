//! Pod metadata from the Kubernetes API: one watch of this node's pods
//! (`spec.nodeName=<node>`), trimmed to what the labels need. No per-pod or
//! per-scrape API calls.

use crate::backoff::Backoff;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Config};
use tracing::{debug, info, warn};

use super::labels::PodLabel;
use super::owner;
use super::podlite::PodLite;

/// The part of a pod the mapper keeps (a few hundred bytes per pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodMeta {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Succeeded or Failed: dropped from the map.
    pub terminal: bool,
    pub workload: String,
    pub workload_kind: String,
    /// Values of the allowlisted labels, in `--pod-label` order ("" if unset).
    pub labels: Vec<String>,
    /// (container ID without the `containerd://` scheme, container name).
    pub containers: Vec<(String, String)>,
}

/// The latest view of this node's pods.
#[derive(Debug, Clone, Default)]
pub struct MetaView {
    /// A full list has completed at least once.
    pub synced: bool,
    /// The watch is failing: `pods` is the last known state.
    pub stale: bool,
    pub pods: HashMap<String, Arc<PodMeta>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeConfigError {
    #[error("--kube-api-url {url}: {source}")]
    Url {
        url: String,
        source: http::uri::InvalidUri,
    },
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no in-cluster config or kubeconfig: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("kube client: {0}")]
    Client(#[from] kube::Error),
}

/// `--kube-api-url` (plain HTTP, tests and `--simulate`), `--kubeconfig`, or
/// the in-cluster service account / `$KUBECONFIG`.
pub async fn client(
    url: Option<&str>,
    kubeconfig: Option<&PathBuf>,
) -> Result<Client, KubeConfigError> {
    let mut config = if let Some(url) = url {
        let mut c = Config::new(url.parse().map_err(|source| KubeConfigError::Url {
            url: url.to_owned(),
            source,
        })?);
        if url.starts_with("http://") {
            // No TLS on this URL: an empty trust store instead of loading
            // the OS one, as an in-cluster config (one CA) would.
            c.root_cert = Some(Vec::new());
        }
        c
    } else if let Some(path) = kubeconfig {
        let kc_err = |source| KubeConfigError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        let kc = kube::config::Kubeconfig::read_from(path).map_err(kc_err)?;
        Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(kc_err)?
    } else {
        Config::infer().await?
    };
    // The watch loop retries with its own backoff; the client's retries of
    // 503s would hide an unhealthy API server from the stale flag for minutes.
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

/// Trims a pod to its [`PodMeta`].
pub fn pod_meta(pod: &PodLite, labels: &[PodLabel]) -> Option<PodMeta> {
    let meta = &pod.metadata;
    let uid = meta.uid.clone()?;
    let name = meta.name.clone().unwrap_or_default();
    let empty = Default::default();
    let pod_labels = meta.labels.as_ref().unwrap_or(&empty);
    let (workload, workload_kind) = owner::workload(
        &name,
        meta.owner_references.as_deref().unwrap_or(&[]),
        pod_labels,
    );
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let containers = status
        .into_iter()
        .flat_map(|s| {
            [
                &s.container_statuses,
                &s.init_container_statuses,
                &s.ephemeral_container_statuses,
            ]
            .into_iter()
            .flatten()
            .flatten()
        })
        .filter_map(|c| {
            let id = c.container_id.as_deref()?;
            let id = id.split_once("://").map_or(id, |(_, id)| id);
            Some((id.to_owned(), c.name.clone()))
        })
        .collect();
    Some(PodMeta {
        uid,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name,
        terminal: matches!(phase, "Succeeded" | "Failed"),
        workload,
        workload_kind,
        labels: labels
            .iter()
            .map(|l| pod_labels.get(&l.key).cloned().unwrap_or_default())
            .collect(),
        containers,
    })
}

/// Watches this node's pods forever, publishing a new view on every change.
/// After an error the watch is restarted with a full list (so staleness ends
/// exactly when a list succeeds), with backoff up to 30 s.
pub async fn run(
    url: Option<String>,
    kubeconfig: Option<PathBuf>,
    node: String,
    labels: Arc<[PodLabel]>,
    publish: impl Fn(MetaView) + Send + 'static,
) {
    let mut view = MetaView {
        stale: true,
        ..MetaView::default()
    };
    let max_backoff = Duration::from_secs(30);
    let mut backoff = Backoff::new(Duration::from_millis(250), max_backoff);
    let mut client_logged = false;
    loop {
        let client = match client(url.as_deref(), kubeconfig.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                if !client_logged {
                    warn!(error = %e, "pod metadata unavailable: no Kubernetes API client; retrying");
                    client_logged = true;
                }
                tokio::time::sleep(max_backoff).await;
                continue;
            }
        };
        let api: Api<PodLite> = Api::all(client);
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={node}"))
            .any_semantic();
        let mut stream = watcher::watcher(api, config).boxed();
        let mut init: Option<HashMap<String, Arc<PodMeta>>> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => init = Some(HashMap::new()),
                Ok(Event::InitApply(pod)) => {
                    if let (Some(buf), Some(m)) = (init.as_mut(), pod_meta(&pod, &labels)) {
                        buf.insert(m.uid.clone(), Arc::new(m));
                    }
                }
                Ok(Event::InitDone) => {
                    view.pods = init.take().unwrap_or_default();
                    if view.stale {
                        info!(node = %node, pods = view.pods.len(), "pod metadata synced");
                    }
                    view.synced = true;
                    view.stale = false;
                    backoff.reset();
                    publish(view.clone());
                }
                Ok(Event::Apply(pod)) => {
                    if let Some(m) = pod_meta(&pod, &labels) {
                        view.pods.insert(m.uid.clone(), Arc::new(m));
                        publish(view.clone());
                    }
                }
                Ok(Event::Delete(pod)) => {
                    if let Some(uid) = pod.metadata.uid.as_deref() {
                        view.pods.remove(uid);
                        publish(view.clone());
                    }
                }
                Err(e) => {
                    if view.stale {
                        debug!(error = %e, "pod watch still failing");
                    } else {
                        warn!(error = %e, "pod watch failed; keeping the last known pods, marked stale");
                    }
                    view.stale = true;
                    publish(view.clone());
                    break;
                }
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_a_pod_to_its_meta() -> Result<(), serde_json::Error> {
        let pod: PodLite = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-7d4b9c-x2x", "namespace": "shop", "uid": "u-1",
                "labels": { "team": "checkout", "pod-template-hash": "7d4b9c" },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "r", "controller": true }]
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [{ "name": "app", "containerID": "cri-o://abc" }],
                "initContainerStatuses": [{ "name": "init", "containerID": "containerd://def" }, { "name": "waiting" }]
            }
        }))?;
        let keys = vec![
            PodLabel {
                key: "team".into(),
                name: "label_team",
            },
            PodLabel {
                key: "missing".into(),
                name: "label_missing",
            },
        ];
        let m = pod_meta(&pod, &keys);
        assert_eq!(
            m,
            Some(PodMeta {
                uid: "u-1".into(),
                namespace: "shop".into(),
                name: "web-7d4b9c-x2x".into(),
                terminal: true,
                workload: "web".into(),
                workload_kind: "Deployment".into(),
                labels: vec!["checkout".into(), String::new()],
                containers: vec![("abc".into(), "app".into()), ("def".into(), "init".into())],
            })
        );
        Ok(())
    }
}
