//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p gpuscale-dcgm-sim --test integration <file>::`.
mod abi;
