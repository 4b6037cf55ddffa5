//! Whether the exporter fits the nodes and the target namespace: the
//! kubelet's pod-resources directory (from what the API says of each
//! node) and the namespace's Pod Security level.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::read::{NodeInfo, Read};

/// The chart's `exporter.podResourcesDir` default.
pub const DEFAULT_POD_RESOURCES_DIR: &str = "/var/lib/kubelet/pod-resources";
/// pod-resources v1 is GA from this kubelet minor on (docs/install.md).
const MIN_KUBELET_MINOR: u32 = 28;
const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// A check's outcome: fine, a problem to fix before installing, or not
/// known because a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ok,
    Problem,
    Unknown,
}

/// One check's outcome and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub verdict: Verdict,
    pub detail: String,
    /// The chart value the check suggests, if any: (key, value).
    #[serde(skip)]
    pub value: Option<(String, String)>,
}

fn check(verdict: Verdict, detail: String) -> Check {
    Check {
        verdict,
        detail,
        value: None,
    }
}

/// The kubelet's pod-resources directory on a node of a distribution that
/// moves the kubelet's root (the API shows it in the version or labels).
fn pod_resources_dir(n: &NodeInfo) -> &'static str {
    if n.kubelet_version.contains("k0s") {
        "/var/lib/k0s/kubelet/pod-resources"
    } else if n.labels.contains_key("microk8s.io/cluster") {
        "/var/snap/microk8s/common/var/lib/kubelet/pod-resources"
    } else {
        DEFAULT_POD_RESOURCES_DIR
    }
}

/// The minor version of `v1.33.2+k3s1`, if it reads as one.
fn minor(version: &str) -> Option<u32> {
    let rest = version.trim_start_matches('v').strip_prefix("1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The GPU nodes (labelled by GPU feature discovery), or every node when
/// none is labelled yet.
fn gpu_nodes(nodes: &[NodeInfo]) -> Vec<&NodeInfo> {
    let gpu: Vec<&NodeInfo> = nodes
        .iter()
        .filter(|n| {
            n.labels
                .get("nvidia.com/gpu.present")
                .is_some_and(|v| v == "true")
        })
        .collect();
    if gpu.is_empty() {
        nodes.iter().collect()
    } else {
        gpu
    }
}

/// The pod-resources socket path and kubelet version of the nodes.
pub fn kubelet(nodes: &Read<Vec<NodeInfo>>) -> Check {
    let nodes = match nodes {
        Ok(n) => n,
        Err(e) => return check(Verdict::Unknown, e.clone()),
    };
    if nodes.is_empty() {
        return check(Verdict::Ok, "no nodes registered: nothing to check".into());
    }
    let nodes = gpu_nodes(nodes);
    let old: Vec<&str> = nodes
        .iter()
        .filter(|n| minor(&n.kubelet_version).is_some_and(|m| m < MIN_KUBELET_MINOR))
        .map(|n| n.name.as_str())
        .collect();
    if !old.is_empty() {
        return check(
            Verdict::Problem,
            format!(
                "kubelet older than 1.{MIN_KUBELET_MINOR} (no pod-resources v1) on {}",
                old.join(", ")
            ),
        );
    }
    let mut dirs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for n in &nodes {
        dirs.entry(pod_resources_dir(n))
            .or_default()
            .insert(&n.name);
    }
    let count = nodes.len();
    match dirs.keys().copied().collect::<Vec<_>>()[..] {
        [dir] if dir == DEFAULT_POD_RESOURCES_DIR => check(
            Verdict::Ok,
            format!(
                "{count} node(s): the kubelet's pod-resources socket is under {dir}, the default"
            ),
        ),
        [dir] => Check {
            verdict: Verdict::Ok,
            detail: format!("{count} node(s): the kubelet's pod-resources socket is under {dir}"),
            value: Some(("exporter.podResourcesDir".into(), dir.into())),
        },
        _ => check(
            Verdict::Problem,
            format!(
                "nodes keep the pod-resources socket in different directories ({}): one exporter.podResourcesDir per release, so install once per kind of node",
                dirs.iter()
                    .map(|(d, ns)| format!(
                        "{d}: {}",
                        ns.iter().copied().collect::<Vec<_>>().join(", ")
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
    }
}

/// The target namespace's Pod Security level: the exporter mounts host
/// paths and runs as root, which `baseline` and `restricted` reject.
pub fn pod_security(namespace: &str, labels: &Read<Option<BTreeMap<String, String>>>) -> Check {
    let fix = format!("kubectl label namespace {namespace} {PSA_ENFORCE}=privileged --overwrite");
    match labels {
        Err(e) => check(Verdict::Unknown, e.clone()),
        Ok(None) => check(
            Verdict::Ok,
            format!(
                "namespace {namespace} does not exist yet; where the cluster enforces a default level, create it and run `{fix}`"
            ),
        ),
        Ok(Some(l)) => match l.get(PSA_ENFORCE).map(String::as_str) {
            None => check(
                Verdict::Ok,
                format!(
                    "namespace {namespace} has no {PSA_ENFORCE} label: the cluster's default level applies (privileged unless its admission configuration sets another; then `{fix}`)"
                ),
            ),
            Some("privileged") => check(
                Verdict::Ok,
                format!("namespace {namespace} enforces privileged"),
            ),
            Some(level) => check(
                Verdict::Problem,
                format!(
                    "namespace {namespace} enforces {level}: the exporter's hostPath volumes and root user are rejected; `{fix}`"
                ),
            ),
        },
    }
}
