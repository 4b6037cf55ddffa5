//! The adapter's signal seam, shared by every role of the adapter: the
//! [`provider`] trait (readings, errors) that the metrics APIs, the KEDA
//! scaler and the scale-to-zero controller read through, whatever serves
//! it (the Prometheus poll cache in `gpuscale-adapter`); [`metric_def`]s
//! and the [`objects`] they describe; [`selector`] (label selectors, with
//! [`limits`] on their size); [`activation`] (a reading against its
//! threshold); [`quantity`] (values as Kubernetes quantities and KEDA's
//! int64); [`watch`] (reads that wake push streams); [`exposition`]
//! (self-metrics helpers); [`hash`].
//!
//! No Kubernetes client, gRPC or TLS: the crates that need one depend on
//! this one, never the other way round.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod activation;
pub mod exposition;
pub mod hash;
pub mod limits;
pub mod metric_def;
pub mod objects;
pub mod provider;
pub mod quantity;
pub mod selector;
pub mod watch;
