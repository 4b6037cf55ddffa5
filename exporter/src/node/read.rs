//! The slow read: the exporter's Node (metadata), the pods bound to it and
//! the PodDisruptionBudgets of their namespaces, every
//! `--node-facts-interval`, each list paged and bounded, each call under a
//! timeout. A read that fails or passes a bound leaves the facts unknown
//! (absent, with the reason), never a partial answer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::blockers::{self, Blocker};
use super::capacity::{self, Capacity};
use super::prices::{NodeKeys, NodePrice, PriceTable};
use crate::backoff::Backoff;

/// Items asked for per page.
const PAGE: u32 = 250;
/// Most pods read from one node (a kubelet runs 110 by default).
pub const MAX_PODS: usize = 1000;
/// Most PodDisruptionBudgets read over the node's namespaces.
pub const MAX_PDBS: usize = 2000;
/// Most namespaces whose budgets are listed.
pub const MAX_NAMESPACES: usize = 64;
/// Longest wait for one API call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What one successful read found.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub instance_type: String,
    pub capacity: Capacity,
    pub price: Option<NodePrice>,
    pub spot_price: Option<f64>,
    pub blockers: Vec<Blocker>,
}

/// The facts as last read: `Err(reason)` while unknown.
pub type View = Result<Read, String>;

/// Makes a client of the cluster's API (the pod mapper's), or says why not.
pub type Connect =
    Box<dyn Fn() -> futures::future::BoxFuture<'static, Result<Client, String>> + Send + Sync>;

/// A failed call: the `reason` suffix and the error for the log.
type Failure = (&'static str, String);

fn why(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.is_not_found() => "not_found",
        kube::Error::Api(s) if s.is_forbidden() || s.code == 401 => "forbidden",
        kube::Error::Api(_) => "api_error",
        _ => "unreachable",
    }
}

async fn call<T>(fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, Failure> {
    match tokio::time::timeout(CALL_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((why(&e), e.to_string())),
        Err(_) => Err(("timeout", format!("no answer in {CALL_TIMEOUT:?}"))),
    }
}

/// Every page of a list, refusing past `max` items.
async fn list_all<K>(api: &Api<K>, params: ListParams, max: usize) -> Result<Vec<K>, Failure>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page: ObjectList<K> = call(api.list(&params)).await?;
        out.extend(page.items);
        if out.len() > max {
            return Err(("too_many", format!("more than {max} items")));
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn tag(what: &str) -> impl Fn(Failure) -> (String, String) + '_ {
    move |(why, e)| (format!("{what}_{why}"), e)
}

/// One read of the facts.
async fn read(client: Client, node: &str, table: &PriceTable) -> Result<Read, (String, String)> {
    let meta = call(Api::<Node>::all(client.clone()).get_metadata(node))
        .await
        .map_err(tag("node"))?
        .metadata;
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = list_all(&Api::<Pod>::all(client.clone()), params, MAX_PODS)
        .await
        .map_err(tag("pods"))?;
    let namespaces: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.metadata.namespace.clone())
        .collect();
    if namespaces.len() > MAX_NAMESPACES {
        let e = format!(
            "pods of {} namespaces, more than {MAX_NAMESPACES}",
            namespaces.len()
        );
        return Err(("pdbs_too_many".into(), e));
    }
    let mut pdbs = Vec::new();
    for ns in &namespaces {
        let api = Api::<PodDisruptionBudget>::namespaced(client.clone(), ns);
        let left = MAX_PDBS.saturating_sub(pdbs.len());
        pdbs.extend(
            list_all(&api, ListParams::default(), left)
                .await
                .map_err(tag("pdbs"))?,
        );
    }
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let instance_type = labels
        .get("node.kubernetes.io/instance-type")
        .cloned()
        .unwrap_or_default();
    let capacity = capacity::of(labels);
    let keys = NodeKeys {
        name: node,
        instance_type: &instance_type,
        capacity,
        labels,
        annotations,
    };
    let price = table.node_price(&keys).unwrap_or_else(|e| {
        warn!(node, error = %e, "the node's price override is no price: gpu_node_price_usd_per_hour left out");
        None
    });
    Ok(Read {
        spot_price: table.spot(&instance_type),
        instance_type,
        capacity,
        price,
        blockers: blockers::find(annotations, &pods, &pdbs),
    })
}

