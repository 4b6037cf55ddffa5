//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod alerts_and_dashboards;
mod architecture;
mod dependencies;
mod dockerfile;
mod generated;
mod imports;
mod install_docs;
mod test_targets;
