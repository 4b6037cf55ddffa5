//! GPU nodes that could go (docs/node-economics.md): per node pool, the
//! node-hours its nodes were reclaimable over the range, what those hours
//! cost and would cost a month, the blockers seen; and for each workload
//! the scale-to-zero controller parked, whether its node went after the
//! park and, if not, why. From the exporter's node facts and the recorded
//! `gpuscale:node_reclaimable:bool` (`alerts/nodes.rules.yml`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Error;
use crate::history::Window;
use crate::prom::{Prometheus, Sample};

/// Hours in a month (365.25 × 24 / 12), as the rest of the report.
const MONTH_H: f64 = 730.0;

/// One node pool's waste.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Pool {
    /// `gpu_node_info`'s `node_pool`; "" for nodes in no pool.
    pub node_pool: String,
    pub nodes: usize,
    /// Nodes reclaimable at some point of the range.
    pub reclaimable_nodes: usize,
    pub reclaimable_node_hours: f64,
    /// What the reclaimable hours cost over the range.
    pub cost_usd: f64,
    /// The same rate over a month.
    pub cost_usd_per_month: f64,
    /// Blockers seen on its nodes: `kind namespace/pod (detail)`.
    pub blockers: Vec<String>,
}

/// A parked workload and one node it ran on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Parked {
    pub namespace: String,
    /// `Kind/name`, as the controller's `target` label.
    pub target: String,
    pub node: String,
    /// The node is gone by the end of the range.
    pub node_went: bool,
    /// Why it stayed ("" when it went).
    pub why: String,
}

/// The report's node section.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Nodes {
    pub pools: Vec<Pool>,
    pub parked: Vec<Parked>,
    /// What could not be said, and why.
    pub notes: Vec<String>,
}

type NodeKey = (String, String);

fn node_key(s: &Sample) -> NodeKey {
    (s.label("cluster").to_owned(), s.label("node").to_owned())
}

/// Finite values only: a NaN is never a fact.
fn by_node(samples: Vec<Sample>) -> BTreeMap<NodeKey, f64> {
    samples
        .into_iter()
        .filter(|s| s.value.is_finite())
        .map(|s| (node_key(&s), s.value))
        .collect()
}

fn blocker_text(s: &Sample) -> String {
    let who = match s.label("pod") {
        "" => "node".to_owned(),
        pod => format!("{}/{pod}", s.label("namespace")),
    };
    match s.label("detail") {
        "" => format!("{} {who}", s.label("kind")),
        d => format!("{} {who} ({d})", s.label("kind")),
    }
}

/// What Prometheus says of the nodes over the window.
struct Facts {
    pools: BTreeMap<NodeKey, String>,
    hours: BTreeMap<NodeKey, f64>,
    cost: BTreeMap<NodeKey, f64>,
    blockers: BTreeMap<NodeKey, Vec<String>>,
    /// Blockers at the end of the range.
    blockers_now: BTreeMap<NodeKey, Vec<String>>,
    /// Nodes whose facts are known at the end, with their allocated GPUs.
    allocated_now: BTreeMap<NodeKey, f64>,
}

fn blockers(samples: Vec<Sample>) -> BTreeMap<NodeKey, Vec<String>> {
    let mut out: BTreeMap<NodeKey, Vec<String>> = BTreeMap::new();
    for s in samples {
        out.entry(node_key(&s)).or_default().push(blocker_text(&s));
    }
    out
}

fn read_facts(p: &Prometheus, w: &Window) -> Result<Facts, Error> {
    let (r, s, step_h) = (&w.range, &w.step, w.step_s / 3600.0);
    let rec = "max by (cluster, node, reason) (gpuscale:node_reclaimable:bool)";
    let cost = "max by (cluster, node, reason) (gpuscale:node_reclaimable_cost_usd_per_hour)";
    let pools = p.query(&format!(
        "max by (cluster, node, node_pool) (last_over_time(gpu_node_info[{r}]))"
    ))?;
    Ok(Facts {
        pools: pools.iter().map(|x| (node_key(x), x.label("node_pool").to_owned())).collect(),
        hours: by_node(p.query(&format!("sum by (cluster, node) (count_over_time(({rec})[{r}:{s}])) * {step_h}"))?),
        cost: by_node(p.query(&format!("sum by (cluster, node) (sum_over_time(({cost})[{r}:{s}])) * {step_h}"))?),
        blockers: blockers(p.query(&format!(
            "max by (cluster, node, kind, namespace, pod, detail) (max_over_time(gpu_node_blocker[{r}]))"
        ))?),
        blockers_now: blockers(p.query(&format!(
            "max by (cluster, node, kind, namespace, pod, detail) (last_over_time(gpu_node_blocker[{s}]))"
        ))?),
        allocated_now: by_node(p.query(&format!(
            "max by (cluster, node) (last_over_time(gpu_node_gpus{{state=\"allocated\"}}[{s}]))"
        ))?),
    })
}

