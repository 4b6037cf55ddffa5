//! Spot (docs/node-economics.md, "Spot"): which GPU workloads suit Spot
//! capacity, with the evidence used and the saving at the price table's
//! Spot price, and which already run there at a risk.
//!
//! The rules start from Kubecost's Spot readiness checks (controller kind,
//! replicas, local storage, PodDisruptionBudget) and add what the
//! exporter sees: the nodes each replica runs on and their capacity type.
//! - a Job (or CronJob) is a candidate: its pods are retried on interruption;
//! - a Deployment or StatefulSet needs two or more replicas on two or more
//!   nodes; a StatefulSet also restarts that it survived in the range
//!   (evidence that it resumes from its state); a single-replica service
//!   in the production tier is never a candidate;
//! - a risk: a production service whose replicas all run on Spot nodes (no
//!   on-demand fallback), a single replica above all.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::Error;
use crate::history::{Key, Window};
use crate::policy::{PRODUCTION, Policy};
use crate::prom::{Prometheus, Sample};

const MONTH_H: f64 = 730.0;

/// A workload that suits Spot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Candidate {
    pub workload: Key,
    pub replicas: usize,
    pub nodes: usize,
    /// Every replica already runs on Spot nodes.
    pub on_spot: bool,
    /// Saving a month at the table's Spot price (0 when already on Spot;
    /// absent when a node of it has no price).
    pub saving_usd_per_month: Option<f64>,
    pub evidence: Vec<String>,
    /// What to do before moving (a budget, a checkpoint).
    pub conditions: Vec<String>,
}

/// A workload on Spot that should not depend on it alone.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Risk {
    pub workload: Key,
    pub replicas: usize,
    pub why: String,
}

/// The report's Spot section.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Spot {
    pub candidates: Vec<Candidate>,
    pub risks: Vec<Risk>,
    /// Workloads that do not suit Spot, and why.
    pub not_ready: Vec<String>,
    pub notes: Vec<String>,
}

/// A workload at the end of the range: its pods and where they run.
#[derive(Debug, Default)]
struct Placed {
    pods: BTreeSet<String>,
    /// node → GPUs (allocations) it holds there.
    nodes: BTreeMap<String, f64>,
    restarts: f64,
}

/// Node facts: capacity type, own price, Spot price, GPUs.
#[derive(Default)]
struct NodeFacts {
    capacity: BTreeMap<String, String>,
    price: BTreeMap<String, f64>,
    spot: BTreeMap<String, f64>,
    gpus: BTreeMap<String, f64>,
}

fn key(s: &Sample) -> Key {
    Key {
        cluster: s.label("cluster").to_owned(),
        namespace: s.label("namespace").to_owned(),
        kind: s.label("workload_kind").to_owned(),
        name: s.label("workload").to_owned(),
    }
}

/// `cluster/node`, the node's name across clusters.
fn node_of(s: &Sample) -> String {
    format!("{}/{}", s.label("cluster"), s.label("node"))
}

fn values(samples: Vec<Sample>) -> BTreeMap<String, f64> {
    samples
        .into_iter()
        .filter(|s| s.value.is_finite())
        .map(|s| (node_of(&s), s.value))
        .collect()
}

fn read_nodes(p: &Prometheus, s: &str) -> Result<NodeFacts, Error> {
    let capacity = p.query(&format!(
        "max by (cluster, node, capacity_type) (last_over_time(gpu_node_capacity_info[{s}]))"
    ))?;
    Ok(NodeFacts {
        capacity: capacity
            .iter()
            .map(|x| (node_of(x), x.label("capacity_type").to_owned()))
            .collect(),
        price: values(p.query(&format!(
            "max by (cluster, node) (last_over_time(gpu_node_price_usd_per_hour[{s}]))"
        ))?),
        spot: values(p.query(&format!(
            "max by (cluster, node) (last_over_time(gpu_node_spot_price_usd_per_hour[{s}]))"
        ))?),
        gpus: values(p.query(&format!(
            "max by (cluster, node) (last_over_time(gpu_node_gpus{{state=\"allocatable\"}}[{s}]))"
        ))?),
    })
}