/// Reads the facts forever, publishing each outcome; a failure retries
/// sooner (backoff from 1 s up to the interval).
pub async fn run(
    node: String,
    connect: Connect,
    table: PriceTable,
    interval: Duration,
    publish: impl Fn(View) + Send + 'static,
) {
    let mut retry = Backoff::new(Duration::from_secs(1), interval);
    let mut last_reason = String::from("not_read_yet");
    loop {
        let client = connect().await;
        let outcome = match client {
            Ok(c) => read(c, &node, &table).await,
            Err(e) => Err(("api_unreachable".to_owned(), e)),
        };
        let wait = match &outcome {
            Ok(r) => {
                if !last_reason.is_empty() {
                    info!(node = %node, blockers = r.blockers.len(), capacity_type = r.capacity.as_str(), "node facts read");
                }
                last_reason.clear();
                retry.reset();
                interval
            }
            Err((reason, error)) => {
                if *reason != last_reason {
                    warn!(node = %node, reason = %reason, %error, "cannot read the node's facts: gpu_node_* left out until a read succeeds; retrying");
                }
                last_reason.clone_from(reason);
                retry.next_delay()
            }
        };
        publish(outcome.map_err(|(reason, _)| reason));
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use gpuscale_sim::kubeapi::{Cluster, KubeFake, core};
    use serde_json::json;

    use super::*;

    fn cluster(pods: usize) -> KubeFake {
        let api = KubeFake::start_bare(Cluster::default()).expect("API server");
        api.put(
            &core("nodes"),
            json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n1" } }),
        );
        for i in 0..pods {
            api.put(
                &core("pods"),
                json!({ "apiVersion": "v1", "kind": "Pod",
                    "metadata": { "name": format!("bare-{i}"), "namespace": "tools", "uid": format!("u-{i}") },
                    "spec": { "nodeName": "n1", "containers": [] }, "status": { "phase": "Running" } }),
            );
        }
        api
    }

    /// The first outcome of the reader on `api`.
    fn first_read(api: &KubeFake) -> View {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let url = api.url();
        let connect: Connect = Box::new(move || {
            let url = url.clone();
            Box::pin(async move {
                crate::pods::kubeapi::client(Some(&url), None)
                    .await
                    .map_err(|e| e.to_string())
            })
        });
        let (tx, rx) = mpsc::channel();
        let table = PriceTable::built_in().expect("table");
        let task = rt.spawn(run(
            "n1".into(),
            connect,
            table,
            Duration::from_secs(60),
            move |v| {
                let _ = tx.send(v);
            },
        ));
        let got = rt.block_on(async {
            tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30))).await
        });
        task.abort();
        got.expect("join").expect("a read within 30 s")
    }

    #[test]
    fn lists_are_read_page_by_page_up_to_the_bound() {
        let api = cluster(600);
        let paged = first_read(&api).expect("600 pods read");
        assert_eq!(
            paged.blockers.len(),
            600,
            "every bare pod of the three pages is a blocker"
        );
        let pages = api
            .requests()
            .iter()
            .filter(|r| r.starts_with("GET /api/v1/pods?") && r.contains("limit=250"))
            .count();
        assert_eq!(pages, 3, "{:?}", api.requests());
        let lists = cluster(0);
        assert_eq!(first_read(&lists).map(|r| r.blockers.len()), Ok(0));
    }

    #[test]
    fn past_the_bound_the_facts_are_unknown_not_partial() {
        assert_eq!(
            first_read(&cluster(MAX_PODS + 1)),
            Err("pods_too_many".to_owned())
        );
        let down = cluster(1);
        down.set_down(true);
        let why = first_read(&down).expect_err("API down");
        assert!(why.starts_with("node_"), "{why}");
    }
}
