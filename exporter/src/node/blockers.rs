//! What would keep a node if its GPU work left: the pods the node
//! autoscalers will not move, with their reason, and the node's own
//! opt-outs. Each kind and its source are in docs/node-economics.md.
//!
//! DaemonSet pods, mirror (static) pods and finished pods never block, as
//! neither autoscaler counts them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
pub const SAFE_LOCAL_VOLUMES: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
const MIRROR: &str = "kubernetes.io/config.mirror";

/// One thing that keeps the node: the `gpu_node_blocker` series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Blocker {
    pub kind: &'static str,
    pub namespace: String,
    pub pod: String,
    /// The PDB or volume at fault; "" when the kind says all.
    pub detail: String,
}

impl Blocker {
    fn of_pod(pod: &Pod, kind: &'static str, detail: &str) -> Self {
        Self {
            kind,
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            detail: detail.to_owned(),
        }
    }

    fn of_node(kind: &'static str) -> Self {
        Self {
            kind,
            namespace: String::new(),
            pod: String::new(),
            detail: String::new(),
        }
    }
}

/// Every blocker of the node, sorted (node opt-outs first, then by kind,
/// namespace and pod).
pub fn find(
    node_annotations: &BTreeMap<String, String>,
    pods: &[Pod],
    pdbs: &[PodDisruptionBudget],
) -> Vec<Blocker> {
    let mut out = Vec::new();
    if is_true(node_annotations.get(DO_NOT_DISRUPT)) {
        out.push(Blocker::of_node("node_do_not_disrupt"));
    }
    if is_true(node_annotations.get(SCALE_DOWN_DISABLED)) {
        out.push(Blocker::of_node("node_scale_down_disabled"));
    }
    let mut of_pods: Vec<Blocker> = pods
        .iter()
        .filter(|p| counts(p))
        .flat_map(|p| of_pod(p, pdbs))
        .collect();
    of_pods.sort();
    out.extend(of_pods);
    out
}

fn is_true(v: Option<&String>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// A running pod the autoscalers would have to move.
fn counts(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR));
    let daemon = controller(pod).is_some_and(|kind| kind == "DaemonSet");
    !mirror && !daemon
}

fn controller(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.as_str())
}

/// One pod's reasons.
fn of_pod(pod: &Pod, pdbs: &[PodDisruptionBudget]) -> Vec<Blocker> {
    let empty = BTreeMap::new();
    let ann = pod.metadata.annotations.as_ref().unwrap_or(&empty);
    let safe = ann
        .get(SAFE_TO_EVICT)
        .map(|v| v.trim().to_ascii_lowercase());
    let mut out = Vec::new();
    if safe.as_deref() == Some("false") {
        out.push(Blocker::of_pod(pod, "safe_to_evict_false", ""));
    }
    if is_true(ann.get(DO_NOT_DISRUPT)) {
        out.push(Blocker::of_pod(pod, "do_not_disrupt", ""));
    }
    let covering: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|b| covers(b, pod)).collect();
    for b in covering.iter().filter(|b| allows_none(b)) {
        let name = b.metadata.name.as_deref().unwrap_or("");
        out.push(Blocker::of_pod(pod, "pdb", name));
    }
    // What the cluster autoscaler alone refuses, unless safe-to-evict says "true".
    if safe.as_deref() != Some("true") {
        if controller(pod).is_none() {
            out.push(Blocker::of_pod(pod, "no_controller", ""));
        }
        for v in local_volumes(pod, ann.get(SAFE_LOCAL_VOLUMES)) {
            out.push(Blocker::of_pod(pod, "local_storage", &v));
        }
        let system = pod.metadata.namespace.as_deref() == Some("kube-system");
        if system && covering.is_empty() {
            out.push(Blocker::of_pod(pod, "kube_system_no_pdb", ""));
        }
    }
    out
}

/// `emptyDir` volumes not on memory and `hostPath` volumes, less those the
/// safe-to-evict-local-volumes annotation lists.
fn local_volumes(pod: &Pod, safe: Option<&String>) -> Vec<String> {
    let safe: Vec<&str> = safe
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    volumes
        .iter()
        .filter(|v| {
            let on_disk = v
                .empty_dir
                .as_ref()
                .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
            (on_disk || v.host_path.is_some()) && !safe.contains(&v.name.as_str())
        })
        .map(|v| v.name.clone())
        .collect()
}

/// The PDB is in the pod's namespace and its selector matches the pod (a
/// `policy/v1` empty selector matches every pod, a missing one none).
fn covers(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if pdb.metadata.namespace != pod.metadata.namespace {
        return false;
    }
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    let empty = BTreeMap::new();
    selects(sel, pod.metadata.labels.as_ref().unwrap_or(&empty))
}

fn selects(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    by_label
        && sel.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or(&[]);
            let got = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => got.is_some_and(|g| values.contains(g)),
                "NotIn" => got.is_none_or(|g| !values.contains(g)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        })
}

/// The PDB allows no eviction now: its status says so once the disruption
/// controller has computed it for this generation; before that (or with no
/// controller, as on a bare API server) its spec does when it can only
/// allow none (`maxUnavailable: 0` or `0%`, `minAvailable: 100%`).
pub fn allows_none(pdb: &PodDisruptionBudget) -> bool {
    let generation = pdb.metadata.generation.unwrap_or(0);
    if let Some(s) = &pdb.status
        && s.observed_generation
            .is_some_and(|g| g >= generation && g > 0)
    {
        return s.disruptions_allowed.unwrap_or(0) <= 0;
    }
    let Some(spec) = &pdb.spec else { return false };
    let zero = |v: &IntOrString| match v {
        IntOrString::Int(n) => *n <= 0,
        IntOrString::String(s) => s.trim() == "0%" || s.trim() == "0",
    };
    let all = |v: &IntOrString| matches!(v, IntOrString::String(s) if s.trim() == "100%");
    spec.max_unavailable.as_ref().is_some_and(zero) || spec.min_available.as_ref().is_some_and(all)
}

#[cfg(test)]
mod tests;
