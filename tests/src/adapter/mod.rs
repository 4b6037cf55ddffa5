//! Helpers of the adapter's end-to-end tests: the adapter binary, a real
//! Prometheus scraping a test target, a Kubernetes API fake, a test PKI and
//! the real `kubectl`/`curl` clients, and a KEDA-like gRPC client in Python.

pub mod client;
pub mod fleet;
pub mod keda;
pub mod pki;
pub mod procs;
pub mod prom;
pub mod series;

/// The adapter's Kubernetes API is the shared in-memory fake.
pub use crate::kubeapi as kubefake;
