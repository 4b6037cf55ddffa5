//! `gpu_pod_info`: one series per pod that holds a GPU or MIG instance or
//! runs a GPU process, with its identity labels. Prometheus joins any per-pod
//! series (a vLLM queue, a TGI batch size) on `namespace, pod` against it, so
//! the adapter can select inference servers by workload or pod label without
//! relabeling them. One series per pod, never per GPU or process.

use std::collections::BTreeMap;

use super::families::POD_INFO;
use super::map::PodMap;
use crate::metrics::{Family, Labels, Subject};

/// The family for one join: pods from the kubelet's allocations (exclusive,
/// time-sliced and MIG alike) and pods whose processes were attributed
/// (`process_pods`: pod UIDs), each once.
pub fn family<'a>(
    node: &str,
    map: &PodMap,
    process_pods: impl IntoIterator<Item = &'a String>,
    label_keys: &[super::labels::PodLabel],
) -> Family {
    let mut pods: BTreeMap<(String, String), Labels> = BTreeMap::new();
    for h in &map.holdings {
        pods.entry(h.pod_key.clone()).or_insert_with(|| {
            h.labels
                .iter()
                .filter(|(k, _)| *k != "container")
                .cloned()
                .collect()
        });
    }
    for uid in process_pods {
        let Some(meta) = map.pods.get(uid) else {
            continue;
        };
        pods.entry((meta.namespace.clone(), meta.name.clone()))
            .or_insert_with(|| {
                super::map::pod_labels(&meta.namespace, &meta.name, None, Some(meta), label_keys)
            });
    }
    let mut family = Family::of(&POD_INFO);
    for labels in pods.into_values() {
        let mut all: Labels = Vec::with_capacity(labels.len() + 1);
        all.push(("node", node.to_owned()));
        all.extend(labels);
        family.push(Subject::Global, all, 1.0);
    }
    family
}
