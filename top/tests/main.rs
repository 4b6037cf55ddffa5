//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod cluster;
mod docs;
mod once;
mod rules;
mod screen;
mod tls;
mod watch;
