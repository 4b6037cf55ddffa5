//! Simulated GPU nodes: the kubelet pod-resources socket, `/proc` and the NVML scenario.
