//! Shared helpers of the end-to-end tests.

pub mod adapter;
pub mod alerts;
pub mod bins;
pub mod exporter;
pub mod pods;
