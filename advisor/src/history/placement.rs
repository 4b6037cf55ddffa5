//! Where a workload may be placed with others: the node pool of its nodes
//! (`gpu_node_info`, else a `node_pool` target label) and its tier (`gpuscale.dev/tier` on its pods, as a
//! label the exporter copies or an annotation kube-state-metrics serves,
//! else its namespace's label).

use super::{History, KEY, Key, Window};
use crate::Error;
use crate::prom::Prometheus;

/// The workload of a pod-level series: joined on its pod's `gpu_pod_info`.
fn per_pod(series: &str, keep: &str, r: &str) -> String {
    format!(
        "max by ({KEY}, {keep}) (max by (cluster, namespace, pod, {keep}) ({series}) \
         * on (cluster, namespace, pod) group_left (workload_kind, workload) \
         max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info[{r}])))"
    )
}

impl History {
    pub(super) fn read_placement(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let r = &w.range;
        for s in p.query(&format!(
            "max by (cluster, node, node_pool) (last_over_time(gpu_node_info{{node_pool!=\"\"}}[{r}]))"
        ))? {
            self.node_pools.insert(
                (s.label("cluster").into(), s.label("node").into()),
                s.label("node_pool").into(),
            );
        }
        // A `node_pool` target label on the exporter's series (relabelled
        // from the node's labels) where the exporter read no Node.
        for s in p.query(&format!(
            "max by (cluster, node, node_pool) (last_over_time(gpu_info{{node_pool!=\"\"}}[{r}]))"
        ))? {
            self.node_pools
                .entry((s.label("cluster").into(), s.label("node").into()))
                .or_insert_with(|| s.label("node_pool").into());
        }
        for s in p.query(&format!(
            "max by (cluster, namespace, label_gpuscale_dev_tier) \
             (last_over_time(kube_namespace_labels{{label_gpuscale_dev_tier!=\"\"}}[{r}]))"
        ))? {
            self.namespace_tiers.insert(
                (s.label("cluster").into(), s.label("namespace").into()),
                s.label("label_gpuscale_dev_tier").into(),
            );
        }
        let label = format!(
            "max by ({KEY}, label_gpuscale_dev_tier) \
             (last_over_time(gpu_pod_info{{label_gpuscale_dev_tier!=\"\"}}[{r}]))"
        );
        let annotation = per_pod(
            &format!(
                "last_over_time(kube_pod_annotations{{annotation_gpuscale_dev_tier!=\"\"}}[{r}])"
            ),
            "annotation_gpuscale_dev_tier",
            r,
        );
        for (q, name) in [
            (label, "label_gpuscale_dev_tier"),
            (annotation, "annotation_gpuscale_dev_tier"),
        ] {
            for s in p.query(&q)? {
                if let Some(f) = self.workloads.get_mut(&Key::of(&s)) {
                    let t = s.label(name).to_string();
                    if !f.tiers.contains(&t) {
                        f.tiers.push(t);
                    }
                }
            }
        }
        Ok(())
    }

    /// The node pool of a node, if its exporter read one.
    pub fn node_pool(&self, cluster: &str, node: &str) -> Option<&str> {
        self.node_pools
            .get(&(cluster.to_string(), node.to_string()))
            .map(String::as_str)
    }
}
