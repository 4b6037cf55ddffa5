//! Shared helpers of the end-to-end tests.

pub mod adapter;
pub mod bins;
pub mod exporter;
