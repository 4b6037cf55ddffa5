//! Helpers of the adapter's end-to-end tests: the adapter binary, a real
//! Prometheus scraping a test target, a Kubernetes API fake, a test PKI and
//! the real `kubectl`/`curl` clients.

pub mod client;
pub mod fleet;
pub mod kubefake;
pub mod pki;
pub mod procs;
pub mod prom;