fn read_placed(p: &Prometheus, w: &Window) -> Result<BTreeMap<Key, Placed>, Error> {
    let (r, s) = (&w.range, &w.step);
    let held = p.query(&format!(
        "count by (cluster, namespace, workload_kind, workload, node, pod) (last_over_time(gpu_pod_allocation[{s}]))"
    ))?;
    let mut out: BTreeMap<Key, Placed> = BTreeMap::new();
    let mut pod_of: BTreeMap<(String, String), Key> = BTreeMap::new();
    for h in &held {
        let k = key(h);
        let e = out.entry(k.clone()).or_default();
        e.pods.insert(h.label("pod").to_owned());
        *e.nodes.entry(node_of(h)).or_default() += h.value;
        pod_of.insert(
            (h.label("namespace").to_owned(), h.label("pod").to_owned()),
            k,
        );
    }
    // kube-state-metrics, when Prometheus has it: restarts the pods survived.
    let restarts = p.query(&format!(
        "sum by (namespace, pod) (increase(kube_pod_container_status_restarts_total[{r}])) > 0"
    ))?;
    for x in restarts {
        let pk = (x.label("namespace").to_owned(), x.label("pod").to_owned());
        if let Some(e) = pod_of.get(&pk).and_then(|k| out.get_mut(k)) {
            e.restarts += x.value;
        }
    }
    Ok(out)
}

/// Reads the Spot section; `tiers` are the assessed workloads' tiers.
pub fn read(
    p: &Prometheus,
    w: &Window,
    policy: &Policy,
    tiers: &BTreeMap<Key, String>,
) -> Result<Spot, Error> {
    let nodes = read_nodes(p, &w.step)?;
    let mut out = Spot::default();
    if nodes.capacity.is_empty() {
        out.notes.push("no gpu_node_capacity_info in Prometheus: the exporters' node facts are off or unknown, so nothing is said about Spot".into());
        return Ok(out);
    }
    for (k, placed) in read_placed(p, w)? {
        let tier = tiers
            .get(&k)
            .cloned()
            .unwrap_or_else(|| policy.tier(&[], &k.namespace, None).0);
        judge(&mut out, &k, &placed, &nodes, &tier);
    }
    Ok(out)
}

fn spot_nodes(placed: &Placed, nodes: &NodeFacts) -> usize {
    placed
        .nodes
        .keys()
        .filter(|n| nodes.capacity.get(*n).is_some_and(|c| c == "spot"))
        .count()
}

/// The saving of moving the workload's GPUs from their nodes' price to the
/// Spot price; `None` when a node lacks either price.
fn saving(placed: &Placed, nodes: &NodeFacts) -> Option<f64> {
    let mut total = 0.0;
    for (n, held) in &placed.nodes {
        if nodes.capacity.get(n).is_some_and(|c| c == "spot") {
            continue;
        }
        let (price, spot, gpus) = (nodes.price.get(n)?, nodes.spot.get(n)?, nodes.gpus.get(n)?);
        if *gpus > 0.0 {
            total += held / gpus * (price - spot).max(0.0) * MONTH_H;
        }
    }
    Some(total)
}

fn judge(out: &mut Spot, k: &Key, placed: &Placed, nodes: &NodeFacts, tier: &str) {
    let (replicas, on_nodes, on_spot) = (
        placed.pods.len(),
        placed.nodes.len(),
        spot_nodes(placed, nodes),
    );
    let production = tier == PRODUCTION;
    let service = matches!(k.kind.as_str(), "Deployment" | "StatefulSet" | "ReplicaSet");
    if service && production && on_spot == on_nodes && on_spot > 0 {
        let why = if replicas == 1 {
            "a single-replica production service on Spot: one reclaim takes it down; run it on on-demand capacity".to_owned()
        } else {
            format!(
                "all {replicas} replicas of a production service on Spot nodes, none on on-demand: a Spot shortage takes them all; keep at least one on on-demand (a second NodePool, preferred node affinity)"
            )
        };
        out.risks.push(Risk {
            workload: k.clone(),
            replicas,
            why,
        });
    }
    match ready(k, placed, replicas, on_nodes, production) {
        Ok((evidence, conditions)) => out.candidates.push(Candidate {
            workload: k.clone(),
            replicas,
            nodes: on_nodes,
            on_spot: on_spot == on_nodes,
            saving_usd_per_month: saving(placed, nodes),
            evidence,
            conditions,
        }),
        Err(why) => out.not_ready.push(format!("{k}: {why}")),
    }
}

