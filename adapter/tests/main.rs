//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod command_line;
mod crd;
mod docs;
mod limits;
mod poll_cache;
mod selector_fuzz;
mod tls_reload;
