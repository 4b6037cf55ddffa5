//! The pod mapper's side of the node facts (`crate::node`): it starts them
//! on the mapper's Kubernetes API and hands each join the devices pods hold.

use std::collections::HashSet;
use std::sync::Arc;

use super::PodArgs;
use super::map::PodMap;
use crate::metrics::{Collected, Family, Subject};
use crate::node::NodeFacts;

/// The node facts of the mapper's node; `None` with `--no-pods` or
/// `--no-node-facts`.
pub fn start(args: &PodArgs, node: &str, rt: &tokio::runtime::Handle) -> Option<Arc<NodeFacts>> {
    if args.no_pods {
        return None;
    }
    let (url, kubeconfig) = (args.kube_api_url.clone(), args.kubeconfig.clone());
    let connect: crate::node::read::Connect = Box::new(move || {
        let (url, kubeconfig) = (url.clone(), kubeconfig.clone());
        Box::pin(async move {
            super::kubeapi::client(url.as_deref(), kubeconfig.as_ref())
                .await
                .map_err(|e| e.to_string())
        })
    });
    NodeFacts::start(&args.node_facts, node, connect, rt)
}

/// This join's node-fact families.
pub fn families(
    facts: &NodeFacts,
    node: &str,
    kubelet_up: bool,
    map: &PodMap,
    collected: &Collected,
) -> Vec<Family> {
    let held: HashSet<&str> = map.holdings.iter().map(|h| h.device.as_str()).collect();
    facts.families(node, kubelet_up, &held, collected)
}

/// `gpu_price_usd_per_hour` from the node's own price (Spot on Spot nodes)
/// spread over its GPUs, when the node facts know it; `None` leaves the
/// prices to `--gpu-price`.
pub fn gpu_prices(facts: Option<&NodeFacts>, collected: &Collected) -> Option<Family> {
    let price = facts?.node_price()?;
    let n = collected.devices.len();
    if n == 0 {
        return None;
    }
    let mut family = Family::of(&super::families::PRICE);
    for d in &collected.devices {
        family.push(Subject::Device(d.clone()), Vec::new(), price / n as f64);
    }
    Some(family)
}
