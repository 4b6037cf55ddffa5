//! Doubling retry delays with jitter, one shape for every loop that
//! reconnects (NVML, the XID listener, the kubelet and the pod watch): the
//! workspace's `gpuscale_util::backoff`.

pub use gpuscale_util::backoff::Backoff;