/// Reads the node section.
pub fn read(p: &Prometheus, w: &Window) -> Result<Nodes, Error> {
    let f = read_facts(p, w)?;
    let mut out = Nodes::default();
    if f.pools.is_empty() && f.allocated_now.is_empty() {
        out.notes.push("no node facts in Prometheus (gpu_node_info, gpu_node_gpus): the exporters read no Node, or run with --no-node-facts".into());
        return Ok(out);
    }
    if f.hours.is_empty() {
        out.notes.push("no gpuscale:node_reclaimable:bool in the range: load alerts/nodes.rules.yml, or no node was reclaimable".into());
    }
    out.pools = pools(&f, w.range_s / 3600.0);
    out.parked = parked(p, w, &f)?;
    Ok(out)
}

fn pools(f: &Facts, range_h: f64) -> Vec<Pool> {
    let mut by_pool: BTreeMap<String, Pool> = BTreeMap::new();
    let nodes: std::collections::BTreeSet<&NodeKey> =
        f.pools.keys().chain(f.hours.keys()).collect();
    for n in nodes {
        let name = f.pools.get(n).cloned().unwrap_or_default();
        let pool = by_pool.entry(name.clone()).or_insert_with(|| Pool {
            node_pool: name,
            nodes: 0,
            reclaimable_nodes: 0,
            reclaimable_node_hours: 0.0,
            cost_usd: 0.0,
            cost_usd_per_month: 0.0,
            blockers: Vec::new(),
        });
        pool.nodes += 1;
        let hours = f.hours.get(n).copied().unwrap_or(0.0);
        if hours > 0.0 {
            pool.reclaimable_nodes += 1;
        }
        pool.reclaimable_node_hours += hours;
        pool.cost_usd += f.cost.get(n).copied().unwrap_or(0.0);
        for b in f.blockers.get(n).into_iter().flatten() {
            if !pool.blockers.contains(b) {
                pool.blockers.push(b.clone());
            }
        }
    }
    let mut out: Vec<Pool> = by_pool.into_values().collect();
    for p in &mut out {
        p.cost_usd_per_month = if range_h > 0.0 {
            p.cost_usd / range_h * MONTH_H
        } else {
            0.0
        };
    }
    out.sort_by(|a, b| {
        b.cost_usd
            .total_cmp(&a.cost_usd)
            .then(a.node_pool.cmp(&b.node_pool))
    });
    out
}

/// Every (parked target, node it ran on in the range): did the node go?
fn parked(p: &Prometheus, w: &Window, f: &Facts) -> Result<Vec<Parked>, Error> {
    let r = &w.range;
    let targets = p.query(&format!(
        "max by (cluster, namespace, target) (max_over_time(gpuscale_scale_to_zero_parked[{r}])) == 1"
    ))?;
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let placed = p.query(&format!(
        "max by (cluster, namespace, workload_kind, workload, node) (max_over_time(gpu_pod_allocation[{r}]))"
    ))?;
    let mut out = Vec::new();
    for t in &targets {
        let ran = placed.iter().filter(|a| {
            a.label("cluster") == t.label("cluster")
                && a.label("namespace") == t.label("namespace")
                && format!("{}/{}", a.label("workload_kind"), a.label("workload"))
                    == t.label("target")
        });
        for a in ran {
            out.push(judge(t, &node_key(a), f));
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.target, &a.node).cmp(&(&b.namespace, &b.target, &b.node)));
    out.dedup();
    Ok(out)
}

