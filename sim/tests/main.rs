//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod apply;
mod economics;
mod endpoints;
mod explain;
mod kubeapi;
mod kubectl;
mod vllm;
mod workloads;
