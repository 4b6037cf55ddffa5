//! The families of the pod join: per-pod usage, allocations, prices and
//! the mapper's own health. Described once, read by the docs check.

use crate::metrics::Desc;

pub const POD_MEMORY: Desc = Desc::gauge(
    "gpu_pod_memory_used_bytes",
    "GPU memory used by a pod's processes on a GPU or MIG instance.",
    "bytes",
    &["node", "gpu", "uuid", "mig_uuid"],
);
pub const POD_SM: Desc = Desc::gauge(
    "gpu_pod_sm_utilization_ratio",
    "SM utilization of a pod's processes on a GPU or MIG instance (each pod its own share).",
    "ratio",
    &["node", "gpu", "uuid", "mig_uuid"],
);
pub const POD_ALLOCATION: Desc = Desc::gauge(
    "gpu_pod_allocation",
    "1 for each GPU or MIG instance a pod's container holds (kubelet pod-resources: device plugin or DRA claim).",
    "",
    &[
        "node",
        "gpu",
        "uuid",
        "mig_uuid",
        "resource",
        "allocation",
        "claim",
    ],
);
pub const POD_INFO: Desc = Desc::gauge(
    "gpu_pod_info",
    "1 for each pod holding a GPU or MIG instance or running a GPU process; the join target for per-pod series (namespace, pod).",
    "",
    &["node", "namespace", "pod", "workload", "workload_kind"],
);
pub const PRICE: Desc = Desc::gauge(
    "gpu_price_usd_per_hour",
    "Hourly price of the GPU: its node's own price (gpu_node_price_usd_per_hour) over its GPUs when the node facts know it, else --gpu-price for its model.",
    "USD/h",
    &[],
);
pub const UNATTRIBUTED_PROCESSES: Desc = Desc::gauge(
    "gpuscale_exporter_unattributed_processes",
    "GPU processes of the last collection without a pod, by reason.",
    "",
    &["reason"],
);
pub const PROCESS_UNATTRIBUTED: Desc = Desc::gauge(
    "gpu_process_unattributed",
    "1 for each GPU process without a pod, by reason (pod_unknown: a zombie of a deleted pod, or a pod the kubelet lost).",
    "",
    &["reason"],
);
pub const UNATTRIBUTED_PIDS: Desc = Desc::counter(
    "gpuscale_exporter_unattributed_pids_total",
    "GPU processes (counted once per pid) whose cgroup named no pod, by reason.",
    "",
    &["reason"],
);
pub const MAPPING_UP: Desc = Desc::gauge(
    "gpuscale_exporter_pod_mapping_up",
    "1 when the last kubelet pod-resources refresh succeeded; reason says why not.",
    "",
    &["reason"],
);
pub const METADATA_STALE: Desc = Desc::gauge(
    "gpuscale_exporter_pod_metadata_stale",
    "1 while the pod watch is failing or not yet synced (last known metadata kept).",
    "",
    &[],
);
pub const PODS: Desc = Desc::gauge(
    "gpuscale_exporter_pods",
    "Non-terminal pods on this node known from the pod watch.",
    "",
    &[],
);
pub const REFRESH_DURATION: Desc = Desc::gauge(
    "gpuscale_exporter_pod_refresh_duration_seconds",
    "Duration of the last kubelet pod-resources refresh (List).",
    "seconds",
    &[],
);
pub const JOIN_DURATION: Desc = Desc::gauge(
    "gpuscale_exporter_pod_join_duration_seconds",
    "Duration of the previous pod join (labels, pids, per-pod families) in the collection loop.",
    "seconds",
    &[],
);
pub const REFRESH_ERRORS: Desc = Desc::counter(
    "gpuscale_exporter_pod_refresh_errors_total",
    "Failed kubelet pod-resources refreshes.",
    "",
    &[],
);
pub const ATTRIBUTED_DEVICES: Desc = Desc::gauge(
    "gpuscale_exporter_pod_attributed_devices",
    "GPUs and MIG instances attributed to pods, by allocation path (device_plugin, dra).",
    "",
    &["allocation"],
);
pub const DRA_UNATTRIBUTED: Desc = Desc::gauge(
    "gpuscale_exporter_dra_devices_unattributed",
    "Devices held through DRA claims that got no pod labels, by reason (other_driver, not_in_slices, no_uuid).",
    "",
    &["reason"],
);
pub const DRA_MAPPING_UP: Desc = Desc::gauge(
    "gpuscale_exporter_dra_mapping_up",
    "1 while the node's ResourceSlices are listed and watched (DRA claims can be mapped to GPU UUIDs).",
    "",
    &[],
);
pub const NODE_INFO: Desc = Desc::gauge(
    "gpu_node_info",
    "1 for the exporter's node once its Node object was read; node_pool is the value of the first --node-pool-label it carries (absent when none).",
    "",
    &["node", "node_pool"],
);
pub const NODE_INFO_UP: Desc = Desc::gauge(
    "gpuscale_exporter_node_info_up",
    "1 when the last read of the exporter's Node object (its pool label) succeeded; reason says why not.",
    "",
    &["node", "reason"],
);

/// Every family of the pod join.
pub const FAMILIES: &[&Desc] = &[
    &POD_MEMORY,
    &POD_SM,
    &POD_ALLOCATION,
    &POD_INFO,
    &PRICE,
    &UNATTRIBUTED_PROCESSES,
    &PROCESS_UNATTRIBUTED,
    &UNATTRIBUTED_PIDS,
    &MAPPING_UP,
    &METADATA_STALE,
    &PODS,
    &REFRESH_DURATION,
    &JOIN_DURATION,
    &REFRESH_ERRORS,
    &ATTRIBUTED_DEVICES,
    &DRA_UNATTRIBUTED,
    &DRA_MAPPING_UP,
    &NODE_INFO,
    &NODE_INFO_UP,
];

/// Why a GPU process got no pod: the `reason` label of the unattributed
/// families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unattributed {
    CgroupUnreadable,
    CgroupMalformed,
    /// A host process, or a runtime path that names no pod.
    NotAPod,
    /// Its cgroup names a pod the watch does not know (yet).
    PodUnknown,
}

impl Unattributed {
    pub const ALL: [Unattributed; 4] = [
        Unattributed::CgroupUnreadable,
        Unattributed::CgroupMalformed,
        Unattributed::NotAPod,
        Unattributed::PodUnknown,
    ];

    /// What the cgroup file says, so counted once per pid.
    pub const FROM_CGROUP: [Unattributed; 3] = [
        Unattributed::CgroupUnreadable,
        Unattributed::CgroupMalformed,
        Unattributed::NotAPod,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Unattributed::CgroupUnreadable => "cgroup_unreadable",
            Unattributed::CgroupMalformed => "cgroup_malformed",
            Unattributed::NotAPod => "not_a_pod",
            Unattributed::PodUnknown => "pod_unknown",
        }
    }
}
