//! Where a GPU type can be had: the types of the table seen in each
//! cluster over the range (`gpu_info{model}` of its nodes), with the node
//! pools they were seen in. A move to a type no node of the cluster has
//! is a promise the advisor cannot keep: its saving is printed as
//! conditional on adding such a node pool, never totalled
//! (docs/right-sizing.md, "Where a type can be had").

use std::collections::{BTreeMap, BTreeSet};

use crate::history::History;

/// Table types per cluster, each with the node pools it was seen in.
#[derive(Debug, Clone, Default)]
pub struct Sites {
    /// None: nothing known (a table used alone): every type is taken as
    /// there. The advisor's run always knows.
    seen: Option<BTreeMap<String, BTreeMap<String, BTreeSet<String>>>>,
}

impl Sites {
    /// The table types (`type_of` an NVML model name) of every GPU
    /// Prometheus has a `gpu_info` for.
    pub fn seen(h: &History, type_of: impl Fn(&str) -> Option<String>) -> Self {
        let mut seen: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (id, d) in h.devices.iter().filter(|(id, _)| id.mig_uuid.is_empty()) {
            let Some(g) = d.model.as_deref().and_then(&type_of) else {
                continue;
            };
            let pools = seen
                .entry(id.cluster.clone())
                .or_default()
                .entry(g)
                .or_default();
            if let Some(p) = h.node_pool(&id.cluster, &id.node) {
                pools.insert(p.to_string());
            }
        }
        Self { seen: Some(seen) }
    }

    /// What a move of a workload of `cluster` to `gpu` needs that the
    /// advisor did not see; none when a node of that type is there.
    pub fn needs(&self, cluster: &str, gpu: &str) -> Option<String> {
        let seen = self.seen.as_ref()?;
        if seen.get(cluster).is_some_and(|t| t.contains_key(gpu)) {
            return None;
        }
        let at = if cluster.is_empty() {
            "the cluster".to_string()
        } else {
            format!("cluster {cluster}")
        };
        Some(format!(
            "a node pool of {gpu} in {at}: no {gpu} GPU seen there in the range (a pool scaled to zero nodes would not show)"
        ))
    }

    /// The first of `sorted` (cheapest first) whose type `cluster` has
    /// nodes of, and the first of all with what it needs when its type is
    /// not there.
    pub fn split<'a, T>(
        &self,
        cluster: &str,
        sorted: &'a [T],
        name: impl Fn(&T) -> &str,
    ) -> (Option<&'a T>, Option<(&'a T, String)>) {
        let needs = |x: &T| self.needs(cluster, name(x));
        let firm = sorted.iter().find(|x| needs(x).is_none());
        let cond = sorted.first().and_then(|x| needs(x).map(|n| (x, n)));
        (firm, cond)
    }

    /// The node pools of `cluster` a type was seen in, for the reasons.
    pub fn pools(&self, cluster: &str, gpu: &str) -> Vec<String> {
        self.seen
            .as_ref()
            .and_then(|s| s.get(cluster)?.get(gpu))
            .map(|p| p.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_there_only_in_the_clusters_it_was_seen_in() {
        let mut seen = BTreeMap::new();
        seen.insert(
            "east".to_string(),
            BTreeMap::from([("T4".to_string(), BTreeSet::from(["t4".to_string()]))]),
        );
        let s = Sites { seen: Some(seen) };
        assert_eq!(s.needs("east", "T4"), None);
        assert_eq!(s.pools("east", "T4"), ["t4"]);
        let n = s.needs("west", "T4").expect("not in west");
        assert!(n.starts_with("a node pool of T4 in cluster west"), "{n}");
        assert!(s.needs("", "L4").expect("none").contains("in the cluster"));
        assert_eq!(Sites::default().needs("east", "L4"), None);
    }
}
