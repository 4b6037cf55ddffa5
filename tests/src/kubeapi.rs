//! The in-memory Kubernetes API server the suites start: the simulated
//! cluster's own (`gpuscale_sim::kubeapi`), so tests and `gpuscale-sim` share
//! one fake.

pub use gpuscale_sim::kubeapi::*;
