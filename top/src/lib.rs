//! `gpuscale-top`: the GPUs of one node (an exporter's `/metrics`) or of a
//! cluster (a Prometheus), each with the pods that hold it.

pub mod cli;
pub mod expo;
pub mod model;
pub mod render;
pub mod source;
pub mod tls;
pub mod tui;