type Readiness = Result<(Vec<String>, Vec<String>), String>;

/// Whether the workload suits Spot: the evidence and the conditions, or why not.
fn ready(
    k: &Key,
    placed: &Placed,
    replicas: usize,
    on_nodes: usize,
    production: bool,
) -> Readiness {
    let restarts = (placed.restarts > 0.0).then(|| {
        format!(
            "survived {:.0} container restarts in the range",
            placed.restarts
        )
    });
    match k.kind.as_str() {
        "Job" | "CronJob" => {
            let mut evidence = vec![format!(
                "a {}: Kubernetes retries its pods when a node goes",
                k.kind
            )];
            evidence.extend(restarts);
            Ok((evidence, vec!["checkpoint its progress so a retried pod resumes (a volume that outlives the node)".into()]))
        }
        "Deployment" | "StatefulSet" | "ReplicaSet" => {
            if replicas < 2 {
                return Err(if production {
                    "a single-replica production service: never moved to Spot".into()
                } else {
                    "one replica: a reclaim stops it until a new node comes".into()
                });
            }
            if on_nodes < 2 {
                return Err(format!(
                    "{replicas} replicas on one node: one reclaim takes them all"
                ));
            }
            if k.kind == "StatefulSet" && restarts.is_none() {
                return Err("a StatefulSet with no restart survived in the range: no evidence it resumes from its state".into());
            }
            let mut evidence = vec![format!("{replicas} replicas on {on_nodes} nodes")];
            evidence.extend(restarts);
            let conditions = vec![
                "a PodDisruptionBudget with maxUnavailable: 1 (the advisor cannot see budgets)".into(),
                "spread the replicas over zones (topologySpreadConstraints) and keep one on on-demand capacity".into(),
            ];
            Ok((evidence, conditions))
        }
        other => Err(format!(
            "controller kind {other:?}: only Jobs, Deployments and StatefulSets are judged"
        )),
    }
}

