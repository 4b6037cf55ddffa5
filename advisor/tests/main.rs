//! The integration tests of this crate, one module per story file, in one
//! binary: `cargo test -p <crate> --test integration <file>::`.

mod coverage;
mod decode;
mod docs;
mod fleet;
mod hostile;
mod moved;
mod plan;
mod prefill;
mod serving;
mod sglang;
mod sites;
mod synth;
mod walkthrough;
mod week;
