//! Pod identity: which pod, namespace, container and workload holds each GPU,
//! MIG instance and GPU process.
//!
//! Three sources, each refreshed in the background, never per scrape:
//! - the kubelet pod-resources API (`podresources`): pod → devices;
//! - the Kubernetes API pod watch (`kubeapi`): pod → UID, owner, labels,
//!   container IDs, phase;
//! - `/proc/<pid>/cgroup` (`cgroup`): GPU process → pod UID, container ID;
//! - the node's DRA ResourceSlices (`slices`): a claimed (driver, pool,
//!   device) → GPU or MIG UUID;
//! - the node's own Node object (`node`): its pool label.
//!
//! `map` joins them; `mapper` runs the tasks and the per-collection join;
//! `info` writes one `gpu_pod_info` series per GPU pod, the join target for
//! per-pod series of inference servers.

pub mod args;
pub mod cgroup;
pub mod families;
pub mod info;
pub mod kubeapi;
pub mod labels;
pub mod map;
pub mod mapper;
pub mod node;
pub mod node_facts;
pub mod owner;
pub mod podlite;
pub mod podresources;
pub mod slices;

pub use args::PodArgs;
pub use families::FAMILIES;
pub use mapper::{PodMapper, PodsError};

#[cfg(test)]
mod tests;
