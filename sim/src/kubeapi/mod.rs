//! The Kubernetes API server of the simulated cluster.
