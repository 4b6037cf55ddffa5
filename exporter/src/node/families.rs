//! The node-economics families: few per node, each named in
//! docs/metrics.md and counted in docs/operations.md. Every one of them
//! names its node itself; all but the `up` signal are absent while the
//! facts are unknown.

use crate::metrics::Desc;

pub const GPUS: Desc = Desc::gauge(
    "gpu_node_gpus",
    "GPUs of the node by state: allocatable (answering NVML), allocated (held by a pod through the kubelet), active (any kernel time in the last collection; absent while an allocated GPU has no activity reading).",
    "",
    &["node", "state"],
);
pub const CAPACITY: Desc = Desc::gauge(
    "gpu_node_capacity_info",
    "1 for the node: its instance type (node.kubernetes.io/instance-type) and capacity type (spot, on-demand, unknown) from the labels the platforms set.",
    "",
    &["node", "instance_type", "capacity_type"],
);
pub const PRICE: Desc = Desc::gauge(
    "gpu_node_price_usd_per_hour",
    "The node's own hourly price at its capacity type; source says where it came from (annotation, label, file_node, file, table).",
    "USD/h",
    &["node", "source"],
);
pub const SPOT_PRICE: Desc = Desc::gauge(
    "gpu_node_spot_price_usd_per_hour",
    "Hourly price of the node's instance type on Spot capacity, from the price table or file (what a move to Spot would cost).",
    "USD/h",
    &["node"],
);
pub const BLOCKER: Desc = Desc::gauge(
    "gpu_node_blocker",
    "1 for each thing that would keep the node if its GPU work left: a pod that is not a DaemonSet pod with the autoscalers' reason (kind), or the node's own annotation; at most --node-blockers-max of them.",
    "",
    &["node", "namespace", "pod", "kind", "detail"],
);
pub const BLOCKERS: Desc = Desc::gauge(
    "gpu_node_blockers",
    "Blockers found on the node, including those past --node-blockers-max that gpu_node_blocker does not name.",
    "",
    &["node"],
);
pub const UP: Desc = Desc::gauge(
    "gpuscale_exporter_node_facts_up",
    "1 when the last read of the node's facts (Node, its pods, their PodDisruptionBudgets) succeeded and the kubelet's allocations are known; reason says why not.",
    "",
    &["node", "reason"],
);

/// Every node-economics family.
pub const FAMILIES: &[&Desc] = &[
    &GPUS,
    &CAPACITY,
    &PRICE,
    &SPOT_PRICE,
    &BLOCKER,
    &BLOCKERS,
    &UP,
];
