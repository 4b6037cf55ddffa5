//! gpuscale's own scale-to-zero controller: parks idle GPU workloads at 0
//! replicas through the `scale` subresource and wakes them on activation,
//! for clusters without KEDA or the HPA's `minReplicas: 0`.
//!
//! [`crd`] is the `ScaleToZeroPolicy` resource; [`decide`] the pure
//! decisions over one round's reads.

pub mod crd;
pub mod decide;
