//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod command_line;
mod fleet;
mod frontier;
mod hostile_input;
mod replay;
