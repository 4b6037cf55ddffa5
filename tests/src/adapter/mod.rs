//! Helpers of the adapter's end-to-end tests: the adapter binary, a real
//! Prometheus scraping a test target, a Kubernetes API fake, a test PKI and
//! the real `kubectl`/`curl` clients, a KEDA-like gRPC client in Python, and
//! the world the suites build from them.

pub mod batch;
pub mod client;
pub mod fleet;
pub mod holders;
pub mod keda;
pub mod pki;
pub mod procs;
pub mod prom;
pub mod series;
pub mod world;

/// The adapter's Kubernetes API is the shared in-memory fake.
pub use crate::kubeapi as kubefake;
