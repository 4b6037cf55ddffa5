//! A simulated GPU cluster for trying gpuscale and for its end-to-end tests:
//! a Kubernetes API server on its wire protocol (`kubeapi`) and simulated
//! nodes (`node`: the kubelet's pod-resources socket, a `/proc` tree and the
//! NVML simulator's scenario). Nothing here is linked into the production
//! exporter or adapter.

pub mod demand;
pub mod kubeapi;
pub mod node;
