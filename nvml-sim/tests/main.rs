//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod common;
mod default_scenario;
mod features;
mod live;
mod signatures;