/// The section as text: (first words, the rest) per line, for the
/// report to wrap.
pub fn lines(spot: &Spot) -> Vec<(String, String)> {
    let mut out = vec![(
        String::new(),
        "Spot candidates (saving at the price table's Spot price) and risks:".to_owned(),
    )];
    for c in &spot.candidates {
        let saving = match (c.on_spot, c.saving_usd_per_month) {
            (true, _) => "already on Spot".to_owned(),
            (false, Some(v)) => format!("saves ${v:.0}/month"),
            (false, None) => "saving unknown: a node has no price".to_owned(),
        };
        let text = format!(
            "({}, {} replicas) {saving}; evidence: {}",
            c.workload.kind,
            c.replicas,
            c.evidence.join("; ")
        );
        out.push((format!("  {}", c.workload), text));
        for cond in &c.conditions {
            out.push(("    before:".into(), cond.clone()));
        }
    }
    for r in &spot.risks {
        out.push((
            format!("  RISK {}", r.workload),
            format!("({} replicas): {}", r.replicas, r.why),
        ));
    }
    for n in &spot.not_ready {
        out.push(("  not for Spot:".into(), n.clone()));
    }
    for n in &spot.notes {
        out.push(("  note:".into(), n.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(kind: &str, name: &str) -> Key {
        Key {
            cluster: String::new(),
            namespace: "ml".into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn placed(pods: &[&str], nodes: &[(&str, f64)], restarts: f64) -> Placed {
        Placed {
            pods: pods.iter().map(|p| (*p).to_owned()).collect(),
            nodes: nodes.iter().map(|(n, g)| ((*n).to_owned(), *g)).collect(),
            restarts,
        }
    }

    fn nodes() -> NodeFacts {
        let m = |v: &[(&str, f64)]| v.iter().map(|(n, x)| ((*n).to_owned(), *x)).collect();
        NodeFacts {
            capacity: [
                ("od-1", "on-demand"),
                ("od-2", "on-demand"),
                ("spot-1", "spot"),
            ]
            .iter()
            .map(|(n, c)| ((*n).to_owned(), (*c).to_owned()))
            .collect(),
            price: m(&[("od-1", 55.04), ("od-2", 55.04), ("spot-1", 22.02)]),
            spot: m(&[("od-1", 22.02), ("od-2", 22.02), ("spot-1", 22.02)]),
            gpus: m(&[("od-1", 8.0), ("od-2", 8.0), ("spot-1", 8.0)]),
        }
    }

    #[test]
    fn jobs_and_spread_services_are_candidates_with_the_spot_saving() {
        let mut out = Spot::default();
        judge(
            &mut out,
            &k("Job", "embed"),
            &placed(&["e-1"], &[("spot-1", 1.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        judge(
            &mut out,
            &k("Deployment", "web"),
            &placed(&["w-1", "w-2"], &[("od-1", 1.0), ("od-2", 1.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        let job = &out.candidates[0];
        assert!(
            job.on_spot && job.saving_usd_per_month == Some(0.0),
            "{job:?}"
        );
        let web = &out.candidates[1];
        let want = 2.0 * (55.04 - 22.02) / 8.0 * 730.0;
        assert!(
            web.saving_usd_per_month
                .is_some_and(|v| (v - want).abs() < 1e-6),
            "{web:?}"
        );
        assert!(out.risks.is_empty() && out.not_ready.is_empty(), "{out:?}");
    }

    #[test]
    fn a_single_replica_production_service_is_never_a_candidate_and_a_risk_on_spot() {
        let mut out = Spot::default();
        judge(
            &mut out,
            &k("Deployment", "chat"),
            &placed(&["c-1"], &[("spot-1", 1.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        assert!(out.candidates.is_empty());
        assert!(
            out.risks[0]
                .why
                .starts_with("a single-replica production service on Spot"),
            "{out:?}"
        );
        assert!(out.not_ready[0].contains("never moved to Spot"), "{out:?}");
        let mut dev = Spot::default();
        judge(
            &mut dev,
            &k("Deployment", "chat"),
            &placed(&["c-1"], &[("spot-1", 1.0)], 0.0),
            &nodes(),
            "dev",
        );
        assert!(dev.risks.is_empty() && dev.candidates.is_empty(), "{dev:?}");
    }

    #[test]
    fn replicas_on_one_node_and_statefulsets_without_a_survived_restart_are_not_ready() {
        let mut out = Spot::default();
        judge(
            &mut out,
            &k("Deployment", "a"),
            &placed(&["a-1", "a-2"], &[("od-1", 2.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        judge(
            &mut out,
            &k("StatefulSet", "t"),
            &placed(&["t-0", "t-1"], &[("od-1", 1.0), ("od-2", 1.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        judge(
            &mut out,
            &k("StatefulSet", "r"),
            &placed(&["r-0", "r-1"], &[("od-1", 1.0), ("od-2", 1.0)], 3.0),
            &nodes(),
            PRODUCTION,
        );
        assert!(
            out.not_ready[0].contains("on one node")
                && out.not_ready[1].contains("no restart survived"),
            "{out:?}"
        );
        assert_eq!(out.candidates.len(), 1);
        assert!(
            out.candidates[0]
                .evidence
                .iter()
                .any(|e| e.contains("survived 3")),
            "{out:?}"
        );
        let mut all_spot = Spot::default();
        judge(
            &mut all_spot,
            &k("Deployment", "s"),
            &placed(&["s-1", "s-2"], &[("spot-1", 2.0)], 0.0),
            &nodes(),
            PRODUCTION,
        );
        assert!(
            all_spot.risks[0].why.starts_with("all 2 replicas"),
            "{all_spot:?}"
        );
    }
}