fn judge(t: &Sample, n: &NodeKey, f: &Facts) -> Parked {
    let mut p = Parked {
        namespace: t.label("namespace").to_owned(),
        target: t.label("target").to_owned(),
        node: n.1.clone(),
        node_went: false,
        why: String::new(),
    };
    p.why = match (f.allocated_now.get(n), f.blockers_now.get(n)) {
        (None, _) => {
            p.node_went = true;
            String::new()
        }
        (Some(a), _) if *a > 0.0 => format!("other pods hold {a} of its GPUs"),
        (Some(_), Some(b)) if !b.is_empty() => format!("kept by {}", b.join("; ")),
        (Some(_), _) => "no blocker: the node autoscaler has not removed it (its consolidation or scale-down settings)".into(),
    };
    p
}

/// The section as text: (first words, the rest) per line, for the
/// report to wrap.
pub fn lines(n: &Nodes) -> Vec<(String, String)> {
    let mut out = vec![(
        String::new(),
        "GPU nodes that could go (per node pool: nodes, reclaimable nodes, node-hours and cost over the range, a month at that rate):".to_owned(),
    )];
    for p in &n.pools {
        let name = if p.node_pool.is_empty() {
            "(no pool)"
        } else {
            &p.node_pool
        };
        let text = format!(
            "{} nodes, {} reclaimable, {:.1} node-hours, ${:.2} (${:.0}/month)",
            p.nodes,
            p.reclaimable_nodes,
            p.reclaimable_node_hours,
            p.cost_usd,
            p.cost_usd_per_month
        );
        out.push((format!("  {name}:"), text));
        for b in &p.blockers {
            out.push(("    blocker:".into(), b.clone()));
        }
    }
    for p in &n.parked {
        let went = if p.node_went {
            "went".to_owned()
        } else {
            format!("stayed: {}", p.why)
        };
        out.push((
            "  parked".into(),
            format!("{}/{}: node {} {went}", p.namespace, p.target, p.node),
        ));
    }
    for note in &n.notes {
        out.push(("  note:".into(), note.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        let k = |n: &str| (String::new(), n.to_owned());
        Facts {
            pools: BTreeMap::from([
                (k("a"), "gpu".into()),
                (k("b"), "gpu".into()),
                (k("c"), String::new()),
            ]),
            hours: BTreeMap::from([(k("a"), 2.0), (k("b"), 1.0)]),
            cost: BTreeMap::from([(k("a"), 110.08), (k("b"), 55.04)]),
            blockers: BTreeMap::from([(k("a"), vec!["pdb web/f (f)".into()])]),
            blockers_now: BTreeMap::from([(k("a"), vec!["pdb web/f (f)".into()])]),
            allocated_now: BTreeMap::from([(k("a"), 0.0), (k("b"), 0.0), (k("c"), 2.0)]),
        }
    }

    #[test]
    fn pools_sum_their_nodes_hours_and_cost_and_scale_to_a_month() {
        let p = pools(&facts(), 24.0);
        let gpu = p.iter().find(|p| p.node_pool == "gpu").expect("pool gpu");
        assert_eq!((gpu.nodes, gpu.reclaimable_nodes), (2, 2));
        assert!((gpu.reclaimable_node_hours - 3.0).abs() < 1e-9);
        assert!((gpu.cost_usd_per_month - 165.12 / 24.0 * 730.0).abs() < 1e-6);
        assert_eq!(gpu.blockers, ["pdb web/f (f)"]);
        let none = p.iter().find(|p| p.node_pool.is_empty()).expect("no pool");
        assert_eq!((none.nodes, none.reclaimable_nodes), (1, 0));
    }

    #[test]
    fn a_parked_workloads_node_went_or_says_why_it_stayed() {
        let f = facts();
        let t = Sample {
            labels: vec![
                ("namespace".into(), "ml".into()),
                ("target".into(), "Deployment/chat".into()),
            ],
            value: 1.0,
        };
        let j = |n: &str| judge(&t, &(String::new(), n.to_owned()), &f);
        assert!(j("gone").node_went);
        assert_eq!(j("a").why, "kept by pdb web/f (f)");
        assert_eq!(j("c").why, "other pods hold 2 of its GPUs");
        assert!(j("b").why.starts_with("no blocker"), "{}", j("b").why);
    }
}
