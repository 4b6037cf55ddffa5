//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod command_line;
mod disconnect;
mod docs;
mod h2c;
mod held;
mod peek;
mod pinned;
mod sleep;
#[allow(clippy::unwrap_used)]
mod support;
mod ttfb;
